// The workers' health endpoint on SVC_HEALTH_PORT (default 8081): GET /healthz answers 200 while the
// process lives, with {ready, draining, latestMigration, redis}; GET /readyz answers 200 only when ready
// (schema current and consuming), otherwise 503 with the reason. Plain node:http: two routes do not
// justify a framework in the workers image.
import http from 'node:http';
import { listenSmallServer, serveMetrics, type SmallServer } from '../../observe/metrics-server.ts';

export interface HealthState {
  ready: boolean;
  draining: boolean;
  latestMigration: string | null;
  /** Why the process is not ready; null when ready. */
  reason: string | null;
  /** `up`, `down` (running without Redis: ledger, database and sweep only) or `none` (not configured). */
  redis: 'up' | 'down' | 'none';
}

export type HealthServer = SmallServer;

export async function startHealthServer(options: { port: number; host?: string; state: () => HealthState }): Promise<HealthServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const state = options.state();
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, { error: { code: 'METHOD_NOT_ALLOWED', message: 'use GET' } });
    if (serveMetrics(req, res)) return; // GET /metrics (src/observe)
    if (path === '/healthz') {
      return send(200, { ready: state.ready, draining: state.draining, latestMigration: state.latestMigration, redis: state.redis });
    }
    if (path === '/readyz') {
      return state.ready
        ? send(200, { ready: true, latestMigration: state.latestMigration })
        : send(503, { ready: false, draining: state.draining, reason: state.reason, latestMigration: state.latestMigration });
    }
    return send(404, { error: { code: 'NOT_FOUND', message: 'the worker serves GET /healthz, GET /readyz and GET /metrics' } });
  });
  return listenSmallServer(server, options.port, options.host ?? '0.0.0.0');
}
