// The README's unit-author code is cut from the worked examples, so it cannot drift from code that
// type-checks and passes its tests: each code block after a `<!-- snippet: <file>#<region> -->` line must
// equal the lines between `// #region <region>` and `// #endregion <region>` of that file (dedented),
// and every TypeScript block of the Units and Dispatch sections must carry such a line.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
/** The sections whose code must come from the examples. */
const CUT_SECTIONS = ['Units', 'Dispatch'];

interface Snippet {
  file: string;
  region: string;
  code: string;
}

/** The marked blocks of a Markdown text, in order. */
function markedSnippets(markdown: string): Snippet[] {
  const out: Snippet[] = [];
  for (const m of markdown.matchAll(/^<!-- snippet: (\S+?)#(\S+) -->\n```ts\n([\s\S]*?)\n```$/gm)) {
    out.push({ file: m[1]!, region: m[2]!, code: m[3]! });
  }
  return out;
}

/** The lines of `region` in `text`, without their common indentation; throws unless it is there exactly once. */
function regionOf(text: string, region: string, file: string): string {
  const lines = text.split('\n');
  const starts = lines.flatMap((l, i) => (l.trim() === `// #region ${region}` ? [i] : []));
  const ends = lines.flatMap((l, i) => (l.trim() === `// #endregion ${region}` ? [i] : []));
  if (starts.length !== 1 || ends.length !== 1 || ends[0]! < starts[0]!) {
    throw new Error(`${file} must hold '// #region ${region}' once, then '// #endregion ${region}' once`);
  }
  const body = lines.slice(starts[0]! + 1, ends[0]);
  const indent = Math.min(...body.filter((l) => l.trim()).map((l) => l.length - l.trimStart().length));
  return body.map((l) => l.slice(indent)).join('\n');
}

/** The text of a `## <title>` section, up to the next `## ` heading. */
function section(markdown: string, title: string): string {
  const start = markdown.indexOf(`\n## ${title}\n`);
  if (start < 0) throw new Error(`README has no section '## ${title}'`);
  const end = markdown.indexOf('\n## ', start + 1);
  return markdown.slice(start, end < 0 ? undefined : end);
}

describe('README snippets', () => {
  const snippets = markedSnippets(README);

  it('each marked block equals its region of the example file', () => {
    expect(snippets.length).toBeGreaterThanOrEqual(3);
    for (const s of snippets) {
      const text = fs.readFileSync(path.join(ROOT, s.file), 'utf8');
      expect(s.code, `README block of ${s.file}#${s.region}: copy the region again`).toBe(regionOf(text, s.region, s.file));
    }
  });

  it.each(CUT_SECTIONS)('every TypeScript block of the %s section is cut from an example', (title) => {
    const text = section(README, title);
    const blocks = [...text.matchAll(/^[ \t]*```ts$/gm)].length;
    expect(blocks).toBeGreaterThan(0);
    expect(markedSnippets(text)).toHaveLength(blocks);
  });
});
