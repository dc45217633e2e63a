// Errors the API raises and how every error, ours or Fastify's, becomes the error envelope with a
// stable code and a message in the request's language. Clients never see stacks or internal text.
import { STATUS_CODES } from 'node:http';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HTTP_BODY_LIMIT_BYTES } from '../config/limits.ts';
import { HTTP_MAX_HEADER_BYTES } from './http-server-options.ts';
import type { ErrorEnvelope } from './envelope.ts';
import { negotiateLanguage } from './language.ts';
import { message, term, type MessageCode } from './messages.ts';

export class HttpError extends Error {
  readonly statusCode: number;
  readonly code: MessageCode;
  readonly params: Record<string, string | number>;
  readonly details: Record<string, unknown> | undefined;
  constructor(
    statusCode: number,
    code: MessageCode,
    options: { params?: Record<string, string | number>; details?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(code, { cause: options.cause });
    this.statusCode = statusCode;
    this.code = code;
    this.params = options.params ?? {};
    this.details = options.details;
  }
}

export function errorBody(
  request: FastifyRequest,
  code: MessageCode,
  params: Record<string, string | number> = {},
  details?: Record<string, unknown>,
): ErrorEnvelope {
  const lang = negotiateLanguage(request.headers['accept-language']);
  const localized = { ...params };
  if (typeof localized.location === 'string') localized.location = term(localized.location, lang);
  return { success: false, error: { code, message: message(code, lang, localized), ...(details ? { details } : {}) } };
}

function sendError(reply: FastifyReply, status: number, body: ErrorEnvelope): void {
  const lang = negotiateLanguage(reply.request.headers['accept-language']);
  reply.code(status).header('content-language', lang).type('application/json; charset=utf-8').send(body);
}

type ValidationIssue = { instancePath?: string; params?: Record<string, unknown> };

/** Field names from the route schema only (never a key or value the client sent). */
function failedFields(issues: ValidationIssue[]): string {
  const names = new Set<string>();
  for (const issue of issues) {
    const path = (issue.instancePath ?? '').replace(/^\//, '').replaceAll('/', '.');
    const missing = typeof issue.params?.missingProperty === 'string' ? issue.params.missingProperty : '';
    const name = [path, missing].filter(Boolean).join('.');
    if (name && /^[A-Za-z0-9_.]+$/.test(name)) names.add(name);
  }
  return [...names].join(', ');
}

/** The status, code and params for any error thrown while handling a request. */
export function classify(error: FastifyError | HttpError): {
  status: number;
  code: MessageCode;
  params: Record<string, string | number>;
  details?: Record<string, unknown>;
} {
  if (error instanceof HttpError) return { status: error.statusCode, code: error.code, params: error.params, details: error.details };
  const fe = error;
  if (fe.validation) {
    return {
      status: 400,
      code: 'VALIDATION_FAILED',
      params: { location: fe.validationContext ?? 'body', fields: failedFields(fe.validation) },
    };
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { status: 415, code: 'UNSUPPORTED_MEDIA_TYPE', params: {} };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, code: 'BODY_TOO_LARGE', params: { limit: HTTP_BODY_LIMIT_BYTES } };
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { status: 400, code: 'MALFORMED_JSON', params: {} };
  }
  if (fe instanceof SyntaxError && fe.statusCode === 400) return { status: 400, code: 'MALFORMED_JSON', params: {} };
  const status = fe.statusCode ?? 500;
  if (status === 404) return { status, code: 'ROUTE_NOT_FOUND', params: {} };
  if (status === 413) return { status, code: 'BODY_TOO_LARGE', params: { limit: HTTP_BODY_LIMIT_BYTES } };
  if (status === 415) return { status, code: 'UNSUPPORTED_MEDIA_TYPE', params: {} };
  // Our own 403s are HttpErrors (PERMISSION_DENIED, ORIGIN_NOT_ALLOWED); a framework 403 is the static
  // file server refusing a path that escapes its directory.
  if (status === 403) return { status, code: 'PATH_FORBIDDEN', params: {} };
  if (status === 414) return { status, code: 'URI_TOO_LONG', params: {} };
  if (status === 416) return { status, code: 'RANGE_NOT_SATISFIABLE', params: {} };
  if (status >= 400 && status < 500) return { status, code: 'BAD_REQUEST', params: {} };
  return { status: 500, code: 'INTERNAL_ERROR', params: {} };
}

/** Route patterns by method, to tell 405 (path exists with other methods) from 404. */
export class RouteTable {
  #routes: Array<{ pattern: RegExp; methods: Set<string> }> = [];

  add(url: string, methods: string | string[]): void {
    // Catch-all routes (the CORS preflight '*') would make every path "exist"; leave them out.
    if (url === '*' || url === '/*') return;
    const source = url
      .split(/(:[A-Za-z0-9_]+|\*)/)
      .map((part) => (part === '*' ? '.*' : part.startsWith(':') ? '[^/]+' : part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')))
      .join('');
    const list = (Array.isArray(methods) ? methods : [methods]).map((m) => m.toUpperCase());
    this.#routes.push({ pattern: new RegExp(`^${source}/?$`), methods: new Set(list) });
  }

  allowedMethods(path: string): string[] {
    const allowed = new Set<string>();
    for (const route of this.#routes) if (route.pattern.test(path)) for (const m of route.methods) allowed.add(m);
    return [...allowed].sort();
  }
}

export function installErrorHandling(app: FastifyInstance, routes: RouteTable): void {
  app.setErrorHandler((error: FastifyError | HttpError, request, reply) => {
    const { status, code, params, details } = classify(error);
    // A 5xx we raise on purpose (503 NOT_READY) is an expected state, not a bug: no stack trace.
    if (status >= 500 && !(error instanceof HttpError)) request.log.error({ err: error, code }, 'request failed');
    else if (status >= 500) request.log.warn({ code, status, details }, 'request refused');
    else request.log.info({ code, status }, 'request refused');
    sendError(reply, status, errorBody(request, code, params, details));
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    const allowed = routes.allowedMethods(path);
    if (allowed.length > 0 && !allowed.includes(request.method)) {
      reply.header('allow', allowed.join(', '));
      sendError(reply, 405, errorBody(request, 'METHOD_NOT_ALLOWED', { allow: allowed.join(', ') }));
      return;
    }
    sendError(reply, 404, errorBody(request, 'ROUTE_NOT_FOUND'));
  });
}

/**
 * For Fastify's `frameworkErrors` option: router-level failures (a path whose percent-encoding does not
 * decode) get the envelope too, and the CORS headers an allowed Origin gets on every other error: they
 * are answered before any hook, so @fastify/cors never sees them.
 */
export function frameworkErrorHandler(cors: ClientErrorCors) {
  return function onFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
    const { status, code, params } = classify(error);
    const origin = request.headers.origin;
    reply.header('vary', 'Origin');
    // Only an origin of the exact list is echoed.
    if (typeof origin === 'string' && cors.allowedOrigins.has(origin)) {
      reply.header('access-control-allow-origin', origin);
      if (cors.credentials) reply.header('access-control-allow-credentials', 'true');
    }
    sendError(reply, status >= 500 ? 400 : status, errorBody(request, status >= 500 ? 'BAD_REQUEST' : code, params));
  };
}

/** Where the CORS headers of a reply Fastify never saw come from: the same settings as @fastify/cors. */
export interface ClientErrorCors {
  allowedOrigins: ReadonlySet<string>;
  credentials: boolean;
}

/** How long a refused connection keeps reading (and discarding) after the reply, so the client reads it. */
const REFUSED_CONNECTION_LINGER_MS = 2000;

const handled = new WeakSet<Socket>();
const previousChunk = new WeakMap<Socket, Buffer>();

/** How much of each connection's previous chunk is kept (a copy: a slice would pin the whole chunk). */
const PREVIOUS_CHUNK_BYTES = 8 * 1024;

/**
 * Keeps the start of each connection's previous chunk: a request head over the limit spans chunks, and its
 * Accept-Language and Origin sit near its start, before the chunk the parser failed on.
 */
export function rememberPreviousChunks(server: Server): void {
  server.on('connection', (socket: Socket) => {
    // Node's parser listened first, so while it handles a chunk this still holds the one before.
    socket.on('data', (chunk: Buffer) => previousChunk.set(socket, Buffer.from(chunk.subarray(0, PREVIOUS_CHUNK_BYTES))));
  });
}

/** The first value of each of `names` among the header lines of raw request bytes. */
function headersFromRaw(raw: Buffer | undefined, names: readonly string[]): Record<string, string> {
  const found: Record<string, string> = {};
  if (!raw) return found;
  const text = raw.toString('latin1');
  // Start at the last request line: on a kept-alive connection earlier bytes belong to earlier requests.
  let start = 0;
  for (const m of text.matchAll(/(?:^|\r\n)[A-Z]+ \S+ HTTP\/1\.[01]\r\n/g)) start = m.index + (m[0].startsWith('\r\n') ? 2 : 0);
  const lines = text.slice(start).split('\r\n');
  for (const line of lines.slice(1)) {
    if (line === '') break;
    const m = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*$/.exec(line);
    const name = m?.[1]?.toLowerCase();
    if (name && names.includes(name) && found[name] === undefined) found[name] = m![2]!;
  }
  return found;
}

/**
 * The Accept-Language and Origin of the request a parser error interrupted, as far as they arrived:
 * from the bytes that failed (a malformed line, headers over the limit) or, when the body was still
 * arriving (request timeout), from the message whose headers were parsed.
 */
function interruptedRequestHeaders(error: Error & { code?: string; rawPacket?: unknown }, socket: Socket): Record<string, string> {
  const names = ['accept-language', 'origin'];
  const failed = Buffer.isBuffer(error.rawPacket) ? error.rawPacket : undefined;
  const previous = previousChunk.get(socket);
  const found = headersFromRaw(failed && previous ? Buffer.concat([previous, failed]) : failed, names);
  const incoming = (socket as Socket & { parser?: { incoming?: { complete: boolean; headers: Record<string, unknown> } } }).parser?.incoming;
  if (incoming && !incoming.complete) {
    for (const name of names) {
      const value = incoming.headers[name];
      if (found[name] === undefined && typeof value === 'string') found[name] = value;
    }
  }
  return found;
}

/**
 * For Fastify's `clientErrorHandler` option: a request Node's HTTP parser rejects before Fastify sees it
 * (an unknown method, a malformed request line, headers over the hard limit, a request or headers
 * timeout) gets the envelope too, in the language of the Accept-Language that arrived, with the CORS
 * headers an allowed Origin gets on every other error. The connection is then closed gracefully: the
 * reply, a FIN, and the rest of what the client sends is read and dropped for a moment, so the client
 * sees the reply instead of a reset.
 */
export function clientErrorHandler(cors: ClientErrorCors) {
  return function onClientError(error: Error & { code?: string; rawPacket?: unknown }, socket: Socket): void {
    if (error.code === 'ECONNRESET' || socket.destroyed || handled.has(socket)) return;
    handled.add(socket);
    const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const code: MessageCode = status === 431 ? 'HEADERS_TOO_LARGE' : status === 408 ? 'REQUEST_TIMEOUT' : 'BAD_REQUEST';
    const headers = interruptedRequestHeaders(error, socket);
    const lang = negotiateLanguage(headers['accept-language']);
    const body = JSON.stringify({ success: false, error: { code, message: message(code, lang, { limit: HTTP_MAX_HEADER_BYTES }) } });
    const origin = headers.origin;
    // Only an origin of the exact list is echoed (so nothing the client sent reaches the reply unchecked).
    const corsLines =
      origin !== undefined && cors.allowedOrigins.has(origin)
        ? `Vary: Origin\r\nAccess-Control-Allow-Origin: ${origin}\r\n${cors.credentials ? 'Access-Control-Allow-Credentials: true\r\n' : ''}`
        : '';
    if (socket.writable) {
      socket.end(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\n${corsLines}Content-Language: ${lang}\r\n` +
          `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      socket.on('error', () => {});
      socket.resume();
      setTimeout(() => socket.destroy(), REFUSED_CONNECTION_LINGER_MS).unref();
    } else {
      socket.destroy();
    }
  };
}

/** Words for a validation location or readiness reason in the request's language. */
export function localTerm(request: FastifyRequest, key: string, params: Record<string, string | number> = {}): string {
  return term(key, negotiateLanguage(request.headers['accept-language']), params);
}
