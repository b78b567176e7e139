/**
 * `ops list --unresolved --limit 50` on a large store: the query listOperations builds for the
 * unresolved filter must be served by the partial index `operations_unresolved_idx`, on PostgreSQL
 * and on PGlite. Baseline: the same query with index scans switched off (a sequential scan and a
 * top-N sort), measured in the same run. On the same store, the re-plan guard's read that every
 * proposal makes (measureGuard).
 */
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { holderOf } from '../../src/core/intake/replan.js';
import { listOperations } from '../../src/core/journal/operations.js';
import type { Db, Queryable } from '../../src/store/db.js';
import { openStore } from '../../src/store/open.js';
import { UNRESOLVED_STATES } from '../../src/types.js';
import {
  freshPgStore,
  median,
  mkdir,
  payloadSql,
  round,
  type BenchContext,
  type Benchmark,
  type BenchRow,
} from './lib.js';

const RUNS = 20;

/** 1% unresolved, spread evenly over the whole history (the worst case for a non-partial index). */
async function load(db: Db, rows: number): Promise<void> {
  // Building the secondary indexes once after the load is several times faster than maintaining
  // them row by row; they are re-created from their own definitions, so the schema is unchanged.
  const indexes = await db.query<{ name: string; def: string }>(
    `SELECT indexname AS name, indexdef AS def FROM pg_indexes
      WHERE schemaname = 'recon' AND tablename = 'operations' AND indexname <> 'operations_pkey'`,
  );
  for (const ix of indexes.rows) await db.query(`DROP INDEX recon.${ix.name}`);
  const p = payloadSql(`'pi_' || g`, '1000 + g % 5000');
  // One statement per 100k rows keeps PGlite's WebAssembly heap small during the load.
  for (let from = 1; from <= rows; from += 100_000) {
    const to = Math.min(rows, from + 99_999);
    await db.query(
      `INSERT INTO recon.operations (id, provider, action, payload, payload_hash, idempotency_key, state, amount, currency,
                                     attempt_count, created_at, updated_at, first_attempt_at)
       SELECT 'op-' || g, 'stripe', 'refund', ${p.payload}, ${p.hash}, 'op-' || g,
              CASE WHEN g % 100 = 0 THEN (ARRAY['submitting', 'pending', 'outcome_unknown', 'needs_review'])[1 + (g / 100) % 4]
                   ELSE 'confirmed' END,
              1000 + g % 5000, 'usd', 1,
              timestamptz '2025-01-01' + g * interval '1 second', timestamptz '2025-01-01' + g * interval '1 second',
              timestamptz '2025-01-01' + g * interval '1 second'
         FROM generate_series($1::int, $2::int) AS g`,
      [from, to],
    );
  }
  for (const ix of indexes.rows) await db.query(ix.def);
  await db.query('ANALYZE recon.operations');
}

/** Records the SQL and parameters listOperations sends, so EXPLAIN and the baseline run exactly that statement. */
function capturing(db: Db): { q: Queryable; last: () => { sql: string; params: unknown[] } } {
  let last: { sql: string; params: unknown[] } | undefined;
  return {
    q: { query: (sql, params) => ((last = { sql, params: params ?? [] }), db.query(sql, params)) },
    last: () => last!,
  };
}

/** The plan PostgreSQL gives a captured statement (EXPLAIN), one line per node. */
async function explain(db: Db, sql: string, params: unknown[]): Promise<string> {
  const r = await db.query<Record<string, string>>(`EXPLAIN ${sql}`, params);
  return r.rows.map((row) => Object.values(row)[0]).join('\n');
}

/** The baseline: the same statement `runs` times with index scans off (a sequential scan), each time in ms, planned each time. */
async function withoutIndexes(db: Db, sql: string, params: unknown[], runs: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await db.transaction(async (tx) => {
      await tx.query('SET LOCAL enable_indexscan = off');
      await tx.query('SET LOCAL enable_bitmapscan = off');
      await tx.query('SET LOCAL enable_indexonlyscan = off');
      // A text of its own: the statement itself may be a kept one (keepPlan), whose plan the session made
      // before, with index scans on, and keeps whatever the settings are now (PGlite sends kept statements
      // named: with the same text, this baseline read 1.04 ms where the sequential scan takes ~100 ms).
      await tx.query(`${sql}\n-- planned anew, index scans off`, params);
    });
    times.push(performance.now() - t0);
  }
  return times;
}

async function measure(db: Db, backend: string, rows: number): Promise<BenchRow[]> {
  const cap = capturing(db);
  const filter = { states: [...UNRESOLVED_STATES], limit: 50 };
  const first = await listOperations(cap.q, filter);
  if (first.length !== 50 || first.some((o) => !UNRESOLVED_STATES.includes(o.state))) {
    throw new Error(`${backend}: expected 50 unresolved operations, got ${first.length}`);
  }
  const { sql, params } = cap.last();
  const indexed: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    await listOperations(db, filter);
    indexed.push(performance.now() - t0);
  }
  const plan = await explain(db, sql, params);
  const usesIndex = plan.includes('operations_unresolved_idx');
  const seq = await withoutIndexes(db, sql, params, backend === 'pglite' ? 5 : 10);
  const target = backend === 'postgres' ? 50 : 300;
  const m = median(indexed);
  return [
    {
      bench: 'list-unresolved',
      name: `ops list --unresolved --limit 50, ${backend}, ${rows.toLocaleString('en')} ops (median of ${RUNS})`,
      value: round(m),
      unit: 'ms',
      target: `< ${target} ms`,
      baseline: round(median(seq)),
      baseline_of: 'same query, index scans off (seq scan + sort)',
      pass: m < target,
    },
    {
      bench: 'list-unresolved',
      name: `EXPLAIN uses operations_unresolved_idx, ${backend}`,
      value: usesIndex ? 1 : 0,
      unit: 'bool',
      target: '= 1',
      baseline: null,
      pass: usesIndex,
      note: usesIndex ? undefined : plan.split('\n')[0],
    },
  ];
}

/**
 * The re-plan guard's read (holderOf), which every proposal makes, for a payment intent no operation
 * has (the usual answer: no holder), on the same store: served by the payload's target index
 * (migration 0006), not by reading the whole history. Baseline: the same statement, index scans off.
 */
async function measureGuard(db: Db, backend: string, rows: number): Promise<BenchRow[]> {
  const cap = capturing(db);
  const proposal = (k: number) => ({
    id: `op-new-${k}`,
    provider: 'stripe',
    action: 'refund',
    payload: { amount: 1000, currency: 'usd', payment_intent: `pi_new_${k}` },
    client_reference: null,
  });
  if ((await holderOf(cap.q, proposal(0), 'stripe')) !== null) throw new Error(`${backend}: a holder for a new target`);
  const { sql, params } = cap.last();
  const held = await holderOf(
    db,
    { ...proposal(0), payload: { ...proposal(0).payload, payment_intent: 'pi_500' } },
    'stripe',
  );
  if (held?.id !== 'op-500') throw new Error(`${backend}: the guard did not find op-500 for pi_500 (${held?.id})`);
  const times: number[] = [];
  for (let i = 1; i <= RUNS; i++) {
    const t0 = performance.now();
    await holderOf(db, proposal(i), 'stripe');
    times.push(performance.now() - t0);
  }
  const plan = await explain(db, sql, params);
  const usesIndex = plan.includes('operations_payment_intent_idx');
  const seq = await withoutIndexes(db, sql, params, backend === 'pglite' ? 3 : 5);
  const target = backend === 'postgres' ? 50 : 300;
  const m = median(times);
  return [
    {
      bench: 'list-unresolved',
      name: `re-plan guard read of a proposal (no holder), ${backend}, ${rows.toLocaleString('en')} ops (median of ${RUNS})`,
      value: round(m),
      unit: 'ms',
      target: `< ${target} ms`,
      baseline: round(median(seq)),
      baseline_of: 'same statement, index scans off',
      pass: m < target,
    },
    {
      bench: 'list-unresolved',
      name: `EXPLAIN of the re-plan guard uses operations_payment_intent_idx, ${backend}`,
      value: usesIndex ? 1 : 0,
      unit: 'bool',
      target: '= 1',
      baseline: null,
      pass: usesIndex,
      note: usesIndex ? undefined : plan.replace(/\s+/g, ' '),
    },
  ];
}

export const listUnresolved: Benchmark = {
  name: 'list-unresolved',
  async run(ctx: BenchContext) {
    const rows: BenchRow[] = [];
    // --quick loads 100k rows on PostgreSQL and 50k on PGlite to stay within its 2 minutes; the full run
    // loads 1M on PostgreSQL and 200k on PGlite (whose load alone took 2 minutes at 1M on 2 busy cores).
    const pgRows = ctx.quick ? 100_000 : 1_000_000;
    {
      const { db } = await freshPgStore(ctx);
      try {
        const t0 = performance.now();
        await load(db, pgRows);
        ctx.log(`  postgres: loaded ${pgRows} operations in ${Math.round(performance.now() - t0)} ms`);
        rows.push(...(await measure(db, 'postgres', pgRows)), ...(await measureGuard(db, 'postgres', pgRows)));
      } finally {
        await db.close();
      }
    }
    {
      const liteRows = ctx.quick ? 50_000 : 200_000;
      const dir = mkdir(ctx, 'pglite-list');
      const db = await openStore(`pglite:${path.join(dir, 'db')}`);
      try {
        const t0 = performance.now();
        await load(db, liteRows);
        ctx.log(`  pglite: loaded ${liteRows} operations in ${Math.round(performance.now() - t0)} ms`);
        rows.push(...(await measure(db, 'pglite', liteRows)), ...(await measureGuard(db, 'pglite', liteRows)));
      } finally {
        await db.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }
    return rows;
  },
};
