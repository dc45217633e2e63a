// The in-memory SQS-protocol server for local runs and tests (the spec's "local and staging use an
// in-memory implementation"): npm `fauxqs`, listening on 127.0.0.1 only. `startFauxqs` would bind every
// interface, so we build its app and listen on loopback ourselves. Queues are created by the caller
// through the SQS API (src/queue/provision.ts), exactly as against a cloud queue.
export interface LocalSqsServer {
  /** http://127.0.0.1:<port> */
  endpoint: string;
  port: number;
  /** Queue URL prefix for the default account: `${endpoint}/000000000000/`. */
  queueUrlPrefix: string;
  stop(): Promise<void>;
}

export async function startLocalSqsServer(options: { port?: number } = {}): Promise<LocalSqsServer> {
  // fauxqs is a development dependency: imported only when the local server is wanted.
  const { buildApp } = await import('fauxqs');
  const app = buildApp({ logger: false, host: '127.0.0.1' });
  await app.listen({ host: '127.0.0.1', port: options.port ?? 0 });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    port,
    queueUrlPrefix: `${endpoint}/000000000000/`,
    async stop() {
      await app.close();
    },
  };
}
