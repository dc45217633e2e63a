// The Node flags the workers process is started with, wherever it is started: the image's CMD
// (Dockerfile, target workers), `npm run workers`, the `npm start` launcher (dev.ts) and the benchmarks'
// workers process (spawnOurs in bench/peers/systems/ours.ts). test/unit/deploy-files.test.ts keeps the first two equal to
// this list, test/integration/dev-stack.test.ts the launcher's; workers started without them warn at
// boot (src/main/workers.ts).
//
// --max-semi-space-size=16 (MB): a young generation of 2 × 16 MB instead of V8's default for the
// machine (2 × 32 MB on the 24 GiB machines this project is measured on). A worker allocates about
// 300 KB per run, and much of it is still alive a few hundred ms later (its queries, promises and
// Redis commands), so a scavenge's stop-the-world pause grows with the young generation: 7 ms three
// times a second at 200 runs/s with the default, 3.7 ms six times a second with 16 MB, for the same
// total time in GC. Every run in flight in the process waits out a pause, so the pause is what shows
// in the steady latency's tail: p99 15.7–21.0 ms against 20.1–27.1 with the default in five
// interleaved pairs (bench/results/hot-path-levers-2026-11-25.md). 8 MB
// halves the pause again but scavenges so often that the total rises.
export const WORKERS_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=16'];

/**
 * The flags of WORKERS_NODE_FLAGS this process was started without, on its command line or in
 * NODE_OPTIONS: the workers boot all the same, and say so (a bare `svc workers`, an image run with
 * another command).
 */
export function missingWorkersNodeFlags(execArgv: readonly string[], nodeOptions: string | undefined): string[] {
  const given = new Set([...execArgv, ...(nodeOptions ?? '').split(/\s+/)]);
  return WORKERS_NODE_FLAGS.filter((flag) => !given.has(flag));
}
