// `npm run bench -- api [--smoke] [--duration <s>] [--rounds <n>] [--connections <n>]`: requests/s and p99 of
// GET /task-runs/{id} served from the Redis cache (fake session resolver), against a bare Fastify route
// returning constant JSON, measured in the same run with autocannon. Target: route >= 60% of bare.
// Rounds alternate bare and route (default 3 x 5 s each). Output: `INTERVAL target=<bare|route> round=<r> t_s=<s> rps=<n>`
// every second, `ROUND ...` per round, `RESULT target=... rps=<mean> p50_ms=... p99_ms=<median> errors=... non2xx=...`
// per target, and last `SUMMARY route_rps=<n> bare_rps=<n> ratio=<x> route_p99_ms=<n>`.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import autocannon from 'autocannon';
import { startServices } from '../peers/services.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

interface Options {
  durationS: number;
  connections: number;
  /** Rounds of bare-then-route, so load from neighbours on a shared machine hits both alike. */
  rounds: number;
}

function parseOptions(args: string[]): Options {
  const options: Options = { durationS: 5, connections: 32, rounds: 3 };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--smoke') Object.assign(options, { durationS: 2, rounds: 1 });
    else if (arg === '--rounds') options.rounds = Number(args[++i]);
    else if (arg === '--duration') options.durationS = Number(args[++i]);
    else if (arg === '--connections') options.connections = Number(args[++i]);
    else throw new Error(`unknown option ${arg}; use --smoke, --duration <s>, --connections <n>`);
  }
  if (!(options.durationS > 0) || !(options.connections > 0) || !(options.rounds >= 1)) {
    throw new Error('--duration, --connections and --rounds take positive numbers');
  }
  return options;
}

const log = (line: string) => console.error(`# ${line}`);

interface Measured {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

async function measure(target: 'bare' | 'route', round: number, url: string, headers: Record<string, string>, o: Options): Promise<Measured> {
  // One second of warm-up so JIT and connection set-up stay out of the numbers.
  await autocannon({ url, headers, connections: o.connections, duration: 1 });
  let t = 0;
  let instance!: autocannon.Instance;
  const finished = new Promise<autocannon.Result>((resolve, reject) => {
    instance = autocannon({ url, headers, connections: o.connections, duration: o.durationS }, (error, result) =>
      error ? reject(error) : resolve(result),
    );
  });
  // autocannon 9 emits { counter, bytes } per second; the v7 typings describe the event differently.
  (instance as unknown as NodeJS.EventEmitter).on('tick', (tick: { counter: number }) => {
    t += 1;
    // autocannon ticks once more as it stops; that partial second is not an interval.
    if (t <= o.durationS) console.log(`INTERVAL target=${target} round=${round} t_s=${t} rps=${tick.counter}`);
  });
  const result = await finished;
  const m = {
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
  };
  console.log(`ROUND target=${target} round=${round} rps=${m.rps} p50_ms=${m.p50} p99_ms=${m.p99} errors=${m.errors} non2xx=${m.non2xx}`);
  return m;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Mean requests/s over the rounds, median latencies, summed failures. */
function combine(target: string, rounds: Measured[]): Measured {
  const m = {
    rps: Math.round(rounds.reduce((sum, r) => sum + r.rps, 0) / rounds.length),
    p50: median(rounds.map((r) => r.p50)),
    p99: median(rounds.map((r) => r.p99)),
    errors: rounds.reduce((sum, r) => sum + r.errors, 0),
    non2xx: rounds.reduce((sum, r) => sum + r.non2xx, 0),
  };
  console.log(`RESULT target=${target} rps=${m.rps} p50_ms=${m.p50} p99_ms=${m.p99} errors=${m.errors} non2xx=${m.non2xx}`);
  return m;
}

export async function main(args: string[]): Promise<number> {
  const options = parseOptions(args);
  const services = await startServices({ sqs: false, log });
  let child: ReturnType<typeof spawn> | undefined;
  try {
    // A database with the real run tables over minimal stand-ins of what they reference.
    const url = await services.createDatabase(`bench_api_${randomUUID().slice(0, 8)}`);
    const { createSql } = await import('../../src/db/client.ts');
    const sql = createSql(url, { max: 1 });
    let tenantId: string;
    const runId = randomUUID();
    try {
      await sql.unsafe(`
        CREATE TABLE tenants (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY);
        CREATE TABLE users (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY);
        CREATE TABLE memberships (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          user_id bigint NOT NULL REFERENCES users (id), tenant_id bigint NOT NULL REFERENCES tenants (id),
          UNIQUE (id, user_id, tenant_id));`);
      await sql.unsafe(fs.readFileSync(path.join(ROOT, 'sql/work/0016_work.sql'), 'utf8'));
      const [tenant] = await sql`INSERT INTO tenants DEFAULT VALUES RETURNING id::text AS id`;
      tenantId = tenant!.id as string;
      // A finished run: cached for a day, so every measured request is a cache hit.
      await sql`
        INSERT INTO task_runs (run_id, tenant_id, name, queue, trigger, actor_kind, actor_label, correlation_id, causation_id,
                               status, attempts, progress, outcome, started_at, finished_at)
        VALUES (${runId}, ${tenantId}, 'reports.build', 'default', 'dispatch', 'system', 'bench', ${randomUUID()}, ${randomUUID()},
                'succeeded', 1, 100, ${sql.json({ rows: 1200 })}, clock_timestamp(), clock_timestamp())`;
    } finally {
      await sql.end({ timeout: 2 });
    }

    const token = `bench-${randomUUID()}`;
    child = spawn(process.execPath, [path.join(import.meta.dirname, 'server.ts')], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        ...process.env,
        BENCH_DATABASE_URL: url,
        BENCH_REDIS_URL: `${services.redis.url}/1`,
        BENCH_TENANT_ID: tenantId,
        BENCH_TOKEN: token,
      },
    });
    const ports = await new Promise<{ route: number; bare: number }>((resolve, reject) => {
      const lines = readline.createInterface({ input: child!.stdout! });
      lines.on('line', (line) => {
        const m = /^READY route=(\d+) bare=(\d+)$/.exec(line);
        if (m) resolve({ route: Number(m[1]), bare: Number(m[2]) });
      });
      child!.once('exit', (code) => reject(new Error(`the benchmark server exited early (${code})`)));
    });
    const routeUrl = `http://127.0.0.1:${ports.route}/task-runs/${runId}`;
    const headers = { authorization: `Bearer ${token}` };
    const first = await fetch(routeUrl, { headers });
    if (first.status !== 200) throw new Error(`warm-up read answered ${first.status}, expected 200`);
    log(
      `cpu cores=${(await import('node:os')).availableParallelism()} connections=${options.connections} ` +
        `duration_s=${options.durationS} rounds=${options.rounds}`,
    );

    const bareRounds: Measured[] = [];
    const routeRounds: Measured[] = [];
    for (let round = 1; round <= options.rounds; round++) {
      bareRounds.push(await measure('bare', round, `http://127.0.0.1:${ports.bare}/bare`, {}, options));
      routeRounds.push(await measure('route', round, routeUrl, headers, options));
    }
    const bare = combine('bare', bareRounds);
    const route = combine('route', routeRounds);
    if (route.non2xx > 0 || route.errors > 0 || bare.errors > 0) log('some requests failed: see RESULT lines');
    const ratio = bare.rps > 0 ? route.rps / bare.rps : 0;
    console.log(`SUMMARY route_rps=${route.rps} bare_rps=${bare.rps} ratio=${ratio.toFixed(2)} route_p99_ms=${route.p99}`);
    return route.non2xx > 0 || route.errors > 0 ? 1 : 0;
  } finally {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child!.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    await services.stop();
  }
}
