// The Node HTTP server under Fastify: how long a client may take to send a request, how long an idle
// connection stays open, and how large the request headers may be. A client that trickles a body or
// holds a connection silent gets the 408 envelope or a close within these bounds, never an open socket.

/**
 * Hard limit of the request head (request line + headers), bytes. Well above any credential-sized header
 * (a Bearer token or cookie over 1024 bytes is refused as 401 by the authentication step, as the spec
 * says), so those get the 401 envelope; beyond this the parser answers 431 HEADERS_TOO_LARGE.
 */
export const HTTP_MAX_HEADER_BYTES = 64 * 1024;

/** Node's own bound of the headers alone (Node's default), capped by the request timeout. */
const HEADERS_TIMEOUT_MS = 60_000;

export interface HttpTimeouts {
  /** SVC_HTTP_REQUEST_TIMEOUT_MS: the whole request (headers and body) must arrive within it, else 408. Default 30000. */
  requestMs: number;
  /** SVC_HTTP_IDLE_TIMEOUT_MS: a connection silent this long (no byte either way) is closed. Default 120000. */
  idleMs: number;
  /** SVC_HTTP_KEEP_ALIVE_TIMEOUT_MS: an idle kept-alive connection between requests is closed after it. Default 72000. */
  keepAliveMs: number;
}

export const DEFAULT_HTTP_TIMEOUTS: HttpTimeouts = { requestMs: 30_000, idleMs: 120_000, keepAliveMs: 72_000 };

/** Fastify server options for these timeouts and limits. */
export function httpServerOptions(timeouts: HttpTimeouts) {
  return {
    requestTimeout: timeouts.requestMs,
    connectionTimeout: timeouts.idleMs,
    keepAliveTimeout: timeouts.keepAliveMs,
    http: {
      maxHeaderSize: HTTP_MAX_HEADER_BYTES,
      headersTimeout: Math.min(HEADERS_TIMEOUT_MS, timeouts.requestMs),
      // Node checks the request and headers timeouts on this interval (its default, 30 s, would let a
      // stalled request live up to 30 s past its bound).
      connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(timeouts.requestMs / 4))),
      // A request without Host is answered by our hook with the envelope instead of Node's empty 400.
      requireHostHeader: false,
    },
  };
}
