// The standard OTEL_* variables turn OTLP export on, and nothing is exported without them: a span
// reaches a real HTTP collector endpoint (a local server standing in for the OpenTelemetry collector).
import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { inSpan, startTracing } from '../../src/observe/tracing.ts';

const saved = { ...process.env };
afterEach(() => {
  for (const key of Object.keys(process.env)) if (key.startsWith('OTEL_') && !(key in saved)) delete process.env[key];
});

describe('OTLP export', () => {
  it('is off without OTEL_* variables, and OTEL_SDK_DISABLED wins over an exporter', async () => {
    const none = startTracing({}, { serviceName: 'svc-test' });
    expect(none.exporter).toBe('none');
    await none.shutdown();
    const disabled = startTracing({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' }, { serviceName: 'svc-test' });
    expect(disabled.exporter).toBe('none');
    await disabled.shutdown();
  });

  it('OTEL_EXPORTER_OTLP_ENDPOINT alone turns OTLP/HTTP on: the span arrives at <endpoint>/v1/traces with the service name', async () => {
    const received: Array<{ url: string; body: Buffer }> = [];
    const collector = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ url: req.url ?? '', body: Buffer.concat(chunks) });
        res.writeHead(200, { 'content-type': 'application/x-protobuf' });
        res.end();
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', () => resolve()));
    const address = collector.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${port}`;
      process.env.OTEL_SERVICE_NAME = 'svc-otlp-test';
      const tracing = startTracing(process.env, { serviceName: 'svc-test' });
      expect(tracing.exporter).toBe('otlp');
      await inSpan('otlp-test-span', {}, async () => {});
      await tracing.shutdown(); // flushes the batch
      expect(received.map((r) => r.url)).toEqual(['/v1/traces']);
      expect(received[0]!.body.includes(Buffer.from('otlp-test-span'))).toBe(true);
      expect(received[0]!.body.includes(Buffer.from('svc-otlp-test'))).toBe(true);
    } finally {
      collector.closeAllConnections();
      collector.close();
    }
  });
});
