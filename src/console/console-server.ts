// The operator console as a Fastify instance (src/main/console.ts listens): the runs list with
// filters, a run's trail as a timeline, queue and dead-letter depths, and redrive / cancel buttons
// calling the SAME functions as `svc runs` (src/work/operate/). Pages are HTML rendered here; every
// refusal is a page with a stable code (never a stack). Access rules: console-access.ts.
import type { SQSClient } from '@aws-sdk/client-sqs';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Sql } from '../db/client.ts';
import { CodedError } from '../errors/coded-error.ts';
import { evictRunStatus } from '../kv/run-status-cache.ts';
import { signalOutbox } from '../kv/wake.ts';
import { readOutboxBacklog, readQueueDepths, type OutboxBacklog, type QueueDepth } from '../observe/backlog.ts';
import { cancelRunNow } from '../work/operate/cancel-run.ts';
import { listRuns, parseRunFilters } from '../work/operate/list-runs.ts';
import { checkRunId, OperateError, type OperateErrorCode } from '../work/operate/operate-error.ts';
import { redriveRunNow } from '../work/operate/redrive-run.ts';
import { showRun } from '../work/operate/show-run.ts';
import { CONSOLE_COOKIE, type ConsoleGate } from './console-access.ts';
import { errorPage, loginPage, runPage, runsPage, type RunsView } from './console-pages.ts';

/** Runs the list shows at most. */
export const CONSOLE_LIST_LIMIT = 200;
/** Largest form body the console accepts (a token or nothing). */
const FORM_BODY_LIMIT = 4096;

export interface ConsoleDeps {
  sql: Sql;
  /** For the relay's wake signal after a redrive and the status-cache eviction after a cancel; optional. */
  redis?: Redis | undefined;
  /** For queue and dead-letter depths; without it the depths show as unavailable. */
  sqs?: { client: SQSClient; queueUrlPrefix: string } | undefined;
  gate: ConsoleGate;
  /** Who redrives and cancels, as recorded on runs and trails (the CLI's --by). Default `console`. */
  operator?: string;
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
  return reply
    .code(status)
    .header('content-type', 'text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('x-frame-options', 'DENY')
    .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
    // same-origin, not no-referrer: with no-referrer Chromium sends `Origin: null` on the console's own form posts.
    .header('referrer-policy', 'same-origin')
    .send(body);
}

/** The CLI-flavoured messages of the operate functions name options (`--status`); the console names fields. */
const forConsole = (message: string) => message.replace(/--([a-z-]+)/g, '$1');

export async function buildConsole(deps: ConsoleDeps): Promise<FastifyInstance> {
  const { gate } = deps;
  const operator = deps.operator ?? 'console';
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    bodyLimit: FORM_BODY_LIMIT,
    requestIdHeader: false,
  }) as unknown as FastifyInstance;

  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });

  const loggedIn = (request: FastifyRequest) => gate.writable && gate.sessionMatches(cookieOf(request, CONSOLE_COOKIE));

  app.setNotFoundHandler((request, reply) => {
    html(reply, 404, errorPage(404, 'NOT_FOUND', `the console has no page ${request.method} ${request.url.split('?')[0]!.slice(0, 100)}`, loggedIn(request)));
  });
  app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, request, reply) => {
    if (error instanceof ConsoleRefusal) return html(reply, error.status, errorPage(error.status, error.code, error.message, loggedIn(request)));
    if (error instanceof OperateError) {
      const status = OPERATE_STATUS[error.code] ?? 400;
      return html(reply, status, errorPage(status, error.code, forConsole(error.message), loggedIn(request)));
    }
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      return html(reply, error.statusCode, errorPage(error.statusCode, error.code ?? 'BAD_REQUEST', error.message, loggedIn(request)));
    }
    request.log.error({ err: error }, 'console request failed');
    return html(reply, 500, errorPage(500, 'CONSOLE_FAILED', 'the console could not answer; see its log', loggedIn(request)));
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
    const path = request.url.split('?')[0];
    if (!gate.writable || path === '/login') return;
    if (!gate.sessionMatches(cookieOf(request, CONSOLE_COOKIE))) {
      if (request.method === 'GET' || request.method === 'HEAD') return reply.redirect('/login', 303);
      throw new ConsoleRefusal(401, 'CONSOLE_LOGIN_REQUIRED', 'log in with the console token first');
    }
  });

  app.get('/login', async (request, reply) => {
    if (!gate.writable || loggedIn(request)) return reply.redirect('/', 303);
    return html(reply, 200, loginPage());
  });

  app.post<{ Body: { token?: unknown } | undefined }>('/login', async (request, reply) => {
    if (!gate.writable) return reply.redirect('/', 303);
    const presented = typeof request.body?.token === 'string' ? request.body.token : '';
    // Constant-time comparison; the presented value is never logged or echoed.
    if (!gate.tokenMatches(presented)) return html(reply, 401, loginPage('CONSOLE_TOKEN_INVALID: that is not the console token.'));
    reply.header('set-cookie', `${CONSOLE_COOKIE}=${gate.sessionValue()}; Path=/; HttpOnly; SameSite=Strict`);
    return reply.redirect('/', 303);
  });

  app.post('/logout', async (_request, reply) => {
    reply.header('set-cookie', `${CONSOLE_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0`);
    return reply.redirect('/login', 303);
  });

  app.get<{ Querystring: Record<string, unknown> }>('/', async (request, reply) => {
    const text = (name: string): string => {
      const value = request.query[name];
      if (value === undefined) return '';
      if (typeof value !== 'string') throw new ConsoleRefusal(400, 'RUN_FILTER_INVALID', `give the filter ${name} once`);
      return value.trim();
    };
    const filters: RunsView['filters'] = {
      tenant: text('tenant'),
      unit: text('unit'),
      status: text('status'),
      queue: text('queue'),
      since: text('since'),
      until: text('until'),
    };
    const given = (v: string) => (v === '' ? undefined : v);
    const parsed = parseRunFilters({
      tenant: given(filters.tenant),
      unit: given(filters.unit),
      status: given(filters.status),
      queue: given(filters.queue),
      since: given(filters.since),
      until: given(filters.until),
    });
    const [runs, depths, backlog] = await Promise.all([
      listRuns(deps.sql, { ...parsed, limit: CONSOLE_LIST_LIMIT }),
      deps.sqs
        ? readQueueDepths(deps.sqs.client, deps.sqs.queueUrlPrefix).catch((error: unknown): QueueDepth[] | null => {
            request.log.warn({ err: error }, 'queue depths unavailable');
            return null;
          })
        : Promise.resolve(null),
      readOutboxBacklog(deps.sql).catch((): OutboxBacklog | null => null),
    ]);
    return html(reply, 200, runsPage({ filters, runs, depths, backlog, writable: gate.writable, loggedIn: loggedIn(request) }));
  });

  app.get<{ Params: { runId: string }; Querystring: { notice?: unknown } }>('/runs/:runId', async (request, reply) => {
    const runId = checkRunId(request.params.runId);
    const detail = await showRun(deps.sql, runId);
    const notice = typeof request.query.notice === 'string' ? NOTICES[request.query.notice] : undefined;
    return html(reply, 200, runPage(detail, { writable: gate.writable, loggedIn: loggedIn(request), ...(notice ? { notice } : {}) }));
  });

  const requireWritable = () => {
    if (!gate.writable) throw new ConsoleRefusal(403, 'CONSOLE_READ_ONLY', 'the console is read-only: start it with SVC_CONSOLE_TOKEN to redrive or cancel');
  };

  app.post<{ Params: { runId: string } }>('/runs/:runId/redrive', async (request, reply) => {
    requireWritable();
    const result = await redriveRunNow(deps.sql, { runId: checkRunId(request.params.runId), by: operator });
    // As `svc runs redrive`: the new outbox row is committed; wake the relay (a hint, never required).
    await signalOutbox(deps.redis);
    return reply.redirect(`/runs/${result.newRunId}${result.result === 'redriven' ? '?notice=redriven' : ''}`, 303);
  });

  app.post<{ Params: { runId: string } }>('/runs/:runId/cancel', async (request, reply) => {
    requireWritable();
    const runId = checkRunId(request.params.runId);
    const result = await cancelRunNow(deps.sql, { runId, by: operator, reason: 'cancelled from the console' });
    // As `svc runs cancel`: the cached status must not outlive the change.
    await evictRunStatus(deps.redis, runId);
    return reply.redirect(`/runs/${runId}?notice=${result.result === 'cancelled' ? 'cancelled' : 'already-cancelled'}`, 303);
  });

  return app;
}
