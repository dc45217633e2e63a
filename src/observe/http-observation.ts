// HTTP metrics and spans for a Fastify instance: a server span per request (continuing an incoming
// W3C traceparent) made active for the route's handler, so a dispatch inside a use case joins the
// request's trace; and svc_http_requests_total / svc_http_request_duration_seconds labelled by the
// route TEMPLATE (`/task-runs/:runId`), never the raw path. A request no route matched is labelled
// `unmatched`, so probing random paths cannot add series.
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { httpRequestDuration, httpRequests } from './metrics.ts';
import { tracer } from './tracing.ts';

/** Route label of requests no route matched (404s, parser-level errors). */
export const UNMATCHED_ROUTE = 'unmatched';

const spans = new WeakMap<FastifyRequest, Span>();

function routeOf(request: FastifyRequest): string {
  return request.routeOptions?.url ?? UNMATCHED_ROUTE;
}

/** Adds the hooks to `app` (the root instance, so every route is covered). */
export function observeHttp(app: FastifyInstance): void {
  app.addHook('onRequest', (request, _reply, done) => {
    const parent = propagation.extract(ROOT_CONTEXT, request.headers);
    const route = routeOf(request);
    const span = tracer().startSpan(
      `${request.method} ${route}`,
      { kind: SpanKind.SERVER, attributes: { 'http.request.method': request.method, 'http.route': route } },
      parent,
    );
    spans.set(request, span);
    // Everything after this hook (other hooks, the handler) runs with the span active.
    context.with(trace.setSpan(parent, span), done);
  });
  app.addHook('onResponse', (request: FastifyRequest, reply: FastifyReply, done) => {
    const labels = { route: routeOf(request), method: request.method, status: String(reply.statusCode) };
    httpRequests.inc(labels);
    httpRequestDuration.observe(labels, reply.elapsedTime / 1000);
    const span = spans.get(request);
    if (span) {
      span.setAttribute('http.response.status_code', reply.statusCode);
      if (reply.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
      spans.delete(request);
    }
    done();
  });
}
