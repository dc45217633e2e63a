// OpenTelemetry tracing: the process' tracer provider and the W3C trace-context helpers the queue
// envelope uses. Spans are made through @opentelemetry/api everywhere; without startTracing (or with
// no exporter configured) they cost a no-op. The standard variables decide export:
//   OTEL_SDK_DISABLED=true                      no tracing at all
//   OTEL_TRACES_EXPORTER=otlp | console | none  the exporter (default none: nothing leaves the process)
//   OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT  set without OTEL_TRACES_EXPORTER: otlp
//   OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES  the resource (service.name defaults to svc-api / svc-workers)
// The OTLP/HTTP exporter reads its own OTEL_EXPORTER_OTLP_* variables (endpoint, headers, timeout).
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor, TracerProvider, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace';

/** Longest wait for the last spans to be exported when the process stops. */
const SHUTDOWN_FLUSH_TIMEOUT_MS = 3_000;
/** Instrumentation scope of every span of the service. */
const TRACER_NAME = 'svc';

export interface Tracing {
  /** Exporter in use: 'otlp', 'console', 'custom' (tests) or 'none'. */
  readonly exporter: string;
  /** Flushes pending spans and uninstalls the provider, context manager and propagator. */
  shutdown(): Promise<void>;
}

export interface TracingOptions {
  /** service.name when OTEL_SERVICE_NAME is unset, e.g. svc-api. */
  serviceName: string;
  /** An exporter of the caller's (tests: InMemorySpanExporter); spans then go to it synchronously. */
  exporter?: SpanExporter;
}

function exporterFromEnv(env: NodeJS.ProcessEnv): { name: string; exporter: SpanExporter | null } {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return { name: 'none', exporter: null };
  const configured = (env.OTEL_TRACES_EXPORTER ?? '').trim().toLowerCase();
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const name = configured || (endpoint ? 'otlp' : 'none');
  if (name === 'otlp') return { name, exporter: new OTLPTraceExporter() };
  if (name === 'console') return { name, exporter: new ConsoleSpanExporter() };
  return { name: 'none', exporter: null };
}

/**
 * Installs the W3C propagator and the async context manager always (so trace context crosses the
 * queue even when this process exports nothing), and a tracer provider when an exporter is configured.
 */
export function startTracing(env: NodeJS.ProcessEnv, options: TracingOptions): Tracing {
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const chosen = options.exporter ? { name: 'custom', exporter: options.exporter } : exporterFromEnv(env);
  let provider: TracerProvider | null = null;
  if (chosen.exporter) {
    const processor: SpanProcessor = options.exporter ? new SimpleSpanProcessor({ exporter: chosen.exporter }) : new BatchSpanProcessor({ exporter: chosen.exporter });
    provider = new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': options.serviceName }).merge(detectResources({ detectors: [envDetector] })),
      spanProcessors: [processor],
    });
    trace.setGlobalTracerProvider(provider);
  }
  return {
    exporter: chosen.name,
    async shutdown() {
      // Flushing waits on the collector: bounded, so an unreachable one never holds a stopping process.
      if (provider) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          provider.shutdown().catch(() => {}),
          new Promise<void>((resolve) => {
            timer = setTimeout(resolve, SHUTDOWN_FLUSH_TIMEOUT_MS);
          }),
        ]).finally(() => clearTimeout(timer));
      }
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}

export function tracer() {
  return trace.getTracer(TRACER_NAME);
}

/** The W3C traceparent of the active span (or of `ctx`), or undefined when there is none. */
export function traceparentOf(ctx: Context = context.active()): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier.traceparent;
}

/** The context a W3C traceparent (from a message or a request) continues; the root context without one. */
export function contextFromTraceparent(traceparent: string | undefined): Context {
  if (!traceparent) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, { traceparent });
}

/**
 * Runs `fn` inside a new active span (child of `parent`, default the active context). A throw marks
 * the span as an error (exception recorded: its message, never a payload) and is rethrown.
 */
export async function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
  options: { parent?: Context; kind?: SpanKind } = {},
): Promise<T> {
  return tracer().startActiveSpan(name, { attributes, kind: options.kind ?? SpanKind.INTERNAL }, options.parent ?? context.active(), async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as { code?: string }).code ?? (error as Error).name });
      throw error;
    } finally {
      span.end();
    }
  });
}

export { SpanKind };
