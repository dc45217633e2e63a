// `npm start` reloads the units: a watch on the unit files (every `.ts` under the units directory,
// recursively), quiet for `settleMs` after the last change before it reports, so an editor's burst of
// writes (a save, a formatter, a branch switch) is one reload. A change that comes while a reload runs
// is kept and reported once that one is done.
import fs from 'node:fs';

export interface UnitWatch {
  /** Resolves at the next settled change (at once if one is waiting). */
  next(): Promise<void>;
  close(): void;
}

export function watchUnitFiles(dir: string, settleMs = 300): UnitWatch {
  let waiting = false;
  let notify: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  const settled = () => {
    timer = undefined;
    if (notify) {
      const n = notify;
      notify = undefined;
      n();
    } else {
      waiting = true;
    }
  };
  const watcher = fs.watch(dir, { recursive: true }, (_event, file) => {
    if (file && !String(file).endsWith('.ts')) return;
    clearTimeout(timer);
    timer = setTimeout(settled, settleMs);
  });
  return {
    next() {
      if (waiting) {
        waiting = false;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => (notify = resolve));
    },
    close() {
      clearTimeout(timer);
      watcher.close();
    },
  };
}
