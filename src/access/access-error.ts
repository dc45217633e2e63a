// Errors a tenant administrator can cause while editing access-profile templates or reading profiles.
// Each has a stable `code` and a message in English and Portuguese saying what to do.
import { localizedErrorClass, type LocalizedMessages } from '../errors/localized-error.ts';

export const ACCESS_MESSAGES = {
  ACCESS_TEMPLATE_NOT_FOUND: {
    en: 'No access-profile template with this id exists in your tenant; check the id.',
    pt: 'Não existe modelo de perfil de acesso com este id no seu tenant; confira o id.',
  },
  ACCESS_TEMPLATE_VERSION_CONFLICT: {
    en: 'The template changed since you reviewed the edit; reload it, review the impact again and confirm.',
    pt: 'O modelo mudou desde que você revisou a edição; recarregue-o, revise o impacto de novo e confirme.',
  },
  ACCESS_TEMPLATE_NO_CHANGE: {
    en: 'The template already has exactly these permissions; there is nothing to confirm.',
    pt: 'O modelo já tem exatamente estas permissões; não há nada a confirmar.',
  },
  ACCESS_TEMPLATE_REASON_REQUIRED: {
    en: 'Say why the template changes: the reason is kept in its change history.',
    pt: 'Diga por que o modelo muda: o motivo fica no histórico de alterações.',
  },
  ACCESS_TEMPLATE_PERMISSION_NOT_FOUND: {
    en: 'One of the permissions does not exist or was retired; choose permissions from the current list.',
    pt: 'Uma das permissões não existe ou foi retirada; escolha permissões da lista atual.',
  },
  ACCESS_TEMPLATE_PERMISSION_ABOVE_SCOPE: {
    en: 'One of the permissions is above the scope of this template (a broker template takes only broker permissions); remove it.',
    pt: 'Uma das permissões está acima do escopo deste modelo (um modelo de corretor aceita só permissões de corretor); remova-a.',
  },
  ACCESS_TEMPLATE_DECISION_UNKNOWN_PROFILE: {
    en: 'A decision names a profile that does not follow this template; decide only for the profiles the review listed.',
    pt: 'Uma decisão cita um perfil que não segue este modelo; decida só para os perfis listados na revisão.',
  },
  ACCESS_PROFILE_NOT_FOUND: {
    en: 'No access profile with this id exists in your tenant; check the id.',
    pt: 'Não existe perfil de acesso com este id no seu tenant; confira o id.',
  },
} as const satisfies LocalizedMessages;

export type AccessErrorCode = keyof typeof ACCESS_MESSAGES;

export class AccessError extends localizedErrorClass('AccessError', ACCESS_MESSAGES) {}
