// No Docker engine runs on these machines, so the build definition and the composition are checked
// statically: targets, base image, users, artifacts, services, dependencies, environment, ports and
// health checks must agree with the code.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DockerfileParser } from 'dockerfile-ast';
import { parse as parseYaml } from 'yaml';
import { apiConfig } from '../../src/config/api.ts';
import { workersConfig } from '../../src/config/workers.ts';
import { WORKERS_NODE_FLAGS } from '../../src/main/workers-node-flags.ts';
import { DLQ_SUFFIX, QUEUE_NAMES } from '../../src/queue/names.ts';
import { DLQ_RETENTION_SECONDS, QUEUE_RETENTION_SECONDS } from '../../src/queue/provision.ts';

/** R-LIM-01 as the spec writes it: 60 s, 120 s, 15 min, 5 min. */
const SPEC_VISIBILITY_SECONDS: Record<string, number> = { critical: 60, default: 120, bulk: 15 * 60, maintenance: 5 * 60 };
import { CONTAINER_DEFINITIONS } from '../support/backends/containers.ts';
import { selectBackendName } from '../support/backends/types.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const read = (f: string) => fs.readFileSync(path.join(root, f), 'utf8');
const pkg = JSON.parse(read('package.json'));
const dockerfile = DockerfileParser.parse(read('Dockerfile'));
const compose = parseYaml(read('compose.yaml'), { merge: true }) as {
  services: Record<string, any>;
};

function stage(name: string) {
  const from = dockerfile.getFROMs().find((f) => f.getBuildStage() === name);
  expect(from, `stage ${name}`).toBeDefined();
  const lines = read('Dockerfile').split('\n');
  const start = from!.getRange().start.line;
  const next = dockerfile
    .getFROMs()
    .map((f) => f.getRange().start.line)
    .filter((l) => l > start)
    .sort((a, b) => a - b)[0];
  return { from: from!, text: lines.slice(start, next ?? lines.length).join('\n') };
}

/** Resolves `FROM x AS y` chains to the external base image. */
function baseImageOf(name: string): string {
  const args = Object.fromEntries(
    dockerfile.getInitialARGs().flatMap((a) => a.getProperties().map((p) => [p.getName(), p.getValue() ?? ''])),
  );
  let image = stage(name).from.getImage() ?? '';
  for (let i = 0; i < 10; i++) {
    image = image.replace(/\$\{(\w+)\}/g, (_, v: string) => args[v] ?? '');
    const parent = dockerfile.getFROMs().find((f) => f.getBuildStage() === image);
    if (!parent) return image;
    image = parent.getImage() ?? '';
  }
  return image;
}

function envOf(service: string): Record<string, string> {
  const env = compose.services[service].environment as Record<string, string | number | boolean>;
  // `${VAR:-default}` resolves to its default when VAR is unset, as `docker compose` does.
  return Object.fromEntries(
    Object.entries(env).map(([k, v]) => [k, String(v).replace(/\$\{\w+:-([^}]*)\}/g, '$1')]),
  );
}

describe('Dockerfile', () => {
  it('R-EXE-01 defines the three targets runtime, workers and migrator in one build definition', () => {
    for (const target of ['runtime', 'workers', 'migrator']) expect(stage(target).from.getBuildStage()).toBe(target);
  });

  it('uses a Node base image of the same major as the pinned runtime (package.json, engines, .nvmrc)', () => {
    const pinned = pkg.devDependencies.node as string;
    const major = pinned.split('.')[0];
    expect(read('.nvmrc').trim()).toBe(pinned);
    expect(pkg.engines.node).toContain(`${major}.`);
    for (const target of ['runtime', 'workers', 'migrator']) expect(baseImageOf(target)).toMatch(new RegExp(`^node:${major}[-.]`));
  });

  it('R-EXE-13 emits the artifacts during the image build, installs production dependencies only and runs as a non-root user', () => {
    const text = read('Dockerfile');
    // Everything the lock file names is installed to patch, then the dev dependencies are pruned before any image copies node_modules.
    expect(stage('deps').text).toMatch(/npm prune --omit=dev/);
    expect(text).not.toMatch(/COPY --from=(base|build) \/app\/node_modules/);
    expect(stage('app').text).toContain('COPY --from=deps /app/node_modules ./node_modules');
    expect(stage('build').text).toMatch(/RUN node src\/main\/cli\.ts emit/);
    expect(stage('app').text).toMatch(/COPY --from=build \/app\/dist \.\/dist/);
    const user = dockerfile.getInstructions().filter((i) => i.getKeyword() === 'USER').map((i) => i.getArgumentsContent());
    expect(user).toContain('node');
    expect(user).not.toContain('root');
  });

  it('applies the dependency patches (patches/) to the production dependencies it installs, with the patch-package the lock file pins (never fetched at build time)', () => {
    const deps = stage('deps').text;
    expect(pkg.devDependencies['patch-package']).toBeDefined();
    expect(pkg.scripts.postinstall).toBe('patch-package --error-on-fail');
    expect(deps).toContain('COPY patches ./patches');
    // The installed dev dependency, exactly as locked: no registry fetch outside the lock file.
    expect(deps).not.toMatch(/npm exec|npx|--package=/);
    const install = 'npm ci --include=dev --ignore-scripts';
    const apply = '&& ./node_modules/.bin/patch-package --error-on-fail';
    const prune = '&& npm prune --omit=dev';
    expect(deps).toContain(install);
    expect(deps).toContain(apply);
    expect(deps).toContain(prune);
    // After the install, failing the build when a patch no longer applies, and before the prune.
    expect(deps.indexOf(apply)).toBeGreaterThan(deps.indexOf(install));
    expect(deps.indexOf(prune)).toBeGreaterThan(deps.indexOf(apply));
    expect(fs.readdirSync(path.join(root, 'patches'))).toContain(`postgres+${pkg.dependencies.postgres}.patch`);
  });

  it('R-EXE-14 gives the migrator the permission registry of the same build and deploy as default command', () => {
    expect(stage('app').text).toMatch(/SVC_PERMISSIONS_REGISTRY=\/app\/dist\/permissions\.json/);
    expect(stage('migrator').text).toMatch(/ENTRYPOINT \["node", "src\/main\/cli\.ts", "migrator"\]/);
    expect(stage('migrator').text).toMatch(/CMD \["deploy"\]/);
  });

  it('R-EXE-02 R-EXE-03 exposes the API on 3000 and the workers health on 8081, matching the config defaults', () => {
    const api = apiConfig({ SVC_TASKS_CATALOG: 'x' });
    expect(stage('runtime').text).toMatch(new RegExp(`EXPOSE ${api.SVC_API_PORT ?? 3000}`));
    expect(stage('runtime').text).toMatch(/\/ready/);
    expect(stage('workers').text).toMatch(/EXPOSE 8081/);
  });

  it('the workers image probes readiness (/readyz: 503 until the workers consume, and while they drain), not liveness', () => {
    const check = dockerfile.getInstructions().filter((i) => i.getKeyword() === 'HEALTHCHECK' && i.getRange().start.line >= stage('workers').from.getRange().start.line)[0]!;
    expect(check.getArgumentsContent()).toMatch(/\/readyz'/);
    expect(check.getArgumentsContent()).not.toMatch(/\/healthz/);
    expect(read('src/work/runtime/health-server.ts')).toMatch(/path === '\/readyz'/);
  });

  it('starts the workers image and `npm run workers` with the workers flags: a young generation of 16 MB semi-spaces', () => {
    const cmds = dockerfile.getInstructions().filter((i) => i.getKeyword() === 'CMD');
    const workersCmd = cmds.filter((c) => c.getRange().start.line >= stage('workers').from.getRange().start.line);
    const args = JSON.parse(workersCmd[0]!.getArgumentsContent()!) as string[];
    expect(args).toEqual(['node', '--max-semi-space-size=16', 'src/main/cli.ts', 'workers']);
    expect(args.slice(1, -2)).toEqual([...WORKERS_NODE_FLAGS]);
    expect(pkg.scripts.workers).toBe(`node ${WORKERS_NODE_FLAGS.join(' ')} src/main/cli.ts workers`);
    expect(pkg.scripts.workers).toContain('--max-semi-space-size=16');
    // compose runs the image's command as it is.
    expect(compose.services.workers.command).toBeUndefined();
  });

  it('puts the svc CLI on PATH in every image', () => {
    expect(stage('app').text).toMatch(/ln -s \/app\/src\/main\/cli\.ts \/usr\/local\/bin\/svc/);
    expect(read('src/main/cli.ts').startsWith('#!/usr/bin/env node')).toBe(true);
  });

  it('ships every folder the executables read at run time', () => {
    for (const dir of ['src', 'units', 'seeders', 'catalog', 'drizzle', 'sql']) {
      expect(fs.existsSync(path.join(root, dir)), dir).toBe(true);
      expect(stage('app').text).toContain(`COPY ${dir} ./${dir}`);
    }
  });
});

describe('compose.yaml', () => {
  it('R-EXE-05 R-EXE-06 R-EXE-07 runs PostgreSQL 18, Redis 8 and an SQS-compatible server', () => {
    expect(compose.services.postgres.image).toBe('postgres:18');
    expect(compose.services.redis.image).toBe('redis:8');
    expect(compose.services.sqs.image).toMatch(/fauxqs/);
  });

  it('R-LIM-01 R-LIM-02 R-EXE-07 creates the four queues and their dead-letter queues with the spec visibility and a redrive of 7', () => {
    const init = JSON.parse(read('deploy/fauxqs-init.json')) as { queues: Array<{ name: string; attributes?: Record<string, string> }> };
    const byName = new Map(init.queues.map((q) => [q.name, q]));
    for (const name of QUEUE_NAMES) {
      expect(byName.has(`${name}${DLQ_SUFFIX}`)).toBe(true);
      const q = byName.get(name)!;
      expect(Number(q.attributes!.VisibilityTimeout), name).toBe(SPEC_VISIBILITY_SECONDS[name]);
      const redrive = JSON.parse(q.attributes!.RedrivePolicy!);
      expect(Number(redrive.maxReceiveCount)).toBe(7);
      expect(redrive.deadLetterTargetArn).toMatch(new RegExp(`:${name}${DLQ_SUFFIX}$`));
      // The same retention `svc queues provision` gives: 14 days for a dead-letter queue (after the 7-day
      // outbox purge its message is the only copy of the payload), 7 for the queue.
      expect(Number(byName.get(`${name}${DLQ_SUFFIX}`)!.attributes?.MessageRetentionPeriod), name).toBe(DLQ_RETENTION_SECONDS);
      expect(Number(q.attributes!.MessageRetentionPeriod), name).toBe(QUEUE_RETENTION_SECONDS);
    }
    expect(compose.services.sqs.volumes.join(' ')).toContain('./deploy/fauxqs-init.json');
  });

  it('R-EXE-15 runs the migrator on every start and starts API and workers only after it succeeded', () => {
    expect(compose.services.migrator.build.target).toBe('migrator');
    expect(compose.services.migrator.command).toEqual(['deploy']);
    for (const svc of ['api', 'workers']) {
      expect(compose.services[svc].depends_on.migrator.condition).toBe('service_completed_successfully');
    }
    expect(compose.services.api.build.target).toBe('runtime');
    expect(compose.services.workers.build.target).toBe('workers');
  });

  it('R-CFG-02 gives exactly one workers service SVC_RELAY=true', () => {
    const relays = Object.entries(compose.services).filter(([, s]) => String(s.environment?.SVC_RELAY) === 'true');
    expect(relays.map(([n]) => n)).toEqual(['workers']);
  });

  it('provides every variable the config schemas require, valid by their rules', () => {
    expect(() => workersConfig(envOf('workers'))).not.toThrow();
    expect(() => apiConfig({ ...envOf('api'), SVC_TASKS_CATALOG: '/app/dist/tasks.json' })).not.toThrow();
    expect(envOf('workers').SVC_SQS_QUEUE_URL_PREFIX).toMatch(/^http:\/\/sqs:4566\/\d{12}\/$/);
  });

  it('R-WRK-09 gives the workers and the API a stop grace period covering the stop budget', () => {
    const seconds = (v: string) => Number(/^(\d+)s$/.exec(v)![1]);
    const budgetMs = Number(envOf('workers').SVC_STOP_TIMEOUT_MS ?? 30_000);
    expect(seconds(compose.services.workers.stop_grace_period) * 1000).toBeGreaterThan(budgetMs);
    expect(seconds(compose.services.api.stop_grace_period)).toBeGreaterThanOrEqual(10);
  });

  it('R-HTTP-06 checks readiness on /ready and /readyz at the ports the code uses', () => {
    expect(compose.services.api.healthcheck.test.join(' ')).toContain('127.0.0.1:3000/ready');
    expect(compose.services.api.ports).toContain('3000:3000');
    expect(compose.services.workers.healthcheck.test.join(' ')).toContain(':8081/readyz');
    expect(envOf('workers').SVC_HEALTH_PORT).toBe('8081');
  });

  it('publishes the metrics ports (and the observability tools) on the loopback interface only; only the API port on every interface', () => {
    const published = Object.entries(compose.services).flatMap(([name, s]) => ((s.ports ?? []) as string[]).map((p) => [name, String(p)] as const));
    expect(published.length).toBeGreaterThan(0);
    for (const [name, port] of published) {
      if (name === 'api' && port === '3000:3000') continue;
      expect(port, name).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
    }
    expect(compose.services.api.ports).toContain('127.0.0.1:9464:9464');
    expect(compose.services.workers.ports).toContain('127.0.0.1:8081:8081');
  });
});

describe('test back ends', () => {
  it('selects embedded by default and containers on request, refusing anything else', () => {
    expect(selectBackendName({})).toBe('embedded');
    expect(selectBackendName({ SVC_TEST_BACKEND: 'containers' })).toBe('containers');
    expect(() => selectBackendName({ SVC_TEST_BACKEND: 'docker' })).toThrow(/embedded or containers/);
  });

  it('defines containers with the same images compose uses', () => {
    expect(CONTAINER_DEFINITIONS.postgres.image).toBe(compose.services.postgres.image);
    expect(CONTAINER_DEFINITIONS.redis.image).toBe(compose.services.redis.image);
    expect(CONTAINER_DEFINITIONS.sqs.image).toBe(compose.services.sqs.image);
  });
});

describe('deployment rules', () => {
  it('R-AUTH-26 the composition runs the API with CORS_CREDENTIALS=false unless told otherwise (staging until login issues cookies)', () => {
    expect(envOf('api').CORS_CREDENTIALS).toBe('false');
    expect(apiConfig({ ...envOf('api'), SVC_TASKS_CATALOG: 'x' }).CORS_CREDENTIALS).toBe(false);
  });

  it('R-EXE-16 the README tells operators to publish the workers before the API when a release adds units', () => {
    const readme = read('README.md');
    expect(readme).toMatch(/publish the workers before the API/);
    expect(readme).toMatch(/Run the `migrator` image once per version[^.]*before the API and the\s+workers/);
  });
});

