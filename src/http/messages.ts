// Every message the HTTP API sends, keyed by its stable code, in English and Portuguese. Messages say
// what to do next and never contain a credential or a value sent by the client.
import type { Language } from './language.ts';

type Params = Record<string, string | number>;
type Message = Record<Language, (p: Params) => string>;

const list = (items: string, lang: Language) => items || (lang === 'pt' ? 'valores' : 'values');

export const MESSAGES = {
  UNAUTHENTICATED: {
    en: () => 'Authentication required: send a valid session token as "Authorization: Bearer <token>" or in the session cookie.',
    pt: () => 'Autenticação necessária: envie um token de sessão válido em "Authorization: Bearer <token>" ou no cookie de sessão.',
  },
  ORIGIN_NOT_ALLOWED: {
    en: () => 'This write is authenticated by cookie but does not come from an allowed origin; send it from an allowed site or authenticate with a Bearer token.',
    pt: () => 'Esta escrita é autenticada por cookie mas não vem de uma origem permitida; envie-a de um site permitido ou autentique com um token Bearer.',
  },
  PERMISSION_DENIED: {
    en: () => 'Your session lacks the permission this route requires; ask an administrator to grant it.',
    pt: () => 'Sua sessão não tem a permissão que esta rota exige; peça a um administrador que a conceda.',
  },
  RUN_NOT_FOUND: {
    en: () => 'No task run with this id exists for your tenant; check the id.',
    pt: () => 'Não existe execução de tarefa com este id no seu tenant; confira o id.',
  },
  ROUTE_NOT_FOUND: {
    en: () => 'No route matches this path; see /docs for the available routes.',
    pt: () => 'Nenhuma rota corresponde a este caminho; veja /docs para as rotas disponíveis.',
  },
  METHOD_NOT_ALLOWED: {
    en: (p) => `This path does not accept this method; use ${p.allow}.`,
    pt: (p) => `Este caminho não aceita este método; use ${p.allow}.`,
  },
  UNSUPPORTED_MEDIA_TYPE: {
    en: () => 'Unsupported content type: send request bodies as application/json.',
    pt: () => 'Tipo de conteúdo não suportado: envie o corpo da requisição como application/json.',
  },
  MALFORMED_JSON: {
    en: () => 'The request body is not valid JSON; fix its syntax and retry.',
    pt: () => 'O corpo da requisição não é um JSON válido; corrija a sintaxe e tente novamente.',
  },
  BODY_TOO_LARGE: {
    en: (p) => `The request body is too large; send at most ${p.limit} bytes.`,
    pt: (p) => `O corpo da requisição é grande demais; envie no máximo ${p.limit} bytes.`,
  },
  VALIDATION_FAILED: {
    en: (p) => `Invalid ${p.location}: ${list(String(p.fields), 'en')}; correct them and retry.`,
    pt: (p) => `${p.location} inválido(s): ${list(String(p.fields), 'pt')}; corrija e tente novamente.`,
  },
  PATH_FORBIDDEN: {
    en: () => 'This path points outside the served files; request a path under the directory itself.',
    pt: () => 'Este caminho aponta para fora dos arquivos servidos; peça um caminho dentro do próprio diretório.',
  },
  URI_TOO_LONG: {
    en: () => 'A path parameter is too long; check the URL (identifiers are short).',
    pt: () => 'Um parâmetro do caminho é longo demais; confira a URL (identificadores são curtos).',
  },
  RANGE_NOT_SATISFIABLE: {
    en: () => 'The requested Range lies outside the file; ask for a range within its size or omit Range.',
    pt: () => 'O Range pedido está fora do arquivo; peça um intervalo dentro do tamanho dele ou omita o Range.',
  },
  HEADERS_TOO_LARGE: {
    en: (p) => `The request headers are too large; send at most ${p.limit} bytes of headers.`,
    pt: (p) => `Os cabeçalhos da requisição são grandes demais; envie no máximo ${p.limit} bytes de cabeçalhos.`,
  },
  REQUEST_TIMEOUT: {
    en: () => 'The request did not arrive in time; send its headers and body without pausing and retry.',
    pt: () => 'A requisição não chegou a tempo; envie cabeçalhos e corpo sem pausas e tente novamente.',
  },
  HOST_REQUIRED: {
    en: () => 'An HTTP/1.1 request needs a Host header; add it and retry.',
    pt: () => 'Uma requisição HTTP/1.1 precisa do cabeçalho Host; adicione-o e tente novamente.',
  },
  HOST_DUPLICATED: {
    en: () => 'A request carries exactly one Host header; send one and retry.',
    pt: () => 'Uma requisição leva exatamente um cabeçalho Host; envie só um e tente novamente.',
  },
  EXPECTATION_FAILED: {
    en: () => 'This server meets no Expect header other than 100-continue; remove it and retry.',
    pt: () => 'Este servidor não atende cabeçalho Expect além de 100-continue; remova-o e tente novamente.',
  },
  BAD_REQUEST: {
    en: () => 'The request could not be understood; check its URL, headers and body.',
    pt: () => 'A requisição não pôde ser entendida; confira URL, cabeçalhos e corpo.',
  },
  NOT_READY: {
    en: (p) => `The service is not ready: ${p.reasons}.`,
    pt: (p) => `O serviço não está pronto: ${p.reasons}.`,
  },
  INTERNAL_ERROR: {
    en: () => 'An unexpected error occurred; try again later. If it persists, contact support.',
    pt: () => 'Ocorreu um erro inesperado; tente novamente mais tarde. Se persistir, contate o suporte.',
  },
} satisfies Record<string, Message>;

export type MessageCode = keyof typeof MESSAGES;

/** Words that fill message parameters (locations of a validation failure, readiness reasons). */
export const TERMS: Record<string, Record<Language, string>> = {
  params: { en: 'path parameters', pt: 'Parâmetros do caminho' },
  querystring: { en: 'query parameters', pt: 'Parâmetros de consulta' },
  body: { en: 'request body', pt: 'Corpo da requisição' },
  headers: { en: 'headers', pt: 'Cabeçalhos' },
  database_unreachable: { en: 'the database is unreachable', pt: 'o banco de dados está inacessível' },
  redis_unreachable: { en: 'Redis is unreachable', pt: 'o Redis está inacessível' },
  migration_pending: {
    en: 'the database lacks migration {name}; run the migrator (deploy)',
    pt: 'o banco de dados não tem a migração {name}; execute o migrator (deploy)',
  },
};

export function term(key: string, lang: Language, params: Params = {}): string {
  const text = TERMS[key]?.[lang] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name: string) => String(params[name] ?? ''));
}

export function message(code: MessageCode, lang: Language, params: Params = {}): string {
  return MESSAGES[code][lang](params);
}
