/**
 * Issue 28: `recon run` claims a large backlog in larger batches, so that a provider that lists its
 * ledger again before each batch (Stripe's scan, fresh for every batch claimed) shares that listing
 * among more operations; never so large that its lookups one by one at the provider's rate limit
 * could outlast the lease.
 */
import { expect, it } from 'vitest';
import { DEFAULT_CAPABILITIES } from '../../src/config/providers.js';
import type { CoreContext } from '../../src/core/journal/context.js';
import { claimSize, runPass } from '../../src/core/reconcile/run.js';
import type { Provider, ProviderCapabilities } from '../../src/types.js';
import { instantProvider, seedOperations } from '../bench/seed.js';
import { describeWorld } from '../support/describe-world.js';

describeWorld('recon run batches', (suite) => {
  /** A pass over `n` unknown outcomes; the size of each batch the provider was told of. */
  async function batches(n: number, capabilities: ProviderCapabilities) {
    const db = await suite.db();
    await seedOperations(db, 'b', n, new Date());
    const sizes: number[] = [];
    const provider: Provider = {
      ...instantProvider('b', capabilities),
      async prepareLookups(queries) {
        sizes.push(queries.length);
      },
    };
    const ctx: CoreContext = { db, actor: 'test', now: () => new Date() };
    const summary = await runPass(ctx, async () => provider, { provider: 'stripe' });
    expect(summary.errors).toEqual([]);
    expect(summary.claimed).toBe(n);
    return sizes;
  }

  it('claims a quarter of a large backlog at once against a fast provider: one listing serves 250 operations', async () => {
    const sizes = await batches(1000, { ...DEFAULT_CAPABILITIES, rateLimit: 1000, leaseMs: 120_000 });
    expect(sizes).toEqual([250, 250, 250, 250]);
  });

  it('keeps batches of 200 where looking each up at the rate limit could outlast the lease', async () => {
    // 2 requests/s and a 2-minute lease: two batches of 60 looked up one by one take half the lease.
    const sizes = await batches(1000, { ...DEFAULT_CAPABILITIES, rateLimit: 2, leaseMs: 120_000 });
    expect(sizes).toEqual([200, 200, 200, 200, 200]);
  });

  it('bounds the batch by the rate limit and the lease: 10/s and 2 minutes, 300 operations', async () => {
    const sizes = await batches(1600, { ...DEFAULT_CAPABILITIES, rateLimit: 10, leaseMs: 120_000 });
    expect(sizes).toEqual([300, 300, 300, 300, 300, 100]);
  });

  it('gives each of 4 workers a quarter of a backlog of 12,000 (at most 5,000 at once): one listing of the ledger each', () => {
    const fast = {
      capabilities: { ...DEFAULT_CAPABILITIES, rateLimit: 1_000_000, leaseMs: 120_000 },
      prepareLookups: async () => {},
    };
    // At most 2,000, two workers took two batches each (the next is claimed while this one is looked
    // up) and listed the ledger's recent refunds again for the second.
    expect(claimSize(12_000, [fast])).toBe(3000);
    expect(claimSize(20_000, [fast])).toBe(5000);
    expect(claimSize(100_000, [fast])).toBe(5000);
    // The rate limit and lease still bound it, and a provider that does not prepare its batches keeps 200.
    expect(claimSize(12_000, [{ ...fast, capabilities: { ...fast.capabilities, rateLimit: 25 } }])).toBe(750);
    expect(claimSize(12_000, [fast, { capabilities: fast.capabilities }])).toBe(200);
  });
});
