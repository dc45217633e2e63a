// The GC pauses of one process, as `perf_hooks` reports them, for the work bench's `# STEADY_GC` line:
// a steady round's tail sits next to scavenges (bench/results/hot-path-levers-2026-11-27b.md), so
// their number and length are printed beside the latency they cost.
import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';

export interface GcPause {
  /** 'minor' (a scavenge) or 'major' (mark-compact, incremental or not). */
  kind: 'minor' | 'major';
  ms: number;
}

/** Starts recording this process's GC pauses; `take()` returns those since the last take and forgets them. */
export function recordGcPauses(): { take(): GcPause[]; stop(): void } {
  let pauses: GcPause[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) pauses.push({ kind: kindOf(entry), ms: entry.duration });
  });
  observer.observe({ entryTypes: ['gc'] });
  return {
    take() {
      const taken = pauses;
      pauses = [];
      return taken;
    },
    stop: () => observer.disconnect(),
  };
}

function kindOf(entry: PerformanceEntry): GcPause['kind'] {
  const kind = (entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
  return kind === constants.NODE_PERFORMANCE_GC_MINOR ? 'minor' : 'major';
}

/** `process=<name> scavenges=<n> scavenge_p50_ms=<x> scavenge_max_ms=<x> major=<n> major_max_ms=<x> gc_ms=<x>` (nan when none). */
export function gcPauseFields(name: string, pauses: readonly GcPause[]): string {
  const minor = pauses.filter((p) => p.kind === 'minor').map((p) => p.ms).sort((a, b) => a - b);
  const major = pauses.filter((p) => p.kind === 'major').map((p) => p.ms).sort((a, b) => a - b);
  const ms = (v: number | undefined) => (v === undefined ? 'nan' : v.toFixed(2));
  const total = pauses.reduce((sum, p) => sum + p.ms, 0);
  return (
    `process=${name} scavenges=${minor.length} scavenge_p50_ms=${ms(minor[Math.floor((minor.length - 1) / 2)])} ` +
    `scavenge_max_ms=${ms(minor.at(-1))} major=${major.length} major_max_ms=${ms(major.at(-1))} gc_ms=${total.toFixed(2)}`
  );
}
