// Traces on real services: one dispatched run gives ONE connected trace, from the use case that
// dispatched it, through the relay's send (the envelope carries the W3C traceparent), to the worker's
// delivery, registration, handler and settlement, collected by an in-memory exporter.
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inSpan, startTracing, type Tracing } from '../../src/observe/tracing.ts';
import { parseEnvelope } from '../../src/work/runtime/produce/envelope.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { httpFixture } from './http-support.ts';

let h: WorkHarness;
let tracing: Tracing;
const exporter = new InMemorySpanExporter();

beforeAll(async () => {
  tracing = startTracing({}, { serviceName: 'svc-test', exporter });
  h = await workHarness();
  await h.startWorkers({ queues: ['default'] });
});
afterAll(async () => {
  await h?.close();
  await tracing?.shutdown();
});

async function waitForSpan(predicate: (s: ReadableSpan) => boolean, timeoutMs = 15_000): Promise<ReadableSpan> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = exporter.getFinishedSpans().find(predicate);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no such span; finished: ${exporter.getFinishedSpans().map((s) => s.name).join(', ')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function ancestors(span: ReadableSpan, all: ReadableSpan[]): ReadableSpan[] {
  const byId = new Map(all.map((s) => [s.spanContext().spanId, s]));
  const chain: ReadableSpan[] = [];
  let parentId = span.parentSpanContext?.spanId;
  while (parentId && byId.has(parentId)) {
    const parent = byId.get(parentId)!;
    chain.push(parent);
    parentId = parent.parentSpanContext?.spanId;
  }
  return chain;
}

describe('traces', () => {
  it('one dispatched run gives one connected trace from the use case through dispatch and relay send to the handler', async () => {
    const { runId, envelope } = await inSpan('use case: test', {}, () => h.dispatch('fixture.effect', { key: 'traced' }));
    // The envelope (stored in the outbox and sent verbatim) carries the dispatch's trace context.
    expect(envelope.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    await h.relay();
    await h.waitForStatus(runId, ['succeeded']);

    const useCase = await waitForSpan((s) => s.name === 'use case: test');
    const dispatch = await waitForSpan((s) => s.name === 'dispatch fixture.effect' && s.attributes['svc.run_id'] === runId);
    const send = await waitForSpan((s) => s.name === 'relay send fixture.effect' && s.attributes['svc.run_id'] === runId);
    const handler = await waitForSpan((s) => s.name === 'handler fixture.effect' && s.spanContext().traceId === dispatch.spanContext().traceId);
    const deliver = await waitForSpan((s) => s.name === 'deliver fixture.effect' && s.spanContext().traceId === dispatch.spanContext().traceId);

    const traceId = useCase.spanContext().traceId;
    for (const s of [dispatch, send, handler, deliver]) expect(s.spanContext().traceId).toBe(traceId);
    expect(envelope.traceparent).toContain(dispatch.spanContext().spanId);
    expect(dispatch.parentSpanContext?.spanId).toBe(useCase.spanContext().spanId);
    expect(send.parentSpanContext?.spanId).toBe(dispatch.spanContext().spanId);
    const all = exporter.getFinishedSpans();
    const handlerAncestors = ancestors(handler, all).map((s) => s.name);
    expect(handlerAncestors).toEqual(['deliver fixture.effect', 'dispatch fixture.effect', 'use case: test']);
    // Its registration went out with its finish (src/work/runtime/execute/deferred-registration.ts): no stage of its own.
    expect(all.filter((s) => s.name === 'registration fixture.effect' && s.spanContext().traceId === traceId)).toEqual([]);
    expect(deliver.attributes['svc.delivery.result']).toBe('succeeded');
  });

  it('a failing run records the settlement span in the same trace, marked as an error at the handler', async () => {
    const { runId, envelope } = await h.dispatch('fixture.effect', { key: 'traced-failure', fail: 'permanent' });
    await h.relay();
    await h.waitForStatus(runId, ['failed']);
    const traceId = envelope.traceparent!.split('-')[1];
    const handler = await waitForSpan((s) => s.name === 'handler fixture.effect' && s.spanContext().traceId === traceId);
    const settlement = await waitForSpan((s) => s.name === 'settlement fixture.effect' && s.spanContext().traceId === traceId);
    expect(handler.status.code).toBe(2); // SpanStatusCode.ERROR
    expect(ancestors(settlement, exporter.getFinishedSpans()).map((s) => s.name)).toContain('dispatch fixture.effect');
  });

  it('the deliver span of a delivery that failed its run (dead-lettered) has an error status; a succeeded one does not', async () => {
    const failed = await h.dispatch('fixture.effect', { key: 'traced-deliver-failed', fail: 'permanent' });
    const ok = await h.dispatch('fixture.effect', { key: 'traced-deliver-ok' });
    await h.relay();
    await h.waitForStatus(failed.runId, ['failed']);
    await h.waitForStatus(ok.runId, ['succeeded']);
    const deliverOf = (envelope: { traceparent?: string }) =>
      waitForSpan((s) => s.name === 'deliver fixture.effect' && s.spanContext().traceId === envelope.traceparent!.split('-')[1]);
    const failedDeliver = await deliverOf(failed.envelope);
    expect(failedDeliver.attributes['svc.delivery.result']).toBe('failed');
    expect(failedDeliver.status.code).toBe(2); // SpanStatusCode.ERROR
    expect((await deliverOf(ok.envelope)).status.code).not.toBe(2);
  });

  it('an HTTP request continues the caller\'s traceparent in a server span named by its route template', async () => {
    const f = await httpFixture();
    try {
      const callerTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
      const response = await f.app.inject({
        method: 'GET',
        url: '/task-runs/00000000-0000-4000-8000-00000000000a',
        headers: { traceparent: `00-${callerTrace}-00f067aa0ba902b7-01`, authorization: 'Bearer token-a' },
      });
      expect(response.statusCode).toBe(404);
      const span = await waitForSpan((s) => s.spanContext().traceId === callerTrace);
      expect(span.name).toBe('GET /task-runs/:runId');
      expect(span.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
      expect(span.attributes['http.response.status_code']).toBe(404);
    } finally {
      await f.close();
    }
  });

  it('envelopes without a traceparent (older messages) still parse; a malformed one is dropped, not refused', () => {
    const base = {
      run_id: '00000000-0000-4000-8000-000000000001',
      kind: 'task',
      name: 'fixture.effect',
      payload: {},
      correlation_id: '00000000-0000-4000-8000-000000000002',
      causation_id: '00000000-0000-4000-8000-000000000002',
    };
    expect(parseEnvelope(JSON.stringify(base)).traceparent).toBeUndefined();
    expect(parseEnvelope(JSON.stringify({ ...base, traceparent: 'garbage' })).traceparent).toBeUndefined();
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    expect(parseEnvelope(JSON.stringify({ ...base, traceparent: tp })).traceparent).toBe(tp);
  });
});
