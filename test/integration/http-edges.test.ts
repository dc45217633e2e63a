// The HTTP edge as an attacker uses it, over real sockets: slow bodies and silent connections are
// bounded, every error the server writes (including Node's own parser refusals, a missing Host and an
// unmet Expect) is the envelope in the requested language with the CORS headers of an allowed origin,
// and credential-sized headers get the spec's 401 on a connection that stays usable.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpFixture, type HttpFixture } from './http-support.ts';

const ORIGIN = 'https://app.example.com';
let f: HttpFixture;
let port: number;

beforeAll(async () => {
  f = await httpFixture({ timeouts: { requestMs: 1000, idleMs: 1500, keepAliveMs: 500 } });
  await f.app.listen({ port: 0, host: '127.0.0.1' });
  port = (f.app.server.address() as net.AddressInfo).port;
});

afterAll(async () => {
  await f?.close();
});

interface RawReply {
  text: string;
  /** ms from connect until the server closed the connection. */
  closedAfterMs: number;
  reset: boolean;
}

/** Writes `request` (pieces separated by nothing: written at once), then waits for the server to close. */
function raw(request: string | Buffer): Promise<RawReply> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    let reset = false;
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    socket.on('error', () => (reset = true));
    socket.on('close', () => resolve({ text, closedAfterMs: Date.now() - started, reset }));
    if (request.length > 0) socket.write(request);
  });
}

function parsed(reply: RawReply) {
  const [head = '', body = ''] = reply.text.split('\r\n\r\n');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(body) as { success: boolean; error: { code: string; message: string } } };
}

const ptCors = `Accept-Language: pt-BR\r\nOrigin: ${ORIGIN}\r\n`;

function expectPortugueseEnvelopeWithCors(reply: ReturnType<typeof parsed>, status: number, code: string) {
  expect(reply.status).toBe(status);
  expect(reply.body).toEqual({ success: false, error: { code, message: expect.any(String) } });
  expect(reply.headers['content-language']).toBe('pt');
  expect(reply.headers['access-control-allow-origin']).toBe(ORIGIN);
  expect(reply.headers['access-control-allow-credentials']).toBe('true');
}

describe('slow and silent clients are bounded (SVC_HTTP_*_TIMEOUT_MS)', () => {
  it('R-HTTP-03 Content-Length 100, one byte, then silence: 408 REQUEST_TIMEOUT envelope and a close within the bound', async () => {
    const reply = await raw(`POST /task-runs HTTP/1.1\r\nHost: x\r\n${ptCors}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{`);
    // requestMs 1000 plus Node's checking interval (250 ms here); generous slack for a loaded machine.
    expect(reply.closedAfterMs).toBeGreaterThanOrEqual(900);
    expect(reply.closedAfterMs).toBeLessThan(6000);
    expectPortugueseEnvelopeWithCors(parsed(reply), 408, 'REQUEST_TIMEOUT');
  });

  it('R-HTTP-03 a connection that never sends a byte is closed within the bound', async () => {
    const reply = await raw('');
    expect(reply.closedAfterMs).toBeLessThan(6000);
  });

  it('R-HTTP-03 an idle kept-alive connection is closed after the keep-alive timeout', async () => {
    const started = Date.now();
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (c: Buffer) => (text += c.toString()));
    const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now() - started)));
    socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    const after = await closed;
    expect(text).toMatch(/^HTTP\/1\.1 200/);
    expect(after).toBeLessThan(5000);
  });
});

describe('every error the server writes is the envelope in the requested language, with CORS headers', () => {
  it('R-HTTP-01 R-HTTP-04 an HTTP/1.1 request without Host: 400 HOST_REQUIRED', async () => {
    const reply = parsed(await raw(`GET /health HTTP/1.1\r\n${ptCors}Connection: close\r\n\r\n`));
    expectPortugueseEnvelopeWithCors(reply, 400, 'HOST_REQUIRED');
  });

  it('R-HTTP-01 R-HTTP-04 two Host headers (RFC 9112: 400): 400 HOST_DUPLICATED', async () => {
    for (const hosts of ['Host: a.example\r\nHost: b.example\r\n', 'Host: a.example\r\nhost: a.example\r\n']) {
      const reply = parsed(await raw(`GET /health HTTP/1.1\r\n${hosts}${ptCors}Connection: close\r\n\r\n`));
      expectPortugueseEnvelopeWithCors(reply, 400, 'HOST_DUPLICATED');
    }
    // One Host is served as before.
    expect((await raw('GET /health HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n')).text).toMatch(/^HTTP\/1\.1 200/);
  });

  it('R-HTTP-01 R-HTTP-04 a path whose percent-encoding does not decode (%c0%ae): 400 in Portuguese with CORS', async () => {
    const reply = parsed(await raw(`GET /task-runs/%c0%ae HTTP/1.1\r\nHost: x\r\n${ptCors}Connection: close\r\n\r\n`));
    expectPortugueseEnvelopeWithCors(reply, 400, 'BAD_REQUEST');
    // Not for an origin outside the list.
    const other = parsed(await raw(`GET /task-runs/%c0%ae HTTP/1.1\r\nHost: x\r\nOrigin: https://evil.example\r\nConnection: close\r\n\r\n`));
    expect(other.status).toBe(400);
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('R-HTTP-01 R-HTTP-04 Expect: 999-nonsense: 417 EXPECTATION_FAILED', async () => {
    const reply = parsed(await raw(`GET /health HTTP/1.1\r\nHost: x\r\n${ptCors}Expect: 999-nonsense\r\nConnection: close\r\n\r\n`));
    expectPortugueseEnvelopeWithCors(reply, 417, 'EXPECTATION_FAILED');
  });

  it('R-HTTP-01 R-HTTP-04 a header the parser refuses: 400 BAD_REQUEST in Portuguese with CORS', async () => {
    const reply = parsed(await raw(`GET /health HTTP/1.1\r\nHost: x\r\n${ptCors}Bad Header: x\r\n\r\n`));
    expectPortugueseEnvelopeWithCors(reply, 400, 'BAD_REQUEST');
  });

  it('R-HTTP-01 R-HTTP-04 headers beyond the hard limit: 431 HEADERS_TOO_LARGE in Portuguese with CORS, no reset', async () => {
    const reply = await raw(`GET /health HTTP/1.1\r\nHost: x\r\n${ptCors}X-Big: ${'a'.repeat(100 * 1024)}\r\n\r\n`);
    expect(reply.reset).toBe(false);
    expectPortugueseEnvelopeWithCors(parsed(reply), 431, 'HEADERS_TOO_LARGE');
  });
});

describe('credential-sized headers', () => {
  it('R-AUTH-13 a credential between 1 KiB and 48 KiB is 401, on one kept-alive connection without a reset', async () => {
    // A raw socket: Node's own client agent would drop the connection on the short keep-alive hint.
    const socket = net.connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    let buffer = Buffer.alloc(0);
    let closed = false;
    let failure: Error | undefined;
    socket.on('data', (c: Buffer) => (buffer = Buffer.concat([buffer, c])));
    socket.on('close', () => (closed = true));
    socket.on('error', (e) => (failure = e));
    /** Resolves with the next complete response on the socket. */
    const nextResponse = async (): Promise<{ status: number; body: string }> => {
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end >= 0) {
          const head = buffer.subarray(0, end).toString();
          const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
          if (buffer.length >= end + 4 + length) {
            const body = buffer.subarray(end + 4, end + 4 + length).toString();
            buffer = buffer.subarray(end + 4 + length);
            return { status: Number(head.split(' ')[1]), body };
          }
        }
        if (closed || failure) throw new Error(`connection ended before a reply: ${failure?.message ?? 'closed'}`);
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    const statuses = new Map<number, number>();
    try {
      for (let i = 0; i < 300; i++) {
        const size = 1025 + Math.floor(((48 * 1024 - 1025) * i) / 299);
        const credential = i % 2 === 1 ? `Cookie: __Host-svc_session=${'c'.repeat(size)}` : `Authorization: Bearer ${'t'.repeat(size)}`;
        socket.write(`GET /task-runs/${crypto.randomUUID()} HTTP/1.1\r\nHost: x\r\n${credential}\r\n\r\n`);
        const { status, body } = await nextResponse();
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (status === 401) expect(JSON.parse(body).error.code).toBe('UNAUTHENTICATED');
      }
    } finally {
      socket.destroy();
    }
    expect(Object.fromEntries(statuses)).toEqual({ 401: 300 });
  });
});
