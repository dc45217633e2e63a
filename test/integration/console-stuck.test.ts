// The console shows the stuck runs (what `svc runs list --stuck` lists and the rescuer sends again):
// a run sent whose message the queue lost appears on /stuck once past its window, with its reason, and
// the runs list links there. Real HTTP over a socket, real PostgreSQL and SQS.
import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueUrl } from '../../src/queue/names.ts';
import { CONSOLE_TEST_TOKEN, startTestConsole, type TestConsole } from '../fixtures/console-server.ts';
import { effectTask } from '../fixtures/units/runtime-units.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import type { WorkUnit } from '../../src/work/define/unit.ts';
import { waitFor } from '../support/wait-for.ts';

let h: WorkHarness;
let consoleServer: TestConsole;

beforeAll(async () => {
  h = await workHarness({ units: new Map<string, WorkUnit>([[effectTask.name, effectTask]]) });
  const v = 1;
  consoleServer = await startTestConsole(h, {
    stuckWindows: { visibilitySeconds: { critical: v, default: v, bulk: v, maintenance: v }, unitTimeoutSeconds: new Map([[effectTask.name, 1]]), marginMs: 200 },
  });
}, 60_000);

afterAll(async () => {
  await consoleServer?.close();
  await h?.close();
});

async function loggedIn(): Promise<string> {
  const response = await fetch(`${consoleServer.url}/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: consoleServer.url },
    body: new URLSearchParams({ token: CONSOLE_TEST_TOKEN, name: 'alice' }).toString(),
  });
  expect(response.status).toBe(303);
  return (response.headers.get('set-cookie') ?? '').split(';')[0]!;
}

describe('console: stuck runs', () => {
  it('a run whose message was lost shows on /stuck with its reason, linked from the runs list', async () => {
    const cookie = await loggedIn();
    const { runId } = await h.dispatch(effectTask.name, { key: 'console-stuck' });
    await h.relay();
    // The queue loses the message (a purge, a retention expiry): received here and deleted.
    const url = queueUrl(h.queueUrlPrefix, 'default');
    await waitFor(async () => {
      const got = await h.sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
      let found = false;
      for (const m of got.Messages ?? []) {
        if (m.Body?.includes(runId)) found = true;
        await h.sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle! }));
      }
      return found;
    }, 10_000, { what: 'the message received and deleted' });
    const list = await (await fetch(`${consoleServer.url}/`, { headers: { cookie } })).text();
    expect(list).toContain('href="/stuck"');
    // Past its window (visibility 1 s + timeout 1 s + margin 0.2 s): on the page, with why.
    let page = '';
    await waitFor(
      async () => {
        page = await (await fetch(`${consoleServer.url}/stuck`, { headers: { cookie } })).text();
        return page.includes(`data-run-id="${runId}"`);
      },
      15_000,
      { what: 'the lost run on /stuck' },
    );
    expect(page).toContain('sent_not_received');
    expect(page).toMatch(/<span id="stuck-count">[1-9]\d*<\/span>/);
  });
});
