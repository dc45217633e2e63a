// The operator console as a person sees it: Debian's chromium, driven by playwright-core (which never
// downloads a browser), against the console over real services. The list renders, a filter narrows
// it, a run's timeline shows its trail, and a redrive click creates the new run.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_TEST_TOKEN, startTestConsole, type TestConsole } from '../fixtures/console-server.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';

const CHROMIUM = '/usr/bin/chromium';

let h: WorkHarness;
let c: TestConsole;
let browser: BrowserContext;
let page: Page;
let profile: string;
let ok: string;
let failed: string;

beforeAll(async () => {
  h = await workHarness();
  await h.startWorkers({ queues: ['default'] });
  ok = (await h.dispatch('fixture.effect', { key: 'console-ok' })).runId;
  failed = (await h.dispatch('fixture.effect', { key: 'console-failed', fail: 'permanent' })).runId;
  await h.relay();
  await h.waitForStatus(ok, ['succeeded']);
  await h.waitForStatus(failed, ['failed']);
  await h.waitForEvent(failed, 'dead_lettered');
  c = await startTestConsole(h);
  profile = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-console-chromium-'));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 800 },
  });
  page = browser.pages()[0] ?? (await browser.newPage());
  page.setDefaultTimeout(15_000);
});
afterAll(async () => {
  await browser?.close();
  if (profile) fs.rmSync(profile, { recursive: true, force: true });
  await c?.close();
  await h?.close();
});

const runIds = async () => page.locator('#runs tr.run').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-run-id')));

describe('console in a real browser', () => {
  it('asks for the token once, then the list renders every run with the queue depths', async () => {
    await page.goto(c.url + '/');
    expect(new URL(page.url()).pathname).toBe('/login');
    await page.fill('input[name=token]', 'not-the-token-but-long-enough-0123456789');
    await page.click('button[type=submit]');
    expect(await (await page.waitForSelector('[role=alert]')).textContent()).toContain('CONSOLE_TOKEN_INVALID');
    await page.fill('input[name=token]', CONSOLE_TEST_TOKEN);
    await page.click('button[type=submit]');
    await page.waitForSelector('#runs');
    expect(new URL(page.url()).pathname).toBe('/');
    const cookies = await browser.cookies(c.url);
    expect(cookies).toHaveLength(1);
    expect(cookies[0]).toMatchObject({ name: 'svc_console', httpOnly: true, sameSite: 'Strict' });
    expect(cookies[0]!.value).not.toContain(CONSOLE_TEST_TOKEN);
    const ids = await runIds();
    expect(ids).toEqual(expect.arrayContaining([ok, failed]));
    expect(await page.locator('#queues tr[data-queue=default] td.dead-letter').textContent()).toMatch(/^[1-9]\d*$/);
    if (process.env.CONSOLE_SCREENSHOT) await page.screenshot({ path: process.env.CONSOLE_SCREENSHOT, fullPage: true });
  });

  it('a filter narrows the list', async () => {
    await page.selectOption('select[name=status]', 'failed');
    await page.click('#filters button[type=submit]');
    await page.waitForURL(/status=failed/);
    const ids = await runIds();
    expect(ids).toContain(failed);
    expect(ids).not.toContain(ok);
    // A unit that has no runs empties it.
    await page.goto(`${c.url}/?unit=fixture.none`);
    expect(await runIds()).toEqual([]);
    // A bad filter is a clear refusal, not a crash.
    const response = await page.goto(`${c.url}/?since=yesterday`);
    expect(response?.status()).toBe(400);
    expect(await page.locator('[role=alert]').textContent()).toContain('RUN_FILTER_INVALID');
  });

  it("a run's timeline shows its trail events in order", async () => {
    await page.goto(`${c.url}/?status=failed`);
    await page.click(`#runs tr[data-run-id="${failed}"] a`);
    await page.waitForSelector('#timeline');
    const events = await page.locator('#timeline li.event').evaluateAll((items) => items.map((i) => i.getAttribute('data-event')));
    expect(events).toEqual(['queued', 'sent', 'received', 'started', 'failed', 'dead_lettered']);
    expect(await page.locator('#timeline li[data-event=failed]').textContent()).toContain('VALIDATION_FAILED');
    if (process.env.CONSOLE_SCREENSHOT) await page.screenshot({ path: process.env.CONSOLE_SCREENSHOT.replace(/\.png$/, '-run.png'), fullPage: true });
  });

  it('a redrive click creates the new run (trigger redrive, caused by the failed run) and links both', async () => {
    await page.goto(`${c.url}/runs/${failed}`);
    await page.click('#redrive');
    await page.waitForSelector('#notice');
    const newRunId = new URL(page.url()).pathname.split('/').pop()!;
    expect(newRunId).not.toBe(failed);
    const [row] = await h.sql<{ trigger: string; causation_id: string; name: string }[]>`
      SELECT trigger, causation_id::text, name FROM platform_task_runs WHERE run_id = ${newRunId}`;
    expect(row).toEqual({ trigger: 'redrive', causation_id: failed, name: 'fixture.effect' });
    expect(await page.locator('#facts').textContent()).toContain(failed);
    await page.goto(`${c.url}/runs/${failed}`);
    expect(await page.locator('#redriven-as').textContent()).toBe(newRunId);
    expect(await page.locator('#redrive').count()).toBe(0); // one redrive per failed run
    expect(await page.locator('#timeline li.event').last().getAttribute('data-event')).toBe('redriven');
  });
});
