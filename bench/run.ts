// `npm run bench -- <name> [args...]`: runs bench/<name>.ts or bench/<name>/index.ts. Each benchmark
// module exports `main(args: string[]): Promise<number>` and returns its exit code; this file is the
// only one that exits, so a benchmark can also be driven from a test.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const benchDir = path.dirname(fileURLToPath(import.meta.url));

function available(): string[] {
  const names: string[] = [];
  for (const entry of fs.readdirSync(benchDir, { withFileTypes: true })) {
    if (entry.isFile() && entry.name.endsWith('.ts') && entry.name !== 'run.ts') names.push(entry.name.slice(0, -3));
    if (entry.isDirectory() && fs.existsSync(path.join(benchDir, entry.name, 'index.ts'))) names.push(entry.name);
  }
  return names.sort();
}

function resolveBenchmark(name: string): string | undefined {
  if (!/^[a-z][a-z0-9_-]*$/.test(name)) return undefined;
  const candidates = [path.join(benchDir, `${name}.ts`), path.join(benchDir, name, 'index.ts')];
  return candidates.find((file) => fs.existsSync(file));
}

async function run(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (!name || name === '--help' || name === '-h') {
    console.log(`usage: npm run bench -- <name> [--smoke] [options]\nbenchmarks: ${available().join(', ')}`);
    return name ? 0 : 2;
  }
  const file = resolveBenchmark(name);
  if (!file) {
    console.error(`BENCH_UNKNOWN: no benchmark named '${name}'; choose one of: ${available().join(', ')}`);
    return 2;
  }
  const mod = (await import(pathToFileURL(file).href)) as { main?: (args: string[]) => Promise<number> };
  if (typeof mod.main !== 'function') {
    console.error(`BENCH_MALFORMED: ${path.relative(process.cwd(), file)} must export main(args): Promise<number>`);
    return 2;
  }
  return mod.main(args);
}

try {
  process.exitCode = await run(process.argv.slice(2));
} catch (error) {
  console.error(error);
  process.exitCode = 1;
}
// A benchmark is expected to close every pool and stop every server it started. If something still
// holds the event loop, say so and leave anyway rather than hang a CI job (the timer itself does not
// keep the process alive).
setTimeout(() => {
  console.error('BENCH_LINGERING: a handle was still open 15 s after the benchmark finished; exiting anyway');
  process.exit(process.exitCode ?? 1);
}, 15_000).unref();
