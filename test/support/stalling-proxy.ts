// A TCP proxy in front of PostgreSQL that can stall: while stalled it keeps every connection open and
// accepts new ones, but passes nothing either way (what each side writes is held back), as a server
// that stopped answering does; resumed, it delivers what it held, in order, and passes again. A
// client that closes its side closes both: what a stalled client abandons never reaches the server.
import net from 'node:net';

export interface StallingProxy {
  /** The database URL with the proxy's host and port. */
  url: string;
  stall(): void;
  resume(): void;
  /** Whether it holds back what either side writes now. */
  readonly stalled: boolean;
  /** Connections the proxy holds now. */
  readonly connections: number;
  close(): Promise<void>;
}

/** `stallOn`: stall by itself as soon as a client writes this text (a statement of its, say), holding that write back too. */
export async function stallingProxy(databaseUrl: string, options: { stallOn?: string } = {}): Promise<StallingProxy> {
  const target = new URL(databaseUrl);
  let stalled = false;
  const held: Array<() => void> = [];
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  const pass = (write: () => void) => (stalled ? held.push(write) : write());
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    const pair = { client, upstream };
    pairs.add(pair);
    client.on('data', (data: Buffer) => {
      if (options.stallOn !== undefined && data.includes(options.stallOn)) stalled = true;
      pass(() => upstream.write(data));
    });
    upstream.on('data', (data: Buffer) => pass(() => client.write(data)));
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end).on('end', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    stall() {
      stalled = true;
    },
    resume() {
      stalled = false;
      for (const write of held.splice(0)) write();
    },
    get stalled() {
      return stalled;
    },
    get connections() {
      return pairs.size;
    },
    async close() {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
