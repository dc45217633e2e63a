// The operator console as a Fastify instance (src/main/console.ts listens): the runs list with
// filters, paging, counts per queue and status and auto-refresh; a run's trail as a timeline with its
// payload; queue and dead-letter depths; a dead-letter queue's messages; and redrive (one run, the
// failed runs matching the filters, a dead-letter queue) and cancel, each confirmed on its own page and
// calling the SAME functions as `svc runs` / `svc dlq` (src/work/operate/). Pages are HTML rendered
// here; every refusal is a page with a stable code (never a stack). Access rules: console-access.ts.
import type { SQSClient } from '@aws-sdk/client-sqs';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Sql } from '../db/client.ts';
import { CodedError } from '../errors/coded-error.ts';
import { evictRunStatus } from '../kv/run-status-cache.ts';
import { signalOutbox } from '../kv/wake.ts';
import { readOutboxBacklog, readQueueDepths, type OutboxBacklog, type QueueDepth } from '../observe/backlog.ts';
import { dlqUrl, isQueueName } from '../queue/names.ts';
import { cancelRunNow } from '../work/operate/cancel-run.ts';
import { listDeadLetters, redriveDeadLetters } from '../work/operate/dead-letter-queue.ts';
import { listRuns, listStuckRuns, parseRunFilters, type RawRunFilters } from '../work/operate/list-runs.ts';
import type { OverdueWindows } from '../work/runtime/store/stranded-runs.ts';
import { checkRunId, OperateError, type OperateErrorCode } from '../work/operate/operate-error.ts';
import { BULK_REDRIVE_UNCONFIRMED_MAX, redriveRunNow, redriveRuns, type KeySource } from '../work/operate/redrive-run.ts';
import { showRun } from '../work/operate/show-run.ts';
import { checkOperatorName, CONSOLE_COOKIE, ConsoleAccessError, type ConsoleGate } from './console-access.ts';
import { loginThrottle } from './console-login-throttle.ts';
import { consoleMessage, type ConsoleMessageCode } from './console-messages.ts';
import {
  bulkResultPage,
  confirmBulkPage,
  confirmRunPage,
  deadLetterResultPage,
  deadLettersPage,
  errorPage,
  loginPage,
  REFRESH_CHOICES,
  runPage,
  runsPage,
  type ListFilters,
  stuckPage,
  type StatusCounts,
  type Viewer,
} from './console-pages.ts';
import { sessionStore, type ConsoleSession } from './console-sessions.ts';

/** Default number of runs one list page shows. */
export const CONSOLE_PAGE_SIZE = 200;
/** Deepest offset the list pages to (offset paging reads every run before it). */
export const CONSOLE_MAX_OFFSET = 10_000;
/** Dead-letter messages one dead-letter page lists (and one confirmed redrive handles) at most. */
export const CONSOLE_DEAD_LETTERS_MAX = 100;
/** Runs the bulk confirmation page lists (all selected are counted and redriven). */
const BULK_SHOWN = 100;
/** Largest form body the console accepts (a token, a name, a reason of 500 characters, filters). */
const FORM_BODY_LIMIT = 8192;

export interface ConsoleDeps {
  sql: Sql;
  /** For the relay's wake signal after a redrive and the status-cache eviction after a cancel; optional. */
  redis?: Redis | undefined;
  /** For queue and dead-letter depths and the dead-letter pages; without it they show as unavailable. */
  sqs?: { client: SQSClient; queueUrlPrefix: string } | undefined;
  gate: ConsoleGate;
  /** Prefix of the actor recorded on runs and trails: `<operator>:<name given at login>`. Default `console`. */
  operator?: string;
  /** Business idempotency keys of the units (loadKeySource), so a redrive reopens their ledger rows. Default none. */
  keySource?: KeySource | undefined;
  /** Seconds a login session lives. Default 28800 (8 h). */
  sessionTtlSeconds?: number;
  /** Failed logins one client address may make within the window before 429. Default 5. */
  loginMaxFailures?: number;
  /** Window of the failed-login count, in seconds. Default 60. */
  loginWindowSeconds?: number;
  /** Runs a list page shows. Default 200. */
  pageSize?: number;
  /** How the stuck runs page judges a run overdue (as the rescuer: visibility, unit timeouts, margin). Without it the page says it is unavailable. */
  stuckWindows?: OverdueWindows | undefined;
  logger: Logger | false;
}

const OPERATE_STATUS: Record<OperateErrorCode, number> = {
  RUN_ID_INVALID: 400,
  RUN_NOT_FOUND: 404,
  RUN_NOT_FAILED: 409,
  RUN_ALREADY_FINAL: 409,
  RUN_PAYLOAD_GONE: 409,
  RUN_FILTER_INVALID: 400,
  BULK_LIMIT_EXCEEDED: 400,
};

/** Notices a redirect may ask a run page to show (never text from the query itself). */
const NOTICES: Record<string, string> = {
  redriven: 'Redriven: this is the new run; the failed run links to it.',
  'already-redriven': 'The run had been redriven before: this is that redrive run; nothing new was written.',
  cancelled: 'Cancelled: the run is failed with CANCELLED.',
  'already-cancelled': 'The run was already cancelled: nothing new was written.',
};

class ConsoleRefusal extends CodedError {
  readonly status: number;
  constructor(status: number, code: string, message: string) {
    super(code, message);
    this.status = status;
  }
}

function cookieOf(request: FastifyRequest, name: string): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return undefined;
}

function html(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).header('content-type', 'text/html; charset=utf-8').send(body);
}

/** The CLI-flavoured messages of the operate functions name options (`--status`); the console names fields. */
const forConsole = (message: string) => message.replace(/--([a-z-]+)/g, '$1');

type Form = Record<string, unknown> | undefined;
const field = (body: Form, name: string): string => (typeof body?.[name] === 'string' ? body[name] : '');

/** Run counts per queue and status, over tenant and platform runs. */
async function statusCounts(sql: Sql): Promise<StatusCounts> {
  const rows = await sql<{ queue: string; status: string; n: number }[]>`
    SELECT queue, status, sum(n)::int AS n FROM (
      SELECT queue, status, count(*) AS n FROM task_runs GROUP BY queue, status
      UNION ALL SELECT queue, status, count(*) AS n FROM platform_task_runs GROUP BY queue, status) c
     GROUP BY queue, status`;
  const counts: StatusCounts = new Map();
  for (const r of rows) {
    if (!counts.has(r.queue)) counts.set(r.queue, new Map());
    counts.get(r.queue)!.set(r.status, r.n);
  }
  return counts;
}

/** Failed run → its redrive run, from the runs' `redriven` trail events (the trail's run index). */
async function redrivenAs(sql: Sql, runIds: readonly string[]): Promise<Map<string, string>> {
  if (runIds.length === 0) return new Map();
  const ids = [...new Set(runIds)];
  const rows = await sql<{ run_id: string; new_run_id: string | null }[]>`
    SELECT run_id::text, detail->>'redrive_run_id' AS new_run_id FROM task_run_events WHERE run_id = ANY(${ids}::uuid[]) AND event = 'redriven'
    UNION ALL
    SELECT run_id::text, detail->>'redrive_run_id' AS new_run_id FROM platform_task_run_events WHERE run_id = ANY(${ids}::uuid[]) AND event = 'redriven'`;
  return new Map(rows.filter((r) => r.new_run_id).map((r) => [r.run_id, r.new_run_id!]));
}

export async function buildConsole(deps: ConsoleDeps): Promise<FastifyInstance> {
  const { gate } = deps;
  const operator = deps.operator ?? 'console';
  const pageSize = deps.pageSize ?? CONSOLE_PAGE_SIZE;
  const keys = deps.keySource ? { keySource: deps.keySource } : {};
  const sessions = sessionStore({ ...(deps.sessionTtlSeconds ? { ttlSeconds: deps.sessionTtlSeconds } : {}) });
  const throttle = loginThrottle({
    ...(deps.loginMaxFailures ? { maxFailures: deps.loginMaxFailures } : {}),
    ...(deps.loginWindowSeconds ? { windowSeconds: deps.loginWindowSeconds } : {}),
  });
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    bodyLimit: FORM_BODY_LIMIT,
    requestIdHeader: false,
  }) as unknown as FastifyInstance;

  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });

  // The session of each request, found once in onRequest.
  const sessionOf = new WeakMap<FastifyRequest, ConsoleSession>();
  const viewer = (request: FastifyRequest): Viewer => ({ operator: sessionOf.get(request)?.operator ?? null });
  /** The actor recorded for the logged-in operator: `<prefix>:<name>`. */
  const actor = (request: FastifyRequest) => `${operator}:${sessionOf.get(request)!.operator}`;
  const say = (request: FastifyRequest, code: ConsoleMessageCode, params: Record<string, string | number> = {}) =>
    consoleMessage(code, request.headers['accept-language'], params);

  // On every response, redirects and refusals included.
  app.addHook('onSend', async (_request, reply, payload) => {
    reply
      .header('x-content-type-options', 'nosniff')
      .header('cache-control', 'no-store')
      .header('x-frame-options', 'DENY')
      .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
      // same-origin, not no-referrer: with no-referrer Chromium sends `Origin: null` on the console's own form posts.
      .header('referrer-policy', 'same-origin');
    return payload;
  });

  app.setNotFoundHandler((request, reply) => {
    html(reply, 404, errorPage(404, 'NOT_FOUND', `the console has no page ${request.method} ${request.url.split('?')[0]!.slice(0, 100)}`, viewer(request)));
  });
  app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, request, reply) => {
    if (error instanceof ConsoleRefusal) return html(reply, error.status, errorPage(error.status, error.code, error.message, viewer(request)));
    if (error instanceof OperateError) {
      const status = OPERATE_STATUS[error.code] ?? 400;
      return html(reply, status, errorPage(status, error.code, forConsole(error.message), viewer(request)));
    }
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      return html(reply, error.statusCode, errorPage(error.statusCode, error.code ?? 'BAD_REQUEST', error.message, viewer(request)));
    }
    request.log.error({ err: error }, 'console request failed');
    return html(reply, 500, errorPage(500, 'CONSOLE_FAILED', 'the console could not answer; see its log', viewer(request)));
  });

  app.addHook('onRequest', async (request, reply) => {
    // A page reached under another name (DNS rebinding) is refused before anything is read.
    if (!gate.hostAllowed(request.headers.host)) {
      throw new ConsoleRefusal(421, 'CONSOLE_HOST_REFUSED', 'this console answers only on its own address (SVC_CONSOLE_HOST and port, or SVC_CONSOLE_ORIGINS)');
    }
    if (request.method === 'POST') {
      // Exact-origin check on every write, login included.
      if (!gate.originAllowed(request.headers.origin)) {
        throw new ConsoleRefusal(403, 'CONSOLE_ORIGIN_REFUSED', 'a write must come from a page of this console (its Origin header did not match)');
      }
    }
    if (!gate.writable) return;
    const session = sessions.find(cookieOf(request, CONSOLE_COOKIE));
    if (session) sessionOf.set(request, session);
    const path = request.url.split('?')[0];
    if (session || path === '/login' || path === '/logout') return;
    if (request.method === 'GET' || request.method === 'HEAD') return reply.redirect('/login', 303);
    throw new ConsoleRefusal(401, 'CONSOLE_LOGIN_REQUIRED', say(request, 'CONSOLE_LOGIN_REQUIRED'));
  });

  app.get('/login', async (request, reply) => {
    if (!gate.writable || sessionOf.has(request)) return reply.redirect('/', 303);
    return html(reply, 200, loginPage());
  });

  app.post<{ Body: Form }>('/login', async (request, reply) => {
    if (!gate.writable) return reply.redirect('/', 303);
    const client = request.ip;
    const wait = throttle.retryAfter(client);
    if (wait > 0) {
      // Not checked at all while throttled: the answer is the same whatever is presented.
      request.log.warn({ client, retryAfterSeconds: wait }, 'console login throttled');
      reply.header('retry-after', String(wait));
      return html(reply, 429, loginPage({ code: 'CONSOLE_LOGIN_THROTTLED', text: say(request, 'CONSOLE_LOGIN_THROTTLED', { seconds: wait }) }));
    }
    let name: string;
    try {
      name = checkOperatorName(request.body?.name);
    } catch (error) {
      if (!(error instanceof ConsoleAccessError)) throw error;
      return html(reply, 400, loginPage({ code: error.code, text: error.message }));
    }
    // Constant-time comparison; the presented value is never logged or echoed.
    if (!gate.tokenMatches(field(request.body, 'token'))) {
      const failures = throttle.failed(client);
      request.log.warn({ client, failures }, 'console login failed');
      return html(reply, 401, loginPage({ code: 'CONSOLE_TOKEN_INVALID', text: say(request, 'CONSOLE_TOKEN_INVALID') }, name));
    }
    throttle.succeeded(client);
    const id = sessions.create(name);
    request.log.info({ client, operator: name }, 'console login');
    reply.header('set-cookie', `${CONSOLE_COOKIE}=${id}; Path=/; Max-Age=${sessions.ttlSeconds}; HttpOnly; SameSite=Strict`);
    return reply.redirect('/', 303);
  });

  app.post('/logout', async (request, reply) => {
    // Revoked here, so the cookie is worthless even if a copy of it survives in some browser.
    sessions.revoke(cookieOf(request, CONSOLE_COOKIE));
    reply.header('set-cookie', `${CONSOLE_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0`);
    return reply.redirect('/login', 303);
  });

  const queryText = (query: Record<string, unknown>, name: string): string => {
    const value = query[name];
    if (value === undefined) return '';
    if (typeof value !== 'string') throw new ConsoleRefusal(400, 'RUN_FILTER_INVALID', `give the filter ${name} once`);
    return value.trim();
  };
  const given = (v: string) => (v === '' ? undefined : v);
  const rawFilters = (f: Partial<ListFilters>): RawRunFilters => ({
    tenant: given(f.tenant ?? ''),
    unit: given(f.unit ?? ''),
    status: given(f.status ?? ''),
    queue: given(f.queue ?? ''),
    since: given(f.since ?? ''),
    until: given(f.until ?? ''),
  });
  const wholeNumber = (text: string, name: string, min: number, max: number, fallback: number): number => {
    if (text === '') return fallback;
    if (!/^\d{1,7}$/.test(text) || Number(text) < min || Number(text) > max) {
      throw new ConsoleRefusal(400, 'RUN_FILTER_INVALID', `${name} must be a whole number from ${min} to ${max}`);
    }
    return Number(text);
  };

  app.get<{ Querystring: Record<string, unknown> }>('/', async (request, reply) => {
    const text = (name: string) => queryText(request.query, name);
    const filters: ListFilters = { tenant: text('tenant'), unit: text('unit'), status: text('status'), queue: text('queue'), since: text('since'), until: text('until') };
    const offset = wholeNumber(text('offset'), 'offset', 0, CONSOLE_MAX_OFFSET, 0);
    const refresh = wholeNumber(text('refresh'), 'refresh', 0, 3600, 0);
    if (!(REFRESH_CHOICES as readonly number[]).includes(refresh)) {
      throw new ConsoleRefusal(400, 'RUN_FILTER_INVALID', `refresh must be one of ${REFRESH_CHOICES.join(', ')} (seconds; 0 is off)`);
    }
    const parsed = parseRunFilters(rawFilters(filters));
    const [rows, counts, depths, backlog] = await Promise.all([
      // Offset paging: one more than the page tells whether older runs follow.
      listRuns(deps.sql, { ...parsed, limit: offset + pageSize + 1 }),
      statusCounts(deps.sql).catch((error: unknown): StatusCounts | null => {
        request.log.warn({ err: error }, 'run counts unavailable');
        return null;
      }),
      deps.sqs
        ? readQueueDepths(deps.sqs.client, deps.sqs.queueUrlPrefix).catch((error: unknown): QueueDepth[] | null => {
            request.log.warn({ err: error }, 'queue depths unavailable');
            return null;
          })
        : Promise.resolve(null),
      readOutboxBacklog(deps.sql).catch((): OutboxBacklog | null => null),
    ]);
    const runs = rows.slice(offset, offset + pageSize);
    const marks = await redrivenAs(deps.sql, runs.filter((r) => r.status === 'failed').map((r) => r.runId));
    return html(
      reply,
      200,
      runsPage({ filters, runs, offset, pageSize, hasMore: rows.length > offset + pageSize, counts, redrivenAs: marks, depths, backlog, writable: gate.writable, viewer: viewer(request), refresh }),
    );
  });

  // Runs past their due with no live delivery (what the rescuer sends again), longest waiting first.
  app.get('/stuck', async (request, reply) => {
    const runs = deps.stuckWindows ? await listStuckRuns(deps.sql, deps.stuckWindows, { limit: 200 }) : null;
    return html(reply, 200, stuckPage({ runs, viewer: viewer(request) }));
  });

  app.get<{ Params: { runId: string }; Querystring: { notice?: unknown } }>('/runs/:runId', async (request, reply) => {
    const runId = checkRunId(request.params.runId);
    const detail = await showRun(deps.sql, runId, keys);
    const notice = typeof request.query.notice === 'string' ? NOTICES[request.query.notice] : undefined;
    return html(reply, 200, runPage(detail, { writable: gate.writable, viewer: viewer(request), ...(notice ? { notice } : {}) }));
  });

  const requireWritable = () => {
    if (!gate.writable) throw new ConsoleRefusal(403, 'CONSOLE_READ_ONLY', 'the console is read-only: start it with SVC_CONSOLE_TOKEN to redrive or cancel');
  };
  /** Every write comes from its confirmation page's form; a bare post (one click, a replayed link) writes nothing. */
  const requireConfirmed = (request: FastifyRequest<{ Body: Form }>) => {
    if (field(request.body, 'confirm') !== 'yes') throw new ConsoleRefusal(400, 'CONSOLE_CONFIRMATION_REQUIRED', say(request, 'CONSOLE_CONFIRMATION_REQUIRED'));
  };

  for (const action of ['redrive', 'cancel'] as const) {
    app.get<{ Params: { runId: string } }>(`/runs/:runId/${action}`, async (request, reply) => {
      requireWritable();
      const detail = await showRun(deps.sql, checkRunId(request.params.runId), keys);
      return html(reply, 200, confirmRunPage(action, detail, viewer(request), action === 'redrive' ? `redrive:${actor(request)}` : `cancel:${actor(request)}`));
    });
  }

  app.post<{ Params: { runId: string }; Body: Form }>('/runs/:runId/redrive', async (request, reply) => {
    requireWritable();
    const runId = checkRunId(request.params.runId);
    requireConfirmed(request);
    const result = await redriveRunNow(deps.sql, { runId, by: actor(request), ...keys });
    // As `svc runs redrive`: the new outbox row is committed; wake the relay (a hint, never required).
    await signalOutbox(deps.redis);
    return reply.redirect(`/runs/${result.newRunId}?notice=${result.result === 'redriven' ? 'redriven' : 'already-redriven'}`, 303);
  });

  app.post<{ Params: { runId: string }; Body: Form }>('/runs/:runId/cancel', async (request, reply) => {
    requireWritable();
    const runId = checkRunId(request.params.runId);
    requireConfirmed(request);
    const result = await cancelRunNow(deps.sql, { runId, by: actor(request), reason: field(request.body, 'reason') });
    // As `svc runs cancel`: the cached status must not outlive the change.
    await evictRunStatus(deps.redis, runId);
    return reply.redirect(`/runs/${runId}?notice=${result.result === 'cancelled' ? 'cancelled' : 'already-cancelled'}`, 303);
  });

  // Bulk redrive: the failed runs matching the list's filters (status is always failed), as `svc runs redrive --status failed`.
  const bulkFilters = (read: (name: string) => string) => {
    const f = { tenant: read('tenant'), unit: read('unit'), queue: read('queue'), since: read('since'), until: read('until') };
    const { statuses: _statuses, limit: _limit, ...parsed } = parseRunFilters(rawFilters(f));
    return { text: f, parsed };
  };

  app.get<{ Querystring: Record<string, unknown> }>('/redrive', async (request, reply) => {
    requireWritable();
    const { text, parsed } = bulkFilters((name) => queryText(request.query, name));
    const dry = await redriveRuns(deps.sql, { filters: parsed, by: actor(request), dryRun: true });
    return html(reply, 200, confirmBulkPage(text, dry.selected, viewer(request), `redrive:${actor(request)}`, BULK_SHOWN));
  });

  app.post<{ Body: Form }>('/redrive', async (request, reply) => {
    requireWritable();
    const { parsed } = bulkFilters((name) => field(request.body, name).trim());
    // At most what the confirmation page showed: runs failing since then wait for the next confirmation.
    const max = wholeNumber(field(request.body, 'max'), 'max', 1, BULK_REDRIVE_UNCONFIRMED_MAX, 0);
    if (max === 0) throw new ConsoleRefusal(400, 'RUN_FILTER_INVALID', 'max (the number of runs confirmed) is missing');
    requireConfirmed(request);
    const outcome = await redriveRuns(deps.sql, { filters: parsed, by: actor(request), max, ...keys });
    await signalOutbox(deps.redis);
    request.log.info({ operator: actor(request), redriven: outcome.results.filter((r) => r.result === 'redriven').length }, 'console bulk redrive');
    return html(reply, 200, bulkResultPage(outcome, viewer(request)));
  });

  const dlqTarget = (queue: string) => {
    if (!isQueueName(queue)) throw new ConsoleRefusal(404, 'NOT_FOUND', `there is no queue '${queue.slice(0, 64)}'`);
    if (!deps.sqs) throw new ConsoleRefusal(409, 'CONSOLE_SQS_UNAVAILABLE', 'the console has no SQS connection (set SVC_SQS_ENDPOINT or SVC_SQS_QUEUE_URL_PREFIX)');
    return { queue, target: { sqs: deps.sqs.client, dlqUrl: dlqUrl(deps.sqs.queueUrlPrefix, queue) } };
  };

  app.get<{ Params: { queue: string } }>('/dead-letters/:queue', async (request, reply) => {
    const { queue, target } = dlqTarget(request.params.queue);
    const letters = await listDeadLetters(deps.sql, target, { max: CONSOLE_DEAD_LETTERS_MAX });
    const marks = await redrivenAs(deps.sql, letters.flatMap((l) => (l.runId && l.runStatus ? [l.runId] : [])));
    const who = sessionOf.has(request) ? `redrive:${actor(request)}` : null;
    return html(
      reply,
      200,
      deadLettersPage({ queue, letters, redrivenAs: marks, max: CONSOLE_DEAD_LETTERS_MAX, writable: gate.writable, viewer: viewer(request), recordedAs: who }),
    );
  });

  app.post<{ Params: { queue: string }; Body: Form }>('/dead-letters/:queue/redrive', async (request, reply) => {
    requireWritable();
    const { queue, target } = dlqTarget(request.params.queue);
    const max = wholeNumber(field(request.body, 'max'), 'max', 1, CONSOLE_DEAD_LETTERS_MAX, CONSOLE_DEAD_LETTERS_MAX);
    requireConfirmed(request);
    const report = await redriveDeadLetters(deps.sql, target, { by: actor(request), max, ...keys });
    await signalOutbox(deps.redis);
    request.log.info({ operator: actor(request), queue, redriven: report.outcomes.filter((o) => o.action === 'redriven').length }, 'console dead-letter redrive');
    return html(reply, 200, deadLetterResultPage(queue, report, viewer(request)));
  });

  return app;
}
