// buildApp(deps): the whole HTTP API as a Fastify instance, built from explicit dependencies and never
// listening (src/main/api.ts listens; tests use inject or listen on a free port). It never talks to the
// queue and never applies migrations.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import Fastify, { type FastifyInstance } from 'fastify';
import cors from '@fastify/cors';
import { HTTP_BODY_LIMIT_BYTES, READINESS_PROBE_TIMEOUT_MS } from '../config/limits.ts';
import { sessionCookie } from '../auth/session-cookie.ts';
import { catalogDispatcher } from '../work/runtime/produce/catalog-dispatcher.ts';
import type { Dispatcher } from '../work/runtime/produce/dispatch.ts';
import { errorEnvelopeSchema } from './envelope.ts';
import {
  HttpError,
  RouteTable,
  clientErrorHandler,
  frameworkErrorHandler,
  installErrorHandling,
  rememberPreviousChunks,
} from './errors.ts';
import { DEFAULT_HTTP_TIMEOUTS, httpServerOptions } from './http-server-options.ts';
import { registerOpenApi } from './openapi.ts';
import { installRouteRules } from './route-rules.ts';
import { observeHttp } from '../observe/http-observation.ts';
import { healthRoutes } from './routes/health.ts';
import { taskRunRoutes } from './routes/task-runs.ts';

const EXPECTATION_FAILED = Symbol('expectation failed');

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Dispatches tasks and publishes events inside a use case's transaction, resolving units from the
     * catalog (never from unit code). After commit the use case pushes the wake signal (kv/wake.ts).
     */
    dispatcher: Dispatcher;
  }
}

import type { AppDeps } from './app-deps.ts';

export { httpSettings, type ApiCatalog, type AppDeps, type HttpSettings } from './app-deps.ts';

/** How many Host header lines a request carried (rawHeaders alternates names and values). */
function hostHeaderCount(rawHeaders: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === 'host') count++;
  return count;
}

/** True for a CORS preflight: OPTIONS with both Origin and Access-Control-Request-Method. */
export function isCorsPreflight(headers: Record<string, string | string[] | undefined>): boolean {
  return Boolean(headers.origin) && Boolean(headers['access-control-request-method']);
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const cookie = sessionCookie(deps.config.sessionCookieDomain);
  const corsSettings = { allowedOrigins: new Set(deps.config.corsOrigins), credentials: deps.config.corsCredentials };
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    bodyLimit: HTTP_BODY_LIMIT_BYTES,
    // A client-sent request id is not trusted; every request gets a fresh uuid.
    requestIdHeader: false,
    genReqId: () => randomUUID(),
    frameworkErrors: frameworkErrorHandler(corsSettings),
    clientErrorHandler: clientErrorHandler(corsSettings),
    ...httpServerOptions({ ...DEFAULT_HTTP_TIMEOUTS, ...deps.config.timeouts }),
  }) as unknown as FastifyInstance;

  rememberPreviousChunks(app.server);
  // Node answers an Expect other than 100-continue with an empty 417 unless someone listens: route it
  // through Fastify instead, marked, so the hook below answers with the envelope (and CORS headers).
  app.server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    (req as IncomingMessage & { [EXPECTATION_FAILED]?: boolean })[EXPECTATION_FAILED] = true;
    app.server.emit('request', req, res);
  });

  app.decorate('dispatcher', deps.dispatcher ?? catalogDispatcher(deps.catalog));
  observeHttp(app); // request metrics and spans (src/observe)

  const routes = new RouteTable();
  installErrorHandling(app, routes);
  installRouteRules(
    app,
    { resolver: deps.resolver, cookieName: cookie.name, allowedOrigins: new Set(deps.config.corsOrigins) },
    routes,
  );
  // All bodies are JSON: drop Fastify's text/plain parser so anything else is 415.
  app.removeContentTypeParser('text/plain');
  app.addSchema(errorEnvelopeSchema);

  // A CORS preflight is an OPTIONS request carrying Origin and Access-Control-Request-Method. Any other
  // OPTIONS request (no Origin, or a preflight missing its method) is an ordinary request for a method
  // no route serves: it gets the envelope like every other one (405 with Allow on a known path, 404
  // elsewhere) instead of @fastify/cors' plain-text `400 Invalid Preflight Request`. This hook runs
  // before the CORS hook, which is registered after it.
  app.addHook('onRequest', async (request, reply) => {
    if (request.method !== 'OPTIONS' || isCorsPreflight(request.headers)) return;
    reply.callNotFound();
    return reply;
  });

  await app.register(cors, {
    // The same exact list as the origin check; none when empty.
    origin: deps.config.corsOrigins.length > 0 ? [...deps.config.corsOrigins] : false,
    credentials: deps.config.corsCredentials,
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    maxAge: 600,
  });
  // After CORS, so these refusals carry its headers like every other error.
  app.addHook('onRequest', async (request) => {
    if ((request.raw as IncomingMessage & { [EXPECTATION_FAILED]?: boolean })[EXPECTATION_FAILED]) {
      throw new HttpError(417, 'EXPECTATION_FAILED');
    }
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) throw new HttpError(400, 'HOST_REQUIRED');
    // Node keeps the first of two Host headers and drops the other; RFC 9112 (3.2) requires a 400.
    if (hostHeaderCount(request.raw.rawHeaders) > 1) throw new HttpError(400, 'HOST_DUPLICATED');
  });
  await registerOpenApi(app, cookie.name);

  healthRoutes(app, deps, deps.config.readinessTimeoutMs ?? READINESS_PROBE_TIMEOUT_MS);
  taskRunRoutes(app, deps);
  return app;
}
