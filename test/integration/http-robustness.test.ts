// Bad input at the HTTP edge: requests Node's parser rejects before Fastify routes them, odd URLs,
// path parameters and Accept-Language values. Every answer is the error envelope, never a 500.
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpFixture, type HttpFixture } from './http-support.ts';

let f: HttpFixture;
let port: number;

beforeAll(async () => {
  f = await httpFixture();
  await f.app.listen({ port: 0, host: '127.0.0.1' });
  port = (f.app.server.address() as net.AddressInfo).port;
});

afterAll(async () => {
  await f?.close();
});

/** Sends raw bytes and returns everything the server wrote before closing. */
function raw(request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (data += chunk));
    socket.on('end', () => resolve(data));
    socket.on('close', () => resolve(data));
    socket.on('error', reject);
    socket.write(request);
  });
}

function parse(response: string): { status: number; body: unknown } {
  const status = Number(response.split(' ')[1]);
  const body = response.slice(response.indexOf('\r\n\r\n') + 4);
  return { status, body: JSON.parse(body) };
}

describe('requests rejected by the HTTP parser', () => {
  it('R-HTTP-01 R-HTTP-03 an unknown method gets the envelope with BAD_REQUEST, not Fastify\'s plain body', async () => {
    const { status, body } = parse(await raw('FOO /health HTTP/1.1\r\nHost: x\r\n\r\n'));
    expect(status).toBe(400);
    expect(body).toEqual({ success: false, error: { code: 'BAD_REQUEST', message: expect.any(String) } });
  });

  it('R-HTTP-03 a malformed request line gets the envelope', async () => {
    const { status, body } = parse(await raw('GET /health HTTP/9\r\n\r\n'));
    expect(status).toBe(400);
    expect((body as { error: { code: string } }).error.code).toBe('BAD_REQUEST');
  });

  it('R-HTTP-03 headers over the hard size limit get 431 with the envelope', async () => {
    const { status, body } = parse(await raw(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(100_000)}\r\n\r\n`));
    expect(status).toBe(431);
    expect(body).toEqual({ success: false, error: { code: 'HEADERS_TOO_LARGE', message: expect.stringContaining('65536') } });
  });
});

describe('odd URLs, parameters and headers', () => {
  const base = () => `http://127.0.0.1:${port}`;

  it('R-HTTP-03 a malformed percent-encoding in a path parameter is 400 BAD_REQUEST', async () => {
    const response = await fetch(`${base()}/task-runs/%E0%A4%A`);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('BAD_REQUEST');
  });

  it('R-HTTP-03 a very long URL is answered with the envelope, never a 500', async () => {
    const response = await fetch(`${base()}/task-runs/${'a'.repeat(5000)}`);
    expect(response.status).toBeLessThan(500);
    expect(((await response.json()) as { success: boolean }).success).toBe(false);
  });

  it.each([';;;,,q=abc', 'pt;q=NaN,*;q=-1', 'pt-BR;q=2', '*', 'x'.repeat(4000), 'pt;q=0'])(
    'R-HTTP-04 Accept-Language %# garbage never fails the request',
    async (value) => {
      const response = await fetch(`${base()}/nope`, { headers: { 'accept-language': value } });
      expect(response.status).toBe(404);
      const body = (await response.json()) as { error: { code: string } };
      expect(body.error.code).toBe('ROUTE_NOT_FOUND');
      expect(['en', 'pt']).toContain(response.headers.get('content-language'));
    },
  );
});

describe('each refusal status has its own stable code', () => {
  const base = () => `http://127.0.0.1:${port}`;
  const refusal = async (response: Response) => ({
    status: response.status,
    language: response.headers.get('content-language'),
    body: (await response.json()) as { success: boolean; error: { code: string; message: string } },
  });
  /** GET with the path sent as is (fetch would normalise the dot segments away). */
  const asIs = (path: string, headers: Record<string, string> = {}) =>
    new Promise<Response>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port, path, headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve(new Response(Buffer.concat(chunks), { status: res.statusCode!, headers: res.headers as Record<string, string> })),
          );
        })
        .on('error', reject);
    });

  it('R-HTTP-03 a static path escaping the docs directory is 403 PATH_FORBIDDEN in English and Portuguese', async () => {
    const en = await refusal(await asIs('/docs/static/%2e%2e/%2e%2e/package.json'));
    expect(en.status).toBe(403);
    expect(en.body.error.code).toBe('PATH_FORBIDDEN');
    const pt = await refusal(await asIs('/docs/static/%2e%2e/%2e%2e/package.json', { 'accept-language': 'pt-BR' }));
    expect(pt.body.error.code).toBe('PATH_FORBIDDEN');
    expect(pt.language).toBe('pt');
    expect(pt.body.error.message).not.toBe(en.body.error.message);
  });

  it('R-HTTP-03 a path parameter over the router limit is 414 URI_TOO_LONG in English and Portuguese', async () => {
    const en = await refusal(await fetch(`${base()}/task-runs/${'a'.repeat(5000)}`));
    expect(en.status).toBe(414);
    expect(en.body.error.code).toBe('URI_TOO_LONG');
    const pt = await refusal(await fetch(`${base()}/task-runs/${'a'.repeat(5000)}`, { headers: { 'accept-language': 'pt' } }));
    expect(pt.body.error.code).toBe('URI_TOO_LONG');
    expect(pt.body.error.message).not.toBe(en.body.error.message);
  });

  it('R-HTTP-03 an unsatisfiable Range on a static asset is 416 RANGE_NOT_SATISFIABLE in English and Portuguese', async () => {
    const en = await refusal(await fetch(`${base()}/docs/static/swagger-ui.css`, { headers: { range: 'bytes=999999999-' } }));
    expect(en.status).toBe(416);
    expect(en.body.error.code).toBe('RANGE_NOT_SATISFIABLE');
    const pt = await refusal(await fetch(`${base()}/docs/static/swagger-ui.css`, { headers: { range: 'bytes=999999999-', 'accept-language': 'pt' } }));
    expect(pt.body.error.code).toBe('RANGE_NOT_SATISFIABLE');
    expect(pt.body.error.message).not.toBe(en.body.error.message);
  });
});
