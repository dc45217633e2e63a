// What the figures were measured on: they mean nothing without it.
import fs from 'node:fs';
import os from 'node:os';

export interface Machine {
  nproc: number;
  memoryGiB: number;
  cpuModel: string;
  kernel: string;
  node: string;
  postgres: string;
  redis: string;
  /** Load average over 1 minute when the run started: a busy shared machine makes noisy figures. */
  load1: number;
}

function cpuModel(): string {
  const model = os.cpus()[0]?.model?.trim();
  if (model) return model;
  try {
    const line = fs.readFileSync('/proc/cpuinfo', 'utf8').split('\n').find((l) => l.startsWith('model name'));
    return line?.split(':')[1]?.trim() ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

export function describeMachine(versions: { postgres: string; redis: string }): Machine {
  return {
    nproc: os.availableParallelism(),
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    cpuModel: cpuModel(),
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    postgres: versions.postgres,
    redis: versions.redis,
    load1: Math.round((os.loadavg()[0] ?? 0) * 100) / 100,
  };
}
