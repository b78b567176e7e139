/**
 * The sandbox's refund list is what the audit benchmark reads a million refunds through: a page
 * must cost the same at any depth (the cursor found by binary search, not by walking from the
 * head), and the pages must be exactly Stripe's: newest first, the cursor's neighbours, has_more.
 */
import { describe, expect, it } from 'vitest';
import { StripeLedger } from '../../src/sandbox/stripe/ledger.js';
import type { Refund } from '../../src/sandbox/stripe/types.js';
import { money } from '../../src/sandbox/stripe/params.js';

const BASE = 1_700_000_000;

function ledgerOf(n: number): StripeLedger {
  const ledger = new StripeLedger(() => (BASE + 10 * n) * 1000);
  // Three refunds share each second, so the order within one `created` is by insertion; seeded
  // oldest last, so that each lands at the end of the newest-first list.
  for (let i = 0; i < n; i++)
    ledger.seedRefund({ amount: 100 + i, currency: 'usd', created: BASE - Math.floor(i / 3) });
  return ledger;
}

function page(ledger: StripeLedger, params: Record<string, string | Record<string, string>>) {
  const r = ledger.list(params);
  if (!('data' in r)) throw new Error(JSON.stringify(r));
  return r;
}

describe('sandbox refund list', () => {
  it('walks the whole ledger newest first with starting_after, each refund once, and back with ending_before', () => {
    const ledger = ledgerOf(1000);
    const seen: Refund[] = [];
    let after: string | undefined;
    for (;;) {
      const p = page(ledger, { limit: '100', ...(after ? { starting_after: after } : {}) });
      seen.push(...p.data);
      if (!p.has_more) break;
      after = p.data.at(-1)!.id;
    }
    expect(seen).toHaveLength(1000);
    expect(new Set(seen.map((r) => r.id)).size).toBe(1000);
    for (let i = 1; i < seen.length; i++) expect(seen[i - 1].created).toBeGreaterThanOrEqual(seen[i].created);
    const back = page(ledger, { limit: '10', ending_before: seen[500].id });
    expect(back.data.map((r) => r.id)).toEqual(seen.slice(490, 500).map((r) => r.id));
    expect(back.has_more).toBe(true);
    const top = page(ledger, { limit: '10', ending_before: seen[5].id });
    expect(top.data.map((r) => r.id)).toEqual(seen.slice(0, 5).map((r) => r.id));
    expect(top.has_more).toBe(false);
    const ranged = page(ledger, { limit: '100', created: { lte: String(BASE - 99), gte: String(BASE - 100) } });
    expect(ranged.data.map((r) => r.id)).toEqual(
      seen.filter((r) => r.created >= BASE - 100 && r.created <= BASE - 99).map((r) => r.id),
    );
  });

  it('costs the same for a page at the end of 30,000 refunds as for the first page', () => {
    const ledger = ledgerOf(30_000);
    const first = page(ledger, { limit: '100' });
    const deep = page(ledger, { limit: '1', created: String(BASE - 8_000) }).data[0];
    // The work a page does, counted rather than timed: how many entries of the ledger's newest-first
    // list it reads (a Proxy over that private list counts index reads).
    const inner = ledger as unknown as { sorted: unknown[] };
    let reads = 0;
    inner.sorted = new Proxy(inner.sorted, {
      get(target, key, receiver) {
        if (typeof key === 'string' && /^\d+$/.test(key)) reads++;
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    const readsFor = (params: Record<string, string>) => {
      reads = 0;
      expect(page(ledger, { limit: '1', ...params }).data).toHaveLength(1);
      return reads;
    };
    const shallow = readsFor({ starting_after: first.data[0].id });
    const atDepth = readsFor({ starting_after: deep.id });
    // Walking from the head reads ~24,000 entries at that depth; binary search ~2 × log2(30,000) ≈ 30.
    expect(shallow).toBeGreaterThan(0);
    expect(atDepth).toBeLessThanOrEqual(shallow + 2 * Math.ceil(Math.log2(30_000)));
  });
});

// Issue 25: amounts are formatted in one place (src/lib/money.ts); the sandbox's Stripe-worded
// messages divided by 100 on their own, so a yen refund read a hundred times too small.
describe('the sandbox writes amounts in its messages through the one money formatter', () => {
  it.each([
    [950, 'usd', '$9.50'],
    [1000, 'jpy', '1,000 jpy'],
    [1234, 'kwd', '1.234 kwd'],
    [123456, 'eur', '1,234.56 eur'],
  ])('%i %s → %s', (amount, currency, text) => {
    expect(money(amount, currency)).toBe(text);
  });
});
