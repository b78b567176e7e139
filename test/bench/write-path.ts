/**
 * The decision write path alone: 4 workers (4 connections, one process) write reconciliation
 * decisions for their claimed operations in groups of 50 — observation, linked transaction, state
 * change with lease release, chained audit event — through `historiesOf` + `applyDecisions`, the
 * functions `recon run` uses. Baseline, in the same run on the same server at the same group size:
 * the same rows written by plain SQL (one transaction per group: the four INSERT/UPDATE statements
 * and nothing else, hashes precomputed). Half the operations are found (confirm, linked), half not
 * (wait: observation, event, lease released), on both sides. Target: recon ≥ 50% of raw SQL. The server runs with
 * default durability, so each group pays for its commit's WAL flush, as it does for users.
 */
import { performance } from 'node:perf_hooks';
import { historiesOf, type History } from '../../src/core/journal/history.js';
import { lookupDetail } from '../../src/core/journal/decision-json.js';
import { planDecision } from '../../src/core/reconcile/plan.js';
import { applyDecisions } from '../../src/core/reconcile/write-decisions.js';
import type { CoreContext } from '../../src/core/journal/context.js';
import { loadConfig } from '../../src/config/load.js';
import type { Db } from '../../src/store/db.js';
import type { Operation } from '../../src/types.js';
import { rowToOperation, type OperationRow } from '../../src/core/journal/operations.js';
import { freshPgStore, mkdir, round, writeStripeConfig, type BenchContext, type Benchmark } from './lib.js';
import { instantProvider, opId, seedOperations } from './seed.js';

const WORKERS = 4;
const GROUP = 50;

async function claimAll(db: Db, prefix: string, n: number): Promise<string[]> {
  const owners = Array.from({ length: WORKERS }, (_, w) => `bench-${prefix}-${w}`);
  await db.query(
    `UPDATE recon.operations SET lease_owner = 'bench-${prefix}-' || (substring(id from '[0-9]+$')::int % ${WORKERS}),
            lease_expires_at = now() + interval '1 hour'
      WHERE id LIKE 'op-${prefix}-%'`,
  );
  void n;
  return owners;
}

async function recon(ctx: BenchContext, n: number): Promise<{ ms: number; cpuMs: number }> {
  const store = await freshPgStore(ctx);
  try {
    const now = new Date();
    await seedOperations(store.db, 'w', n, now);
    const owners = await claimAll(store.db, 'w', n);
    const dir = mkdir(ctx, 'write-path');
    const config = await loadConfig({
      flag: writeStripeConfig(dir, { db: store.url, apiBase: 'http://127.0.0.1:9', apiKey: 'sk_test_unused' }),
      env: {},
      cwd: dir,
    });
    const provider = instantProvider('w', config.providers.stripe.capabilities);
    const core: CoreContext = { db: store.db, actor: 'bench', now: () => new Date() };
    // The claimed rows, as claimForRun returns them: the claim is not what this measures.
    const all = await store.db.query<OperationRow>('SELECT * FROM recon.operations ORDER BY id');
    const byId = new Map(all.rows.map((r) => [r.id, { ...rowToOperation(r), lease_owner: r.lease_owner }]));
    // Histories are read with the claim (recon run reads a claimed batch's at once, while the provider
    // answers): not part of the write path.
    const groups: { owner: string; ops: Operation[]; histories: Map<string, History> }[][] = [];
    for (const [w, owner] of owners.entries()) {
      const ids = Array.from({ length: n }, (_, i) => i).filter((i) => i % WORKERS === w);
      const mine: { owner: string; ops: Operation[]; histories: Map<string, History> }[] = [];
      for (let k = 0; k < ids.length; k += GROUP) {
        const ops = ids.slice(k, k + GROUP).map((i) => byId.get(opId('w', i))!);
        mine.push({ owner, ops, histories: await historiesOf(store.db, ops) });
      }
      groups.push(mine);
    }
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await Promise.all(
      groups.map(async (mine) => {
        for (const { owner, ops, histories } of mine) {
          const plans = await Promise.all(
            ops.map(async (op) =>
              planDecision(core, provider, op, await provider.lookup({ operation_id: op.id }), histories.get(op.id)!),
            ),
          );
          const applied = await applyDecisions(core, plans, owner);
          const bad = applied.find((a) => !a.ok);
          if (bad && !bad.ok) throw bad.error;
        }
      }),
    );
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const events = await store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM recon.audit_events');
    if (Number(events.rows[0].n) !== n) throw new Error(`expected ${n} audit events, found ${events.rows[0].n}`);
    return { ms, cpuMs: (cpu.user + cpu.system) / 1000 };
  } finally {
    await store.db.close();
  }
}

/** The same rows by plain SQL, one transaction per group of GROUP operations. */
async function raw(ctx: BenchContext, n: number): Promise<number> {
  const store = await freshPgStore(ctx);
  try {
    await seedOperations(store.db, 'x', n, new Date());
    const owners = await claimAll(store.db, 'x', n);
    const hash = 'f'.repeat(64);
    // The same JSON recon writes: the lookup's detail in the observation, explanation and lookup in the event.
    const found = lookupDetail({
      result: 'found',
      matches: [
        {
          provider_id: 're_x_0000',
          status: 'succeeded',
          state: 'confirmed',
          amount: 1000,
          currency: 'usd',
          operation_id: 'op-x-0000',
          client_reference: null,
          group: 'pi_x_0000',
          created: new Date(),
        },
      ],
      candidates: [],
    });
    const observation = JSON.stringify(found);
    const event = JSON.stringify({
      explanation: 'exactly one matching transaction; amount and currency agree',
      lookup: found,
    });
    const t0 = performance.now();
    await Promise.all(
      owners.map(async (_owner, w) => {
        const ids = Array.from({ length: n }, (_, i) => i).filter((i) => i % WORKERS === w);
        for (let k = 0; k < ids.length; k += GROUP) {
          const group = ids.slice(k, k + GROUP).map((i) => opId('x', i));
          const at = new Date().toISOString();
          await store.db.transaction(async (tx) => {
            await tx.query(
              `INSERT INTO recon.observations (operation_id, observed_at, result, detail)
               SELECT id, $2::timestamptz, CASE WHEN even THEN 'found' ELSE 'not_found' END, detail
                 FROM unnest($1::text[], $3::jsonb[]) AS u(id, detail),
                      LATERAL (SELECT substring(id from '[0-9]+$')::int % 2 = 0 AS even) e`,
              [group, at, group.map(() => observation)],
            );
            await tx.query(
              `INSERT INTO recon.provider_transactions (provider, provider_id, operation_id, status, state, amount, currency,
                                                        linked_via, linked_at, linked_by)
               SELECT 'stripe', 're_' || id, id, 'succeeded', 'confirmed', 1000, 'usd', 'lookup', $2::timestamptz, 'bench'
                 FROM unnest($1::text[]) AS id WHERE substring(id from '[0-9]+$')::int % 2 = 0`,
              [group, at],
            );
            await tx.query(
              `UPDATE recon.operations
                  SET state = CASE WHEN substring(id from '[0-9]+$')::int % 2 = 0 THEN 'confirmed' ELSE state END,
                      updated_at = $2::timestamptz, resolved_at = $2::timestamptz,
                      last_checked_at = $2::timestamptz, lease_owner = NULL, lease_expires_at = NULL
                WHERE id = ANY($1::text[])`,
              [group, at],
            );
            await tx.query(
              `INSERT INTO recon.audit_events (operation_id, seq, at, actor, kind, from_state, to_state, rule, detail, prev_hash, hash)
               SELECT id, 1, $2::timestamptz, 'bench', 'reconcile.decision', 'outcome_unknown', 'confirmed', 'found.confirmed',
                      detail, $3, $3
                 FROM unnest($1::text[], $4::jsonb[]) AS u(id, detail)`,
              [group, at, hash, group.map(() => event)],
            );
          });
        }
      }),
    );
    return performance.now() - t0;
  } finally {
    await store.db.close();
  }
}

export const writePath: Benchmark = {
  name: 'write-path',
  async run(ctx: BenchContext) {
    const n = ctx.quick ? 4000 : 20_000;
    // Interleaved, twice each, best of two: machine noise hits both alike.
    const r1 = await recon(ctx, n);
    const b1 = await raw(ctx, n);
    const r2 = await recon(ctx, n);
    const b2 = await raw(ctx, n);
    const reconMs = Math.min(r1.ms, r2.ms);
    const rawMs = Math.min(b1, b2);
    const rate = n / (reconMs / 1000);
    const rawRate = n / (rawMs / 1000);
    const cpu = r1.ms <= r2.ms ? r1.cpuMs : r2.cpuMs;
    ctx.log(`  recon ${round(rate, 0)}/s, raw SQL ${round(rawRate, 0)}/s`);
    return [
      {
        bench: 'write-path',
        name: `decisions + audit writes, ${WORKERS} workers, group ${GROUP}, PostgreSQL default durability (${n} ops)`,
        value: round(rate, 0),
        unit: 'ops/s',
        target: '≥ 0.5 × raw SQL',
        baseline: round(rawRate, 0),
        baseline_of: `the same rows by plain SQL, one transaction per ${GROUP}`,
        ratio: round(rate / rawRate),
        pass: rate >= 0.5 * rawRate,
        note: `recon's JS CPU per decision ${round(cpu / n, 3)} ms (rule, hashing, statements)`,
      },
    ];
  },
};
