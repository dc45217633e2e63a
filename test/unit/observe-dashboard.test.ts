// The Grafana dashboard and the compose scrape set-up are built on metric names that exist: a renamed
// metric or port breaks this test, not a dashboard nobody looks at until an incident.
import fs from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { exportRelayMetrics, metricsRegistry } from '../../src/observe/metrics.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');

const ISSUE_METRICS = [
  'svc_runs_finished_total',
  'svc_run_duration_seconds',
  'svc_run_pickup_seconds',
  'svc_deliveries_total',
  'svc_outbox_pending',
  'svc_outbox_oldest_pending_seconds',
  'svc_relay_sent_total',
  'svc_relay_send_failures_total',
  'svc_queue_messages',
  'svc_redis_fallbacks_total',
  'svc_http_requests_total',
  'svc_http_request_duration_seconds',
];

describe('metrics, dashboard and scraping', () => {
  // The registry of a process that relays: the relay's metrics are exported only there.
  beforeAll(() => exportRelayMetrics());

  it('the registry defines every metric the issue names', async () => {
    const names = (await metricsRegistry.getMetricsAsJSON()).map((m) => m.name);
    for (const name of ISSUE_METRICS) expect(names).toContain(name);
  });

  it('every metric the dashboard queries exists, and every issue metric has a panel', async () => {
    const dashboard = JSON.parse(read('deploy/grafana/dashboards/svc-overview.json')) as { panels: Array<{ targets: Array<{ expr: string }> }> };
    const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr));
    const names = new Set((await metricsRegistry.getMetricsAsJSON()).map((m) => m.name));
    const used = new Set(exprs.flatMap((e) => e.match(/svc_[a-z0-9_]+/g) ?? []).map((n) => n.replace(/_(bucket|count|sum)$/, '')));
    for (const name of used) expect(names.has(name) ? name : `missing: ${name}`).toBe(name);
    for (const name of ISSUE_METRICS) expect(used.has(name) ? name : `no panel: ${name}`).toBe(name);
  });

  it('compose publishes both /metrics ports and the bundled Prometheus scrapes them', () => {
    const compose = parseYaml(read('compose.yaml'), { merge: true }) as { services: Record<string, { ports?: string[]; environment?: Record<string, string>; labels?: Record<string, string> }> };
    expect(compose.services.api!.environment!.SVC_API_METRICS_PORT).toBe('9464');
    expect(compose.services.api!.ports).toContain('127.0.0.1:9464:9464');
    expect(compose.services.api!.labels!['prometheus.io/port']).toBe('9464');
    expect(compose.services.workers!.labels!['prometheus.io/port']).toBe(compose.services.workers!.environment!.SVC_HEALTH_PORT);
    const prometheus = parseYaml(read('deploy/prometheus.yml')) as { scrape_configs: Array<{ static_configs: Array<{ targets: string[] }> }> };
    const targets = prometheus.scrape_configs.flatMap((c) => c.static_configs.flatMap((s) => s.targets));
    expect(targets).toEqual(['api:9464', 'workers:8081']);
  });
});
