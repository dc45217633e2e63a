// Errors a user can cause while registering, transferring or revealing bank users. Each has a stable
// `code` and a message in English and Portuguese saying what to do. Messages never carry a bank-user
// number or a password, and the ones about existence are neutral: they never tell whether a bank user
// exists in another tenant or for another broker.
import { localizedErrorClass, type LocalizedMessages } from '../errors/localized-error.ts';

export const BANK_USER_MESSAGES = {
  BANK_USER_NUMBER_INVALID: {
    en: 'The bank-user number is empty; type the number the institution gave the bank user.',
    pt: 'O número do usuário de banco está vazio; digite o número que a instituição deu ao usuário.',
  },
  BANK_USER_NUMBER_UNAVAILABLE: {
    en: 'This bank user cannot be registered with these details; check the bank-user number, or contact support.',
    pt: 'Este usuário de banco não pode ser cadastrado com estes dados; confira o número do usuário de banco ou fale com o suporte.',
  },
  BANK_USER_NOT_FOUND: {
    en: 'No bank user with this id is assigned to your broker; check the id.',
    pt: 'Nenhum usuário de banco com este id está atribuído ao seu corretor; confira o id.',
  },
  BANK_USER_BROKER_NOT_IN_TENANT: {
    en: 'This broker does not work with your tenant or is disabled; choose an active broker of the tenant.',
    pt: 'Este corretor não trabalha com o seu tenant ou está desativado; escolha um corretor ativo do tenant.',
  },
  BANK_USER_ORIGIN_LINK_NOT_FOUND: {
    en: 'The person of this bank user does not act for the broker on that date; link the member to the broker first.',
    pt: 'A pessoa deste usuário de banco não atua pelo corretor nessa data; vincule o membro ao corretor antes.',
  },
  BANK_USER_PARTY_MISMATCH: {
    en: 'The acting link belongs to another person than the bank user; choose a link of the bank user\'s own person.',
    pt: 'O vínculo de atuação é de outra pessoa que não a do usuário de banco; escolha um vínculo da própria pessoa.',
  },
  BANK_USER_TRANSFER_SAME_BROKER: {
    en: 'The bank user is already assigned to this broker; choose another broker to transfer to.',
    pt: 'O usuário de banco já está atribuído a este corretor; escolha outro corretor para transferir.',
  },
  BANK_USER_DATE_INVALID: {
    en: 'The date is not valid: give it as YYYY-MM-DD, after the start of the current assignment.',
    pt: 'A data não é válida: informe-a como AAAA-MM-DD, depois do início da atribuição atual.',
  },
  BANK_USER_REASON_REQUIRED: {
    en: 'Say why: the reason is kept in the bank user\'s history.',
    pt: 'Diga o motivo: ele fica no histórico do usuário de banco.',
  },
  BANK_CREDENTIAL_REQUEST_INVALID: {
    en: 'The request must carry only the bank user id; the viewer is taken from your session.',
    pt: 'A requisição deve conter só o id do usuário de banco; quem visualiza é obtido da sua sessão.',
  },
  BANK_CREDENTIAL_PORTAL_ONLY: {
    en: 'A bank password can be revealed only in the portal; open it there.',
    pt: 'A senha de banco só pode ser revelada no portal; abra-a por lá.',
  },
  BANK_CREDENTIAL_VIEWER_NOT_ALLOWED: {
    en: 'Your session does not act for this broker in this tenant today; choose the broker in the portal first.',
    pt: 'Sua sessão não atua por este corretor neste tenant hoje; escolha o corretor no portal antes.',
  },
  BANK_CREDENTIAL_NO_ACTIVE_VERSION: {
    en: 'This bank user has no current password to reveal; set a new password first.',
    pt: 'Este usuário de banco não tem senha atual para revelar; defina uma nova senha antes.',
  },
  BANK_CREDENTIAL_ALREADY_REVEALED: {
    en: 'This password was already revealed once; set a new password to reveal again.',
    pt: 'Esta senha já foi revelada uma vez; defina uma nova senha para revelar de novo.',
  },
  BANK_CREDENTIAL_UNREADABLE: {
    en: 'The stored bank password cannot be read with the configured key; ask an operator to check the credential key.',
    pt: 'A senha de banco guardada não pode ser lida com a chave configurada; peça a um operador que confira a chave.',
  },
  BANK_CREDENTIAL_KEY_INVALID: {
    en: 'The bank credential key must be 32 bytes; configure a 256-bit key.',
    pt: 'A chave das credenciais de banco deve ter 32 bytes; configure uma chave de 256 bits.',
  },
} as const satisfies LocalizedMessages;

export type BankUserErrorCode = keyof typeof BANK_USER_MESSAGES;

export class BankUserError extends localizedErrorClass('BankUserError', BANK_USER_MESSAGES) {}
