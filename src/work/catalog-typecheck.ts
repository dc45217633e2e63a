// The type check of `tasks:check`: the TypeScript compiler (the project's own `typescript` dependency)
// over every unit file and what it imports, with the compiler options of the project's tsconfig.json.
// Discovery only imports the units, and type annotations are erased at run time, so a unit that reads a
// string as a number would pass discovery and fail in production; here it fails the check, naming its
// file and line. Costs a few seconds (the units pull in the runtime's types); `tasks:emit` skips it.
import path from 'node:path';
import { listTsFiles, type CatalogProblem } from './catalog.ts';

const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');

export interface UnitTypeCheck {
  problems: CatalogProblem[];
  /** How long the compiler took, ms. */
  elapsedMs: number;
}

/** Type-checks the units under root/dir; each error is a problem naming its file (relative to root) and line. */
export async function typeCheckUnits(root: string, dir = 'units'): Promise<UnitTypeCheck> {
  const started = performance.now();
  const { default: ts } = await import('typescript');
  const files = listTsFiles(path.resolve(root, dir));
  if (files.length === 0) return { problems: [], elapsedMs: performance.now() - started };
  const configFile = path.join(PROJECT_ROOT, 'tsconfig.json');
  const read = ts.readConfigFile(configFile, (f) => ts.sys.readFile(f));
  const parsed = ts.parseJsonConfigFileContent(read.config ?? {}, ts.sys, PROJECT_ROOT, undefined, configFile);
  // rootDir/outDir describe the project's build; units under another root (a fixture) are checked as well.
  const { rootDir: _rootDir, outDir: _outDir, ...options } = parsed.options;
  const program = ts.createProgram({ rootNames: files, options: { ...options, noEmit: true } });
  const problems: CatalogProblem[] = [];
  for (const d of ts.getPreEmitDiagnostics(program)) {
    if (d.category !== ts.DiagnosticCategory.Error) continue;
    const text = ts.flattenDiagnosticMessageText(d.messageText, ' ');
    if (!d.file || d.start === undefined) {
      problems.push({ file: dir, problem: `type error: TS${d.code} ${text}` });
      continue;
    }
    const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
    problems.push({
      file: path.relative(root, d.file.fileName).split(path.sep).join('/'),
      problem: `type error at line ${line + 1}:${character + 1}: TS${d.code} ${text}`,
    });
  }
  return { problems, elapsedMs: performance.now() - started };
}
