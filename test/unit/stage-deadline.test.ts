// boundStage: the deadline of one wait of a delivery (src/db/stage-deadline.ts).
import { describe, expect, it } from 'vitest';
import { boundStage, StageTimedOut, withStageBounds, withoutStageBounds, type StageBounds } from '../../src/db/stage-deadline.ts';

function recordingBounds(ms: number): StageBounds & { missedStages: string[]; metStages: string[] } {
  const missedStages: string[] = [];
  const metStages: string[] = [];
  return { ms, missedStages, metStages, missed: (s) => missedStages.push(s), met: (s) => metStages.push(s) };
}

describe('boundStage', () => {
  it('rejects a wait that never settles with StageTimedOut naming the stage, and reports the miss', async () => {
    const bounds = recordingBounds(30);
    const never = new Promise<number>(() => {});
    const error = await withStageBounds(bounds, () => boundStage('begin', never)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StageTimedOut);
    expect((error as StageTimedOut).stage).toBe('begin');
    expect((error as StageTimedOut).code).toBe('DELIVERY_STAGE_TIMEOUT');
    expect(bounds.missedStages).toEqual(['begin']);
  });

  it('hands a value that arrives after the deadline to onLate (a late connection is released), never to the caller', async () => {
    const bounds = recordingBounds(20);
    let arrive!: (v: string) => void;
    const late = new Promise<string>((r) => (arrive = r));
    const freed: string[] = [];
    await expect(withStageBounds(bounds, () => boundStage('reserve', late, (v) => freed.push(v)))).rejects.toBeInstanceOf(StageTimedOut);
    arrive('connection');
    await late;
    await Promise.resolve();
    expect(freed).toEqual(['connection']);
  });

  it('passes a wait within its deadline through and reports it met; outside any bounds it is the promise itself', async () => {
    const bounds = recordingBounds(1_000);
    await expect(withStageBounds(bounds, () => boundStage('commit', Promise.resolve(7)))).resolves.toBe(7);
    expect(bounds.metStages).toEqual(['commit']);
    const p = Promise.resolve(1);
    expect(boundStage('commit', p)).toBe(p);
    expect(withStageBounds(bounds, () => withoutStageBounds(() => boundStage('commit', p)))).toBe(p);
  });
});
