// Spans of the work path, and the trace context the queue envelope carries (W3C `traceparent`):
//   dispatch <unit> (producer, in the use case's trace) ─► relay send <unit> (child of dispatch)
//   ─► deliver <unit> (consumer, child of dispatch) ─► registration, handler, settlement.
// One dispatched run therefore gives one trace from the use case to its handler. Attributes carry
// bounded facts (unit, queue, result); the run id is an attribute of the span, never a metric label.
import { context, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import { contextFromTraceparent, inSpan, traceparentOf, tracer } from './tracing.ts';

/**
 * Records the dispatch of one run as a span of the active trace and returns the envelope field that
 * continues it (`{ traceparent }`), or nothing when no trace is being recorded.
 */
export function dispatchTraceFields(unit: string, queue: string, runId: string): { traceparent?: string } {
  const span = tracer().startSpan(`dispatch ${unit}`, {
    kind: SpanKind.PRODUCER,
    attributes: { 'svc.unit': unit, 'svc.queue': queue, 'svc.run_id': runId, 'messaging.operation.type': 'create' },
  });
  const traceparent = traceparentOf(trace.setSpan(context.active(), span));
  span.end();
  return traceparent ? { traceparent } : {};
}

/** Starts one `relay send` span per message, each a child of its own envelope's trace; returns a finisher. */
export function startRelaySendSpans(queue: string, envelopes: readonly unknown[]): (failedIndexes?: ReadonlySet<number>) => void {
  const spans: Span[] = envelopes.map((e) => {
    const env = (e ?? {}) as { traceparent?: unknown; name?: unknown; run_id?: unknown };
    const parent = contextFromTraceparent(typeof env.traceparent === 'string' ? env.traceparent : undefined);
    return tracer().startSpan(
      `relay send ${typeof env.name === 'string' ? env.name : 'message'}`,
      { kind: SpanKind.PRODUCER, attributes: { 'svc.queue': queue, 'svc.run_id': String(env.run_id ?? ''), 'messaging.operation.type': 'send' } },
      parent,
    );
  });
  return (failed) => {
    spans.forEach((span, i) => {
      if (failed?.has(i)) span.setStatus({ code: SpanStatusCode.ERROR, message: 'send failed' });
      span.end();
    });
  };
}

/**
 * Runs one delivery inside a `deliver <unit>` consumer span continuing the envelope's trace (its
 * `traceparent`, read from the body the consumer parsed); the span carries the result, and an error
 * status when the delivery failed the run (result `failed`).
 */
export function traceDelivery<R extends string>(queue: string, unit: string | undefined, traceparent: unknown, deliver: () => Promise<R>): Promise<R> {
  return inSpan(
    `deliver ${unit ?? 'message'}`,
    { 'svc.queue': queue, 'svc.unit': unit ?? '', 'messaging.operation.type': 'process' },
    async (span) => {
      const result = await deliver();
      span.setAttribute('svc.delivery.result', result);
      // The run failed for good (its message dead-lettered): an error, though deliver() returned.
      if (result === 'failed') span.setStatus({ code: SpanStatusCode.ERROR, message: 'run failed: message dead-lettered' });
      return result;
    },
    { parent: contextFromTraceparent(typeof traceparent === 'string' ? traceparent : undefined), kind: SpanKind.CONSUMER },
  );
}

/** A stage of the delivery (registration, handler, settlement) as a child span of the active delivery. */
export function traceStage<T>(stage: 'registration' | 'handler' | 'settlement', unit: string, fn: () => Promise<T>): Promise<T> {
  return inSpan(`${stage} ${unit}`, { 'svc.unit': unit, 'svc.stage': stage }, () => fn());
}
