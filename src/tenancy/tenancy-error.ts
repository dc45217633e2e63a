// Errors a platform operator can cause while creating a tenant. Each has a stable `code` and a message
// in English and Portuguese saying what to do; none echoes a value the caller sent.
import { localizedErrorClass, type LocalizedMessages } from '../errors/localized-error.ts';

export const TENANCY_MESSAGES = {
  TENANT_BLUEPRINT_NOT_FOUND: {
    en: 'No tenant blueprint with this id exists; choose one of the platform blueprints.',
    pt: 'Não existe modelo de tenant com este id; escolha um dos modelos da plataforma.',
  },
  TENANT_BLUEPRINT_DISABLED: {
    en: 'This tenant blueprint is disabled; choose an enabled blueprint.',
    pt: 'Este modelo de tenant está desativado; escolha um modelo ativo.',
  },
  TENANT_UID_TAKEN: {
    en: 'A tenant with this public id already exists; choose another id or omit it to get a generated one.',
    pt: 'Já existe um tenant com este id público; escolha outro id ou omita-o para receber um gerado.',
  },
  TENANT_NAME_INVALID: {
    en: 'The tenant name is empty; give the tenant a name.',
    pt: 'O nome do tenant está vazio; dê um nome ao tenant.',
  },
} as const satisfies LocalizedMessages;

export type TenancyErrorCode = keyof typeof TENANCY_MESSAGES;

export class TenancyError extends localizedErrorClass('TenancyError', TENANCY_MESSAGES) {}
