// Accept-Language → the language of every message: English by default, Portuguese when the client
// prefers it (pt, pt-BR, pt-PT..., quality values honoured). Negotiation is the `negotiator` package's.
import Negotiator from 'negotiator';

export const LANGUAGES = ['en', 'pt'] as const;
export type Language = (typeof LANGUAGES)[number];

export function negotiateLanguage(acceptLanguage: string | string[] | undefined): Language {
  const header = Array.isArray(acceptLanguage) ? acceptLanguage.join(',') : acceptLanguage;
  if (!header) return 'en';
  const [best] = new Negotiator({ headers: { 'accept-language': header } }).languages([...LANGUAGES]);
  return best === 'pt' ? 'pt' : 'en';
}
