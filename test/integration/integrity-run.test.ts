/**
 * Issue 10, "`run` without `--provider`": each operation is claimed with its own provider's
 * `lease` (not a fixed 2 minutes: a worker killed mid-pass blocked operations of a 3 s provider
 * for 2 minutes), and the `lease.expired` event records when the crashed worker's lease expired.
 */
import { beforeEach, expect, it } from 'vitest';
import { DEFAULT_CAPABILITIES } from '../../src/config/providers.js';
import { eventsOf } from '../../src/core/journal/chain.js';
import type { CoreContext } from '../../src/core/journal/context.js';
import { recordOperations } from '../../src/core/intake/record.js';
import { runPass } from '../../src/core/reconcile/run.js';
import { validateOperation } from '../../src/core/intake/validate.js';
import type { Db } from '../../src/store/db.js';
import type { LookupResult, Provider } from '../../src/types.js';
import { describeWorld } from '../support/describe-world.js';

const T0 = new Date('2025-03-01T10:00:00.000Z');
const ms = (n: number) => new Date(T0.getTime() + n);

describeWorld('recon run leases', (suite) => {
  let db: Db;
  beforeEach(async () => {
    db = await suite.db();
  });

  it("claims each operation with its own provider's lease and records the crashed worker's lease expiry", async () => {
    const ctx: CoreContext = { db, actor: 'test', now: () => T0 };
    await recordOperations(
      { ...ctx, now: () => ms(-120_000) },
      ['stripe', 'calendar'].map((provider) =>
        validateOperation(
          {
            id: `op_${provider}`,
            provider,
            action: 'refund',
            payload: { amount: 100, currency: 'usd' },
            approval: 'T-1',
          },
          ['stripe', 'calendar'],
        ),
      ),
    );
    // Both were being submitted by a worker that died; its leases expired a second ago.
    await db.query(
      `UPDATE recon.operations SET state = 'submitting', attempt_count = 1, first_attempt_at = $1::timestamptz,
              lease_owner = 'dead-worker', lease_expires_at = $2::timestamptz`,
      [ms(-60_000).toISOString(), ms(-1000).toISOString()],
    );
    const leaseSeen = new Map<string, Date>();
    const provider = (name: string, leaseMs: number): Provider => ({
      name,
      type: 'module',
      capabilities: { ...DEFAULT_CAPABILITIES, timeoutMs: 1000, leaseMs },
      submit: async () => ({ outcome: 'unknown' }),
      get: async () => null,
      async lookup(q): Promise<LookupResult> {
        const r = await db.query<{ lease_expires_at: Date }>(
          'SELECT lease_expires_at FROM recon.operations WHERE id = $1',
          [q.operation_id],
        );
        leaseSeen.set(q.operation_id!, r.rows[0].lease_expires_at);
        return { result: 'unavailable', matches: [], candidates: [], error: 'test' };
      },
    });
    const providers: Record<string, Provider> = {
      stripe: provider('stripe', 3000),
      calendar: provider('calendar', 7000),
    };

    const summary = await runPass(ctx, async (name) => providers[name]);
    expect(summary.errors).toEqual([]);
    expect(summary.claimed).toBe(2);
    expect(leaseSeen.get('op_stripe')).toEqual(ms(3000));
    expect(leaseSeen.get('op_calendar')).toEqual(ms(7000));
    for (const id of ['op_stripe', 'op_calendar']) {
      const expired = (await eventsOf(db, id)).find((e) => e.kind === 'lease.expired');
      expect(expired?.detail.previous_lease_expired_at).toBe(ms(-1000).toISOString());
    }
  });
});
