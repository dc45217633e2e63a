// The operator console as a person sees it: Debian's chromium, driven by playwright-core (which never
// downloads a browser), against the console over real services. The list renders with counts per
// queue and status, pages, refreshes itself, a filter narrows it, a run's timeline shows its trail and
// payload, and redrive, cancel, bulk redrive and dead-letter redrive each go through a confirmation
// and record the operator named at login.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_TEST_TOKEN, startTestConsole, type TestConsole } from '../fixtures/console-server.ts';
import { workHarness, type WorkHarness } from '../fixtures/work-harness.ts';
import { waitFor } from '../support/wait-for.ts';

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
  c = await startTestConsole(h, { pageSize: 2 });
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
    await page.fill('input[name=name]', 'Ana <b>Ops</b>');
    await page.fill('input[name=token]', CONSOLE_TEST_TOKEN);
    await page.click('button[type=submit]');
    expect(await (await page.waitForSelector('[role=alert]')).textContent()).toContain('CONSOLE_OPERATOR_INVALID');
    await page.fill('input[name=name]', 'ana.ops');
    await page.fill('input[name=token]', 'not-the-token-but-long-enough-0123456789');
    await page.click('button[type=submit]');
    expect(await (await page.waitForSelector('[role=alert]')).textContent()).toContain('CONSOLE_TOKEN_INVALID');
    await page.fill('input[name=token]', CONSOLE_TEST_TOKEN);
    await page.click('button[type=submit]');
    await page.waitForSelector('#runs');
    expect(await page.locator('#operator').textContent()).toBe('ana.ops');
    expect(new URL(page.url()).pathname).toBe('/');
    const cookies = await browser.cookies(c.url);
    expect(cookies).toHaveLength(1);
    expect(cookies[0]).toMatchObject({ name: 'svc_console', httpOnly: true, sameSite: 'Strict' });
    expect(cookies[0]!.value).not.toContain(CONSOLE_TEST_TOKEN);
    const ids = await runIds();
    expect(ids).toEqual(expect.arrayContaining([ok, failed]));
    expect(await page.locator('#queues tr[data-queue=default] td.dead-letter').textContent()).toMatch(/^[1-9]\d*$/);
    // Counts per queue and status, each a link to the filtered list.
    expect(await page.locator('#queues tr[data-queue=default] td[data-status=failed]').textContent()).toBe('1');
    expect(await page.locator('#queues tr[data-queue=default] td[data-status=succeeded]').textContent()).toBe('1');
    await page.click('#queues tr[data-queue=default] td[data-status=failed] a');
    await page.waitForURL(/status=failed/);
    expect(await runIds()).toEqual([failed]);
    await page.goto(`${c.url}/`);
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
    // The payload, as River UI shows a job's args.
    expect(JSON.parse((await page.locator('#payload').textContent())!)).toEqual({ key: 'console-failed', fail: 'permanent' });
    if (process.env.CONSOLE_SCREENSHOT) await page.screenshot({ path: process.env.CONSOLE_SCREENSHOT.replace(/\.png$/, '-run.png'), fullPage: true });
  });

  it('a redrive is confirmed on its own page, creates the new run (trigger redrive, caused by the failed run, actor the operator) and links both', async () => {
    await page.goto(`${c.url}/runs/${failed}`);
    await page.click('#redrive');
    await page.waitForSelector('#confirm');
    expect(new URL(page.url()).pathname).toBe(`/runs/${failed}/redrive`);
    // Nothing is written before the confirmation.
    expect((await h.sql`SELECT 1 FROM platform_task_runs WHERE causation_id = ${failed}`).length).toBe(0);
    await page.click('#confirm');
    await page.waitForSelector('#notice');
    const newRunId = new URL(page.url()).pathname.split('/').pop()!;
    expect(newRunId).not.toBe(failed);
    const [row] = await h.sql<{ trigger: string; causation_id: string; name: string }[]>`
      SELECT trigger, causation_id::text, name FROM platform_task_runs WHERE run_id = ${newRunId}`;
    expect(row).toEqual({ trigger: 'redrive', causation_id: failed, name: 'fixture.effect' });
    expect(await page.locator('#facts').textContent()).toContain('redrive:console:ana.ops');
    expect(await page.locator('#facts').textContent()).toContain(failed);
    await page.goto(`${c.url}/runs/${failed}`);
    expect(await page.locator('#redriven-as').textContent()).toBe(newRunId);
    expect(await page.locator('#redrive').count()).toBe(0); // one redrive per failed run
    expect(await page.locator('#timeline li.event').last().getAttribute('data-event')).toBe('redriven');
    // The list marks the failed run: redriven → the new run.
    await page.goto(`${c.url}/?status=failed`);
    const mark = page.locator(`#runs tr[data-run-id="${failed}"] a.redriven`);
    expect(await mark.getAttribute('href')).toBe(`/runs/${newRunId}`);
    expect(await mark.textContent()).toContain('redriven →');
    if (process.env.CONSOLE_SCREENSHOT) {
      await page.goto(`${c.url}/`);
      await page.screenshot({ path: process.env.CONSOLE_SCREENSHOT, fullPage: true });
    }
  });

  it('the list pages with older/newer links beyond one page', async () => {
    // Three runs now (ok, failed, its redrive); two a page.
    await page.goto(`${c.url}/?unit=fixture.effect`);
    const first = await runIds();
    expect(first).toHaveLength(2);
    expect(await page.locator('#newer').count()).toBe(0);
    await page.click('#older');
    await page.waitForURL(/offset=2/);
    const second = await runIds();
    expect(second.length).toBeGreaterThanOrEqual(1);
    expect(second.filter((id) => first.includes(id))).toEqual([]);
    expect(new URL(page.url()).searchParams.get('unit')).toBe('fixture.effect');
    await page.click('#newer');
    await page.waitForURL((u) => !u.searchParams.has('offset'));
    expect(await runIds()).toEqual(first);
  });

  it('auto-refresh reloads the list on its own, and can be turned off', async () => {
    await page.goto(`${c.url}/?status=queued`);
    await page.click('#refresh a[data-refresh="5"]');
    await page.waitForURL(/refresh=5/);
    // A run queued after the page loaded appears without a click.
    const later = (await h.dispatch('fixture.effect', { key: 'console-later' })).runId;
    await waitFor(async () => (await runIds().catch((): (string | null)[] => [])).includes(later), 15_000, { stepMs: 250, what: 'the list refreshed itself' });
    await page.click('#refresh a[data-refresh="0"]');
    await page.waitForURL((u) => !u.searchParams.has('refresh'));
    expect(await page.locator('meta[http-equiv=refresh]').count()).toBe(0);
  });

  it('a cancel asks for a confirmation and a reason, and the trail records both the operator and the reason', async () => {
    const queued = (await h.dispatch('fixture.effect', { key: 'console-cancel' })).runId;
    await page.goto(`${c.url}/runs/${queued}`);
    await page.click('#cancel');
    await page.waitForSelector('#reason');
    expect((await h.run(queued))!.status).toBe('queued');
    await page.fill('#reason', 'customer asked <twice>');
    await page.click('#confirm');
    await page.waitForSelector('#notice');
    expect((await h.run(queued))!.status).toBe('failed');
    const failedEvent = page.locator('#timeline li[data-event=failed]');
    expect(await failedEvent.textContent()).toContain('customer asked <twice>');
    expect(await failedEvent.textContent()).toContain('console:ana.ops');
  });

  it("a dead-letter queue's messages are listed with already-redriven runs marked, and redriven after a confirmation", async () => {
    const second = (await h.dispatch('fixture.effect', { key: 'console-dlq', fail: 'permanent' })).runId;
    await h.relay();
    await h.waitForEvent(second, 'dead_lettered');
    await page.goto(`${c.url}/`);
    await page.click('#queues tr[data-queue=default] td.dead-letter a');
    await page.waitForSelector('#letters');
    await waitFor(async () => (await page.locator(`#letters tr[data-run-id="${second}"]`).count()) > 0 || (await page.reload(), false), 15_000, { what: 'both dead letters listed' });
    const [redriveOfFailed] = await h.sql<{ run_id: string }[]>`SELECT run_id::text FROM platform_task_runs WHERE causation_id = ${failed}`;
    expect(await page.locator(`#letters tr[data-run-id="${failed}"] a.redriven`).first().getAttribute('href')).toBe(`/runs/${redriveOfFailed!.run_id}`);
    expect(await page.locator(`#letters tr[data-run-id="${second}"] a.redriven`).count()).toBe(0);
    await page.click('#confirm');
    await page.waitForSelector('#results');
    expect(await page.locator(`#results tr[data-run-id="${second}"]`).first().getAttribute('data-action')).toBe('redriven');
    expect(await page.locator(`#results tr[data-run-id="${failed}"]`).first().getAttribute('data-action')).toBe('already_redriven');
    const [row] = await h.sql<{ actor_label: string }[]>`SELECT actor_label FROM platform_task_runs WHERE causation_id = ${second} AND trigger = 'redrive'`;
    expect(row!.actor_label).toBe('redrive:console:ana.ops');
  });

  it('the failed runs matching the filters are redriven together after a confirmation listing them', async () => {
    const a = (await h.dispatch('fixture.effect', { key: 'console-bulk-a', fail: 'permanent' })).runId;
    const b = (await h.dispatch('fixture.effect', { key: 'console-bulk-b', fail: 'permanent' })).runId;
    await h.relay();
    await h.waitForStatus(a, ['failed']);
    await h.waitForStatus(b, ['failed']);
    await page.goto(`${c.url}/?unit=fixture.effect&since=1h`);
    await page.click('#bulk-redrive');
    await page.waitForSelector('#selection');
    const selected = await page.locator('#selection tr.run').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-run-id')));
    expect(selected).toEqual(expect.arrayContaining([a, b]));
    // Already redriven and cancelled runs are not selected.
    expect(selected).not.toContain(failed);
    const before = await h.sql`SELECT 1 FROM platform_task_runs WHERE causation_id IN (${a}, ${b})`;
    expect(before.length).toBe(0);
    await page.click('#confirm');
    await page.waitForSelector('#results');
    for (const id of [a, b]) expect(await page.locator(`#results tr[data-run-id="${id}"]`).getAttribute('data-result')).toBe('redriven');
    const after = await h.sql<{ causation_id: string; actor_label: string }[]>`
      SELECT causation_id::text, actor_label FROM platform_task_runs WHERE causation_id IN (${a}, ${b}) AND trigger = 'redrive'`;
    expect(after.map((r) => r.causation_id).sort()).toEqual([a, b].sort());
    expect(new Set(after.map((r) => r.actor_label))).toEqual(new Set(['redrive:console:ana.ops']));
  });
});
