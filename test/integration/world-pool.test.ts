/**
 * test/support/world.ts's store pool, which every world-based test relies on: a closed world's store
 * serves the file's next world on the same backend, emptied; a world on a Backend the test made
 * itself (a pooler in front of the run's server, a dedicated server) gets the store that backend
 * names, never a store pooled by a world on another backend (with vitest's `isolate: false`, the
 * PgBouncer test once got a direct store pooled under the same backend name).
 */
import { describe, expect, it } from 'vitest';
import { backends, type Backend } from '../support/backends.js';
import { startWorld } from '../support/world.js';
import { expectExit, refundOp } from './incidents-support.js';

describe.each(backends)('the world store pool on $name', (backend) => {
  it("a closed world's store serves the next world on its backend, emptied; a test's own backend gets its own store", async () => {
    const first = await startWorld({ backend });
    const pi = first.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' }).payment_intent;
    expectExit(await first.record([refundOp('refund:pooled', pi, 100)]), 0);
    await first.close();

    const second = await startWorld({ backend });
    expect(second.storeUrl).toBe(first.storeUrl);
    expect(expectExit(await second.recon(['ops', 'list', '--json']), 0).json.operations).toEqual([]);
    await second.close();

    const ownUrl = await backend.migratedUrl();
    const own: Backend = { ...backend, migratedUrl: async () => ownUrl };
    const third = await startWorld({ backend: own });
    expect(third.storeUrl).toBe(ownUrl);
    expectExit(await third.recon(['ops', 'list', '--json']), 0);
    await third.close();

    // Nor does a world on the test's backend leave its store for the run's backend.
    const fourth = await startWorld({ backend });
    expect(fourth.storeUrl).toBe(first.storeUrl);
    await fourth.close();
  });
});
