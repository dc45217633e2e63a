// Errors an administrator can cause while giving a broker a store code or when none can be resolved.
// Each has a stable `code` and a message in English and Portuguese saying what to do.
import { localizedErrorClass, type LocalizedMessages } from '../errors/localized-error.ts';

export const BROKER_STORE_CODE_MESSAGES = {
  BROKER_NOT_IN_TENANT: {
    en: 'This broker does not work with your tenant or is disabled; choose an active broker of the tenant.',
    pt: 'Este corretor não trabalha com o seu tenant ou está desativado; escolha um corretor ativo do tenant.',
  },
  STORE_CODE_NOT_FOUND: {
    en: 'No store code with this id exists for your tenant at this institution; check the code and the institution.',
    pt: 'Não existe código de loja com este id no seu tenant para esta instituição; confira o código e a instituição.',
  },
  STORE_CODE_DISABLED: {
    en: 'This store code is disabled; choose an active store code.',
    pt: 'Este código de loja está desativado; escolha um código de loja ativo.',
  },
  BROKER_STORE_CODE_REGIME_INVALID: {
    en: 'Unknown regime; use standard, substabelecido, indicado or subzero.',
    pt: 'Regime desconhecido; use standard, substabelecido, indicado ou subzero.',
  },
  BROKER_STORE_CODE_NEEDS_GROUP_ACCOUNT: {
    en: 'Regime standard needs a store code owned by a group account; choose one of the group store codes.',
    pt: 'O regime standard exige um código de loja de uma conta do grupo; escolha um dos códigos do grupo.',
  },
  BROKER_STORE_CODE_NEEDS_BROKER_OWNED: {
    en: 'This regime needs a store code owned by the broker itself; choose one of the broker\'s store codes.',
    pt: 'Este regime exige um código de loja do próprio corretor; escolha um dos códigos do corretor.',
  },
  BROKER_STORE_CODE_PERIOD_INVALID: {
    en: 'The validity period is not valid: give dates as YYYY-MM-DD with the end (exclusive) after the start.',
    pt: 'O período de validade não é válido: informe datas AAAA-MM-DD com o fim (exclusivo) depois do início.',
  },
  BROKER_STORE_CODE_OVERLAP: {
    en: 'The broker already has a store code at this institution for part of this period; end that period first or choose other dates.',
    pt: 'O corretor já tem código de loja nesta instituição em parte deste período; encerre esse período antes ou escolha outras datas.',
  },
  BROKER_STORE_CODE_UNRESOLVED: {
    en: 'The broker has no active store code at this institution on this date; assign one to the broker first.',
    pt: 'O corretor não tem código de loja ativo nesta instituição nesta data; atribua um ao corretor antes.',
  },
} as const satisfies LocalizedMessages;

export type BrokerStoreCodeErrorCode = keyof typeof BROKER_STORE_CODE_MESSAGES;

export class BrokerStoreCodeError extends localizedErrorClass('BrokerStoreCodeError', BROKER_STORE_CODE_MESSAGES) {}
