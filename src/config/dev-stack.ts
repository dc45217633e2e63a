// Where the operator commands find the development stack `npm start` runs (src/main/dev.ts). Its SQS
// server listens on a random port, so `svc dlq list` under npm start failed for want of
// SVC_SQS_QUEUE_URL_PREFIX unless the operator dug the port out of the log. The launcher writes its
// endpoints to `<SVC_DATA_DIR>/dev-stack.json` while it runs; the operate commands (`svc runs`,
// `svc dlq`, `svc queues`) fill the SQS variables from it when none is set and the launcher that wrote
// it is still alive. Nothing secret goes in: the local server's fixed credentials are not secrets, and
// a REDIS_URL carrying a password is left out.
import fs from 'node:fs';
import path from 'node:path';
import { processAlive, processStartTime } from '../db/cluster-lease.ts';

/** The file's name under SVC_DATA_DIR. */
export const DEV_STACK_FILE = 'dev-stack.json';
/** SVC_DATA_DIR's default, as npm start's. */
const DEFAULT_DATA_DIR = '.data';

/** The variables the file may fill, and only these. */
const FILLED = ['SVC_SQS_REGION', 'SVC_SQS_ENDPOINT', 'SVC_SQS_QUEUE_URL_PREFIX', 'SVC_SQS_LOCAL_CREDENTIALS', 'REDIS_URL'] as const;
type Filled = (typeof FILLED)[number];

export interface DevStackState {
  /** The launcher's pid and its start time (a reused pid is not it). */
  pid: number;
  start: string;
  env: Partial<Record<Filled, string>>;
}

function fileOf(dataDir: string | undefined): string {
  return path.join(path.resolve(dataDir || DEFAULT_DATA_DIR), DEV_STACK_FILE);
}

/** Writes this process' stack endpoints under the data directory; returns the remover (call it on stop). */
export function writeDevStackState(dataDir: string | undefined, env: Partial<Record<Filled, string>>): () => void {
  const file = fileOf(dataDir);
  const kept = Object.fromEntries(
    FILLED.filter((k) => env[k] !== undefined && !(k === 'REDIS_URL' && /\/\/[^@/]*@/.test(env[k]))).map((k) => [k, env[k]!]),
  );
  const state: DevStackState = { pid: process.pid, start: processStartTime(process.pid) ?? '', env: kept };
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(state)}\n`, { mode: 0o600 });
  return () => fs.rmSync(file, { force: true });
}

/** The running stack's state, or undefined when there is no file, it is unreadable, or its launcher is gone. */
export function readDevStackState(dataDir: string | undefined): DevStackState | undefined {
  let state: DevStackState;
  try {
    state = JSON.parse(fs.readFileSync(fileOf(dataDir), 'utf8')) as DevStackState;
  } catch {
    return undefined;
  }
  if (typeof state?.pid !== 'number' || typeof state.start !== 'string' || typeof state.env !== 'object' || state.env === null) return undefined;
  return processAlive(state.pid, state.start) ? state : undefined;
}

/**
 * `env` with the running dev stack's endpoints filled in when it names no SQS server (neither
 * SVC_SQS_ENDPOINT nor SVC_SQS_QUEUE_URL_PREFIX) and npm start runs on its data directory. A variable
 * the environment sets always wins. `note` hears one line saying the stack was used.
 */
export function withDevStackFallback(env: NodeJS.ProcessEnv, note?: (line: string) => void): NodeJS.ProcessEnv {
  if (env.SVC_SQS_ENDPOINT || env.SVC_SQS_QUEUE_URL_PREFIX) return env;
  const state = readDevStackState(env.SVC_DATA_DIR);
  if (!state) return env;
  const filled: NodeJS.ProcessEnv = { ...env };
  for (const k of FILLED) if (!filled[k] && typeof state.env[k] === 'string') filled[k] = state.env[k];
  note?.(`using the queues of the npm start stack (pid ${state.pid}, ${fileOf(env.SVC_DATA_DIR)}): SVC_SQS_ENDPOINT is unset`);
  return filled;
}
