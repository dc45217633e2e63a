// The API's metrics: requests counted by route TEMPLATE (never the raw path), unknown routes under a
// fixed label, the duration histogram moving with them; GET /metrics served on its own port and
// absent from the public port.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMetricsServer, type MetricsServer } from '../../src/observe/metrics-server.ts';
import { sampleValue, scrape } from '../support/prometheus-text.ts';
import { httpFixture, type HttpFixture } from './http-support.ts';

let f: HttpFixture;
let metrics: MetricsServer;
let api: string;

beforeAll(async () => {
  f = await httpFixture();
  await f.app.listen({ port: 0, host: '127.0.0.1' });
  const address = f.app.server.address();
  api = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  metrics = await startMetricsServer({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await metrics?.close();
  await f?.close();
});

describe('API /metrics', () => {
  it('counts requests by route template, method and status; unknown paths are "unmatched"; raw paths never appear', async () => {
    const url = `http://127.0.0.1:${metrics.port}/metrics`;
    const before = await scrape(url);
    const runId = randomUUID();
    const unknown = `/no-such-route/${randomUUID()}`;
    expect((await fetch(`${api}/task-runs/${runId}`, { headers: { authorization: 'Bearer token-a' } })).status).toBe(404);
    expect((await fetch(`${api}/task-runs/${runId}`)).status).toBe(401);
    expect((await fetch(`${api}${unknown}`)).status).toBe(404);
    expect((await fetch(`${api}/health`)).status).toBe(200);
    const after = await scrape(url);
    const delta = (name: string, labels: Record<string, string>) => sampleValue(after, name, labels) - sampleValue(before, name, labels);
    expect(delta('svc_http_requests_total', { route: '/task-runs/:runId', method: 'GET', status: '404' })).toBe(1);
    expect(delta('svc_http_requests_total', { route: '/task-runs/:runId', method: 'GET', status: '401' })).toBe(1);
    expect(delta('svc_http_requests_total', { route: 'unmatched', method: 'GET', status: '404' })).toBe(1);
    expect(delta('svc_http_requests_total', { route: '/health', method: 'GET', status: '200' })).toBe(1);
    expect(delta('svc_http_request_duration_seconds_count', { route: '/task-runs/:runId', method: 'GET' })).toBe(2);
    expect(delta('svc_http_request_duration_seconds_bucket', { route: '/health', method: 'GET', status: '200', le: '+Inf' })).toBe(1);
    expect(after).not.toContain(runId);
    expect(after).not.toContain('no-such-route');
  });

  it('the public API port does not serve /metrics; the metrics port serves nothing else', async () => {
    const publicAnswer = await fetch(`${api}/metrics`);
    expect(publicAnswer.status).toBe(404);
    expect(await publicAnswer.text()).not.toContain('svc_http_requests_total');
    const other = await fetch(`http://127.0.0.1:${metrics.port}/health`);
    expect(other.status).toBe(404);
    expect(await other.json()).toMatchObject({ error: { code: 'NOT_FOUND' } });
    expect((await fetch(`http://127.0.0.1:${metrics.port}/metrics`, { method: 'POST' })).status).toBe(405);
  });
});
