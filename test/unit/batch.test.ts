/**
 * src/lib/batch.ts: calls made while a group is being handled wait and go together in the next
 * group; each call gets its own item's outcome; a group that throws rejects its calls only.
 */
import { describe, expect, it } from 'vitest';
import { batcher, type Outcome } from '../../src/lib/batch.js';

/** A handler whose groups finish when the test says so. */
function gated() {
  const groups: number[][] = [];
  const gates: (() => void)[] = [];
  const handle = async (items: number[]): Promise<Outcome<number>[]> => {
    groups.push(items);
    await new Promise<void>((resolve) => gates.push(resolve));
    if (items.includes(-1)) throw new Error('group failed');
    return items.map((i) => (i === 13 ? { ok: false, error: new Error('unlucky') } : { ok: true, value: i * 10 }));
  };
  return { groups, open: () => gates.shift()?.(), handle };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('batcher', () => {
  it('calls made in one turn go together; calls made while a group is handled go in the next group, up to maxItems', async () => {
    const g = gated();
    const call = batcher(g.handle, { maxItems: 3 });
    const first = [1, 2].map(call);
    await tick();
    const rest = [3, 4, 5, 6].map(call);
    await tick();
    expect(g.groups).toEqual([[1, 2]]);
    g.open();
    expect(await Promise.all(first)).toEqual([10, 20]);
    await tick();
    expect(g.groups).toEqual([
      [1, 2],
      [3, 4, 5],
    ]);
    g.open();
    await tick();
    expect(g.groups).toEqual([[1, 2], [3, 4, 5], [6]]);
    g.open();
    expect(await Promise.all(rest)).toEqual([30, 40, 50, 60]);
  });

  it('each call gets its own outcome; a group that throws rejects its own calls, not the next group', async () => {
    const g = gated();
    const call = batcher(g.handle, { maxItems: 10, concurrency: 2 });
    const a = call(13);
    await tick();
    const b = call(-1);
    await tick();
    const c = [call(7), call(8)];
    await tick();
    // Two groups in flight at once; the third waits.
    expect(g.groups).toEqual([[13], [-1]]);
    g.open();
    g.open();
    await expect(a).rejects.toThrow('unlucky');
    await expect(b).rejects.toThrow('group failed');
    await tick();
    expect(g.groups.at(-1)).toEqual([7, 8]);
    g.open();
    expect(await Promise.all(c)).toEqual([70, 80]);
  });
});
