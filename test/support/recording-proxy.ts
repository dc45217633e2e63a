// A TCP proxy in front of PostgreSQL that records what the client writes, chunk by chunk: a test
// reads from it which statements went out in one write (one round trip) and which waited for an answer.
// The proxy and the client under test share one process, so writes the client makes in one turn of
// the event loop reach the proxy before any answer to them can.
import net from 'node:net';

export interface RecordingProxy {
  /** The database URL with the proxy's host and port. */
  url: string;
  /** What the client wrote, one entry per chunk read from its socket (latin1). */
  chunks: string[];
  /** Who sent each chunk, client and server interleaved in the order the proxy read them. */
  directions: Array<'client' | 'server'>;
  /**
   * From now on the server's answers are held back until the client writes `marker`: a client that
   * waits for an answer before it sends `marker` then never sends it (the test times out), one that
   * does not wait gets every answer once it has. A proof that no round trip came before `marker`.
   */
  holdAnswersUntil(marker: string): void;
  close(): Promise<void>;
}

/**
 * `rewrite` (optional) changes what the client wrote before it goes on (a fault injected on the wire:
 * the recorded chunk is what the client wrote, the server gets the rewritten bytes).
 */
export async function recordingProxy(databaseUrl: string, rewrite?: (chunk: Buffer) => Buffer): Promise<RecordingProxy> {
  const target = new URL(databaseUrl);
  const chunks: string[] = [];
  const directions: Array<'client' | 'server'> = [];
  const sockets = new Set<net.Socket>();
  let holdUntil: string | undefined;
  const held: Array<() => void> = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    client.on('data', (data: Buffer) => {
      chunks.push(data.toString('latin1'));
      directions.push('client');
      upstream.write(rewrite ? rewrite(data) : data);
      if (holdUntil !== undefined && data.toString('latin1').includes(holdUntil)) {
        holdUntil = undefined;
        for (const answer of held.splice(0)) answer();
      }
    });
    upstream.on('data', (data) => {
      const answer = () => {
        directions.push('server');
        client.write(data);
      };
      if (holdUntil !== undefined) held.push(answer);
      else answer();
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as net.AddressInfo).port);
  return {
    url: url.toString(),
    chunks,
    directions,
    holdAnswersUntil(marker: string) {
      holdUntil = marker;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The name postgres.js prepared COMMIT under on a proxied connection (from its Parse: name, NUL, text, NUL). */
export function commitStatementName(chunks: readonly string[]): string {
  const found = /([A-Za-z0-9_]+)\u0000COMMIT\u0000/.exec(chunks.join(''));
  if (!found) throw new Error('COMMIT was not prepared on this connection');
  return found[1]!;
}

/**
 * A proxy whose first `BEGIN;` reaches the server as `BEGIX;` (a syntax error): the session stays
 * outside any transaction while what the client sent behind it is already on its way. `broken()` says
 * whether the fault struck.
 */
export async function beginBrokenOnTheWire(databaseUrl: string): Promise<RecordingProxy & { broken(): boolean }> {
  let broken = false;
  const proxy = await recordingProxy(databaseUrl, (chunk) => {
    const at = chunk.indexOf('BEGIN;');
    if (broken || at < 0) return chunk;
    broken = true;
    const copy = Buffer.from(chunk);
    copy.write('BEGIX', at, 'latin1');
    return copy;
  });
  return { ...proxy, broken: () => broken };
}

