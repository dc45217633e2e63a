// The console's own refusal messages in English and Portuguese (the language from Accept-Language, as
// the HTTP API's errors). They say what to do next and never contain a credential or a value sent.
import { negotiateLanguage, type Language } from '../http/language.ts';

type Params = Record<string, string | number>;

const MESSAGES = {
  CONSOLE_LOGIN_THROTTLED: {
    en: (p: Params) => `Too many failed logins from your address: wait ${p.seconds} s before trying again.`,
    pt: (p: Params) => `Muitas tentativas de login falharam a partir do seu endereço: aguarde ${p.seconds} s antes de tentar de novo.`,
  },
  CONSOLE_TOKEN_INVALID: {
    en: () => 'That is not the console token.',
    pt: () => 'Este não é o token do console.',
  },
  CONSOLE_LOGIN_REQUIRED: {
    en: () => 'Log in with your name and the console token first (sessions end at logout or when they expire).',
    pt: () => 'Entre primeiro com seu nome e o token do console (as sessões terminam no logout ou quando expiram).',
  },
  CONSOLE_CONFIRMATION_REQUIRED: {
    en: () => 'This action needs its confirmation: open its page from the console and confirm there.',
    pt: () => 'Esta ação precisa de confirmação: abra a página dela no console e confirme ali.',
  },
} satisfies Record<string, Record<Language, (p: Params) => string>>;

export type ConsoleMessageCode = keyof typeof MESSAGES;

/** The message of `code` in the language the request prefers. */
export function consoleMessage(code: ConsoleMessageCode, acceptLanguage: string | string[] | undefined, params: Params = {}): string {
  return MESSAGES[code][negotiateLanguage(acceptLanguage)](params);
}
