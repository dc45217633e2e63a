// Rules every route must follow, enforced when the route is registered (so a broken rule fails
// buildApp, the tests and the openapi emit of the image build):
// - a route declares exactly one of `config.public: true` or `config.permission: '<code>'`
//   (only hidden documentation assets may omit both);
// - a protected route gets the one authentication step as its first onRequest hook, and its schema
//   declares the two alternative schemes Bearer and SessionCookie plus the 401/403 responses;
// - a documented route describes its 200 response.
import type { FastifyInstance, onRequestAsyncHookHandler, RouteOptions } from 'fastify';
import { authenticate, type AuthSettings } from '../auth/authenticate.ts';
import type { Session } from '../auth/session-resolver.ts';
import { errorRef } from './envelope.ts';
import { HttpError, type RouteTable } from './errors.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route needs no session (health, readiness, docs). */
    public?: boolean;
    /** The permission a session must hold; makes the route protected. */
    permission?: string;
  }
  interface FastifyRequest {
    /** The resolved session on protected routes; null on public ones. */
    session: Session | null;
  }
}

/** Security requirement of every protected route: Bearer OR SessionCookie. */
export const PROTECTED_ROUTE_SECURITY: Array<Record<string, string[]>> = [{ Bearer: [] }, { SessionCookie: [] }];

const PERMISSION_CODE = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;

export class RouteRuleError extends Error {
  readonly code = 'ROUTE_RULE_BROKEN';
}

function authHook(settings: AuthSettings, permission: string): onRequestAsyncHookHandler {
  return async function authenticateRequest(request) {
    const outcome = await authenticate(request, settings, permission);
    if (!outcome.ok) {
      // The reason is a fixed word (e.g. duplicate_session_cookie); the token is never logged.
      request.log.info({ authRefusal: outcome.reason }, 'authentication refused');
      throw new HttpError(outcome.status, outcome.code);
    }
    request.session = outcome.session;
  };
}

type Schema = NonNullable<RouteOptions['schema']> & { hide?: boolean; security?: unknown; response?: Record<string, unknown> };

export function installRouteRules(app: FastifyInstance, settings: AuthSettings, routes: RouteTable): void {
  app.decorateRequest('session', null);
  app.addHook('onRoute', (route) => {
    routes.add(route.url, route.method);
    const where = `${String(route.method)} ${route.url}`;
    const schema = (route.schema ?? {}) as Schema;
    const config = route.config ?? {};
    const hidden = schema.hide === true;
    if (config.public && config.permission) {
      throw new RouteRuleError(`route ${where} declares both public and a permission; choose one`);
    }
    if (!config.public && !config.permission && !hidden) {
      throw new RouteRuleError(`route ${where} declares neither config.public nor config.permission`);
    }
    if (!hidden && !schema.response?.['200']) {
      throw new RouteRuleError(`route ${where} does not describe its 200 response in schema.response`);
    }
    if (config.permission) {
      if (!PERMISSION_CODE.test(config.permission)) {
        throw new RouteRuleError(`route ${where} names an invalid permission code; use dotted lowercase segments`);
      }
      route.schema = {
        ...schema,
        security: PROTECTED_ROUTE_SECURITY,
        response: { ...schema.response, 401: errorRef, 403: errorRef },
      };
      const existing = route.onRequest ? (Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest]) : [];
      route.onRequest = [authHook(settings, config.permission), ...existing];
    } else if (schema.security) {
      throw new RouteRuleError(`public route ${where} declares security schemes; public routes take no session`);
    }
  });
}
