// Cookie-authenticated writes must come from a listed origin: a browser attaches the cookie to
// cross-site requests, so the Origin (or, lacking it, the Referer) proves which site sent the write.
// The list is CORS_ORIGINS, the same one CORS uses. Bearer requests and safe methods skip the check.

/** Methods that change state and therefore need the origin check when authenticated by cookie. */
export const WRITE_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export interface OriginHeaders {
  origin?: string | string[] | undefined;
  referer?: string | string[] | undefined;
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The origin a request claims: its `Origin` header, or the origin of its `Referer`; undefined if neither is usable. */
export function claimedOrigin(headers: OriginHeaders): string | undefined {
  const origin = single(headers.origin);
  if (origin !== undefined && origin !== '') return origin;
  const referer = single(headers.referer);
  if (!referer) return undefined;
  try {
    const parsed = new URL(referer);
    return parsed.origin === 'null' ? undefined : parsed.origin;
  } catch {
    return undefined;
  }
}

/** True when a cookie-authenticated request with this method and headers may proceed. */
export function cookieWriteAllowed(method: string, headers: OriginHeaders, allowed: ReadonlySet<string>): boolean {
  if (!WRITE_METHODS.has(method.toUpperCase())) return true;
  const origin = claimedOrigin(headers);
  return origin !== undefined && allowed.has(origin);
}
