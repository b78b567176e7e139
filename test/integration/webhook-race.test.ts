/**
 * `webhook serve`'s group under concurrency (PostgreSQL: several connections). Its first statement
 * inserts the group's events and locks their operations (INSERT_AND_LOCK, src/core/found/webhooks.ts):
 * one statement, one snapshot, taken before its insert waits for another server's uncommitted
 * delivery of the same event. A link made during that wait must still match the event to its
 * operation (found by a review of the statement: the event was left unmatched, its evidence never
 * noted, where the three statements it replaced matched it).
 */
import { afterAll, expect, inject, it } from 'vitest';
import pg from 'pg';
import { ingestEvents, type Delivery } from '../../src/core/found/webhooks.js';
import { openStore } from '../../src/store/open.js';
import type { Backend } from '../support/backends.js';
import { describeWorld } from '../support/describe-world.js';
import { createDatabase } from '../support/postgres.js';
import { startStripeWorld, type StripeWorld } from '../support/stripe-world.js';
import { signedEvent } from './integrity-support.js';

const closing: { close(): unknown }[] = [];
afterAll(async () => {
  for (const c of closing.reverse()) await c.close();
});

describeWorld(
  'webhook groups under concurrency',
  () => {
    it("an event's link made while its insert waits for another server's delivery of it (rolled back) still matches it", async () => {
      const base = inject('pgUrl') || process.env.RECON_TEST_PG_URL || '';
      const url = await createDatabase(base, undefined, inject('pgTemplate') || undefined);
      const backend: Backend = {
        name: 'postgres',
        url: async () => url,
        emptyUrl: async () => url,
        migratedUrl: async () => url,
        open: async () => openStore(url),
      };
      const w: StripeWorld = await startStripeWorld(backend);
      closing.push(w);
      const [pi] = await w.recordRefunds([{ id: 'refund:race_1', amount: 700 }]);
      // A refund that names no operation (made outside recon), which a lookup will link to it.
      const refund = w.sandbox.seedRefund({ payment_intent: pi, amount: 700 });
      const { body, signature } = signedEvent(w.sandbox, 'refund.created', refund.id);
      const d: Delivery = { provider: w.stripe, event: w.stripe.parseWebhook!(body, signature) };
      expect(d.event.txn?.operation_id ?? null).toBeNull();

      const other = new pg.Client({ connectionString: url });
      const linker = new pg.Client({ connectionString: url });
      await other.connect();
      await linker.connect();
      closing.push({ close: () => other.end() }, { close: () => linker.end() });
      // Another server's delivery of the same event, not committed yet.
      await other.query('BEGIN');
      await other.query(
        `INSERT INTO recon.webhook_events (provider, event_id, type, received_at, last_seen_at, payload)
         VALUES ('stripe', $1, 'refund.created', now(), now(), '{}'::jsonb)`,
        [d.event.event_id],
      );
      const group = ingestEvents(w.ctx, [d]);
      // The group's insert waits for it.
      for (let i = 0; ; i++) {
        const r = await linker.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%webhook_events%'`,
        );
        if (r.rows[0].n > 0) break;
        if (i > 200) throw new Error('the group never waited for the other delivery');
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      // Meanwhile the refund is linked to the operation (as a lookup would), and the other delivery rolls back.
      await linker.query(
        `INSERT INTO recon.provider_transactions (provider, provider_id, operation_id, status, state, amount, currency, linked_via, linked_at, linked_by)
         VALUES ('stripe', $1, 'refund:race_1', 'succeeded', 'confirmed', 700, 'usd', 'lookup', now(), 'test')`,
        [refund.id],
      );
      await other.query('ROLLBACK');

      const [out] = await group;
      expect(out.ok && out.value).toMatchObject({ duplicate: false, operation_id: 'refund:race_1' });
      expect(out.ok && out.value.effect).not.toBe('unmatched');
      const row = await w.db.query<{ operation_id: string | null }>(
        'SELECT operation_id FROM recon.webhook_events WHERE event_id = $1',
        [d.event.event_id],
      );
      expect(row.rows[0].operation_id).toBe('refund:race_1');
      // The event is evidence on the operation's chain.
      const noted = await w.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM recon.audit_events WHERE operation_id = 'refund:race_1' AND detail->>'event_id' = $1`,
        [d.event.event_id],
      );
      expect(noted.rows[0].n).toBe(1);
    });
  },
  { only: 'postgres' },
);
