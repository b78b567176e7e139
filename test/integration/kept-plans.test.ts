/**
 * The statements whose plan a PostgreSQL session keeps (keepPlan; src/store/postgres.ts): after five
 * executions a session may keep one generic plan for any values, made from the tables' sizes then.
 * A plan made while a store is new (empty tables) is kept as they grow, until something invalidates
 * it (an ANALYZE): a statement whose generic plan scans a table because it was empty then reads
 * the whole table at every execution later (npm run bench, webhooks: a group's read of the links,
 * 0.1 ms custom, 19.5 ms generic at 40,000 links, paced p99 5.9 s). So each kept statement, as the
 * agent's calls and a submit send it, is planned generically on a new store, the store then given
 * 20,000 rows in each table (autovacuum off, so nothing re-plans it), and its kept plan must read
 * no table whole.
 */
import { afterAll, expect, inject, it } from 'vitest';
import pg from 'pg';
import { currentOperation } from '../../src/agent/context.js';
import { readForClaim } from '../../src/core/attempt/claims.js';
import { submitOperation } from '../../src/core/attempt/submit.js';
import { ingestEvents, type Delivery } from '../../src/core/found/webhooks.js';
import { holderOf } from '../../src/core/intake/replan.js';
import { planKept, type Db } from '../../src/store/db.js';
import { openStore } from '../../src/store/open.js';
import type { Backend } from '../support/backends.js';
import { describeWorld } from '../support/describe-world.js';
import { createDatabase } from '../support/postgres.js';
import { startStripeWorld, type StripeWorld } from '../support/stripe-world.js';
import { signedEvent } from './integrity-support.js';

const TABLES = ['operations', 'audit_events', 'provider_transactions', 'attempts', 'observations', 'webhook_events'];
const closing: { close(): unknown }[] = [];
afterAll(async () => {
  for (const c of closing.reverse()) await c.close();
});

/** A statement's parameter as an SQL literal: arrays in PostgreSQL's array syntax, dates in ISO form. */
function literal(v: unknown): string {
  const text = (x: unknown): string =>
    x instanceof Date ? x.toISOString() : typeof x === 'string' ? x : JSON.stringify(x);
  if (v === null || v === undefined) return 'NULL';
  const value = Array.isArray(v)
    ? `{${v.map((x) => (x === null || x === undefined ? 'NULL' : `"${text(x).replace(/(["\\])/g, '\\$1')}"`)).join(',')}}`
    : text(v);
  return `'${value.replaceAll("'", "''")}'`;
}

describeWorld('kept plans', ({ backend: storeBackend }) => {
  it.each([
    ['never analysed', false],
    ['analysed while empty', true],
  ])(
    'each kept statement of propose, execute and check, planned on a new store (%s), reads no table whole once the store has grown',
    async (_, analysed) => {
      // Statements by hand on the store's session: on PostgreSQL a connection of its own to the
      // store's database; on PGlite the store's one session (recon's own statements included: PGlite
      // keeps them named as the pool does, src/store/pglite.ts, and its session lives as long as
      // `recon mcp` runs, with no autovacuum to analyse a table and so make a kept plan again).
      let admin: (sql: string) => Promise<Record<string, unknown>[]>;
      let openCaptured: () => Promise<Db>;
      if (storeBackend.name === 'postgres') {
        const base = inject('pgUrl') || process.env.RECON_TEST_PG_URL || '';
        const url = await createDatabase(base, undefined, inject('pgTemplate') || undefined);
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        closing.push({ close: () => client.end() });
        admin = async (sql) => (await client.query<Record<string, unknown>>(sql)).rows;
        openCaptured = async () => capture(await openStore(url));
      } else {
        const raw = await storeBackend.open();
        closing.push(raw);
        admin = async (sql) => (await raw.query<Record<string, unknown>>(sql)).rows;
        openCaptured = async () => capture(raw);
      }
      if (analysed) {
        // An ANALYZE of the empty tables (by hand after a migration): PostgreSQL then believes them
        // empty, where a table never analysed is assumed to span ten pages.
        for (const t of TABLES) await admin(`ANALYZE recon.${t}`);
      }
      const sent: { sql: string; params: unknown[] }[] = [];
      const capture = (db: Db): Db => ({
        ...db,
        query: (sql, params) => (sent.push({ sql, params: params ?? [] }), db.query(sql, params)),
        transaction: (fn) =>
          db.transaction((tx) =>
            fn({ query: (sql, params) => (sent.push({ sql, params: params ?? [] }), tx.query(sql, params)) }),
          ),
      });
      const backend: Backend = { ...storeBackend, open: () => openCaptured() };
      const w: StripeWorld = await startStripeWorld(backend);
      closing.push(w);
      // The calls, on the new store: a proposal's guard, check_action's read, execute_action's read,
      // claim and end (a late answer's link too: a second submit after an answer lost).
      const [pi] = await w.recordRefunds([
        { id: 'refund:kp_1', amount: 100 },
        { id: 'refund:kp_2', amount: 200 },
      ]);
      await holderOf(
        w.db,
        {
          id: 'refund:kp_9',
          provider: 'stripe',
          action: 'refund',
          payload: { payment_intent: pi },
          client_reference: null,
        },
        'stripe',
      );
      await currentOperation(w.db, 'refund:kp_1');
      await readForClaim(w.db, 'refund:kp_1');
      await submitOperation(w.ctx, w.stripe, 'refund:kp_1');
      w.sandbox.faults.inject({ kind: 'commit_then_drop' }, { times: 1 });
      await submitOperation(w.ctx, w.stripe, 'refund:kp_2');
      expect(w.sandbox.refunds({ metadataOperationId: 'refund:kp_1' })).toHaveLength(1);
      // webhook serve's group: an event of a linked refund, its redelivery, and a refund no operation names.
      const delivery = (type: string, refundId: string): Delivery => {
        const { body, signature } = signedEvent(w.sandbox, type, refundId);
        return { provider: w.stripe, event: w.stripe.parseWebhook!(body, signature) };
      };
      const [linked] = w.sandbox.refunds({ metadataOperationId: 'refund:kp_1' });
      const stranger = w.sandbox.seedRefund({ payment_intent: pi, amount: 100 });
      const d = delivery('refund.updated', linked.id);
      const again: Delivery = { ...d, event: { ...d.event } };
      const group = await ingestEvents(w.ctx, [d, again, delivery('refund.created', stranger.id)]);
      expect(group.map((r) => r.ok && r.value.effect)).toEqual(['noted', 'duplicate', 'unmatched']);

      const kept = new Map<string, unknown[]>();
      for (const s of sent) if (planKept(s.sql) && s.params.length && !kept.has(s.sql)) kept.set(s.sql, s.params);
      expect(kept.size).toBeGreaterThan(5);

      for (const t of TABLES) await admin(`ALTER TABLE recon.${t} SET (autovacuum_enabled = false)`);
      await admin('SET plan_cache_mode = force_generic_plan');
      const statements = [...kept.entries()];
      const failed: string[] = [];
      // Planned now, on the new store: each prepared and executed once (in a transaction rolled back).
      for (const [i, [sql, params]] of statements.entries()) {
        await admin(`PREPARE kept_${i} AS ${sql}`);
        await admin('BEGIN');
        // A statement may fail as it runs (its event's seq taken by the first run): planned all the same.
        await admin(`EXECUTE kept_${i}(${params.map(literal).join(', ')})`).catch((e: { code?: string }) =>
          failed.push(e.code ?? 'no code'),
        );
        await admin('ROLLBACK');
      }
      // Only what fails as it runs (a key taken), never as it is bound: each has its plan.
      expect(failed.filter((code) => code !== '23505')).toEqual([]);
      // The store grows: 20,000 operations, each with an event, an attempt, a link and an observation.
      await admin(`
        INSERT INTO recon.operations (id, provider, action, payload, payload_hash, idempotency_key, state, created_at, updated_at)
        SELECT 'refund:grown_' || g, 'stripe', 'refund', jsonb_build_object('payment_intent', 'pi_grown_' || g, 'amount', 100),
               'h' || g, 'k' || g, 'confirmed', now(), now() FROM generate_series(1, 20000) g`);
      await admin(`
        INSERT INTO recon.audit_events (operation_id, seq, at, actor, kind, from_state, to_state, detail, prev_hash, hash)
        SELECT 'refund:grown_' || g, 1, now(), 'test', 'recorded', NULL, 'confirmed', '{}'::jsonb, 'p', 'h' || g
          FROM generate_series(1, 20000) g`);
      await admin(`
        INSERT INTO recon.attempts (operation_id, number, idempotency_key, request_hash, started_at)
        SELECT 'refund:grown_' || g, 1, 'k' || g, 'r', now() FROM generate_series(1, 20000) g`);
      await admin(`
        INSERT INTO recon.provider_transactions (provider, provider_id, operation_id, status, state, linked_via, linked_at, linked_by)
        SELECT 'stripe', 're_grown_' || g, 'refund:grown_' || g, 'succeeded', 'confirmed', 'lookup', now(), 'test'
          FROM generate_series(1, 20000) g`);
      await admin(`
        INSERT INTO recon.webhook_events (provider, event_id, type, received_at, operation_id, provider_id, applied, last_seen_at, payload)
        SELECT 'stripe', 'evt_grown_' || g, 'refund.updated', now(), 'refund:grown_' || g, 're_grown_' || g, true, now(), '{}'::jsonb
          FROM generate_series(1, 20000) g`);
      if (analysed) {
        // Tables analysed while empty are believed empty: even a lookup by primary key is planned as a
        // scan then (it costs nothing), and a generic plan keeps it. PostgreSQL makes a kept plan again
        // when the statistics change: autovacuum analyses a table after 50 changes (and the pool
        // closes a connection, with its plans, after five minutes at most). What those plans are then:
        for (const t of TABLES) await admin(`ANALYZE recon.${t}`);
      }
      const scans: string[] = [];
      for (const [i, [sql, params]] of statements.entries()) {
        const rows = await admin(`EXPLAIN EXECUTE kept_${i}(${params.map(literal).join(', ')})`);
        const plan = rows.map((row) => String(Object.values(row)[0])).join('\n');
        expect(plan).not.toMatch(/custom/i);
        for (const m of plan.matchAll(/Seq Scan on (\w+)/g))
          if (TABLES.includes(m[1])) scans.push(`${m[1]} in: ${sql.trim().replace(/\s+/g, ' ').slice(0, 100)}`);
      }
      expect(scans).toEqual([]);
    },
  );
});
