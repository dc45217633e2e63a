// GET /metrics in the Prometheus text format. The workers add the route to their health server; the
// API serves it on a port of its own (SVC_API_METRICS_PORT), never on the public API port.
import http from 'node:http';
import { metricsText } from './metrics.ts';

/** Answers GET/HEAD /metrics; false when the request is for another path (the caller answers it). */
export function serveMetrics(req: http.IncomingMessage, res: http.ServerResponse): boolean {
  const path = (req.url ?? '/').split('?')[0];
  if (path !== '/metrics') return false;
  metricsText().then(
    ({ contentType, body }) => {
      res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
    },
    () => {
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('metrics could not be collected\n');
    },
  );
  return true;
}

export interface SmallServer {
  /** The port it listens on (the one picked when 0 was asked). */
  port: number;
  /** Closes every connection and the listener. */
  close(): Promise<void>;
}

export type MetricsServer = SmallServer;

/**
 * Listens for a small operational server (health, metrics): short keep-alive, since scrapers and probes
 * reconnect; rejects when the port is taken. Port 0 picks a free one.
 */
export async function listenSmallServer(server: http.Server, port: number, host: string): Promise<SmallServer> {
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A server answering only GET /metrics (404 elsewhere, 405 for other methods). Port 0 picks a free one. */
export async function startMetricsServer(options: { port: number; host: string }): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { 'content-type': 'application/json; charset=utf-8', allow: 'GET, HEAD' });
      res.end(JSON.stringify({ error: { code: 'METHOD_NOT_ALLOWED', message: 'use GET /metrics' } }));
      return;
    }
    if (serveMetrics(req, res)) return;
    res.writeHead(404, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify({ error: { code: 'NOT_FOUND', message: 'this port serves GET /metrics only' } }));
  });
  return listenSmallServer(server, options.port, options.host);
}
