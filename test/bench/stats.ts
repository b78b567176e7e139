/**
 * `recon stats` on a large store: percentiles, buckets and counts are computed by PostgreSQL, so
 * the time is the store's and recon's memory stays flat. Time (in-process computeStats, median of 3)
 * ≤ 0.6 s on 1M operations, with a baseline of one bare scan of the table (`count(*)`) measured
 * alongside; peak RSS of `recon stats --json` against `recon ops list --limit 1` on the same store.
 */
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { computeStats } from '../../src/core/report/stats.js';
import type { Db } from '../../src/store/db.js';
import {
  expectExit,
  freshPgStore,
  median,
  mkdir,
  payloadSql,
  round,
  runRecon,
  writeStripeConfig,
  type BenchContext,
  type Benchmark,
} from './lib.js';

/** 90% confirmed (resolved 1 s to ~3 h after their first attempt), the rest spread over the unresolved states. */
async function load(db: Db, rows: number, now: Date): Promise<void> {
  const indexes = await db.query<{ name: string; def: string }>(
    `SELECT indexname AS name, indexdef AS def FROM pg_indexes
      WHERE schemaname = 'recon' AND tablename = 'operations' AND indexname <> 'operations_pkey'`,
  );
  for (const ix of indexes.rows) await db.query(`DROP INDEX recon.${ix.name}`);
  const p = payloadSql(`'pi_' || g`, '1000 + g % 5000');
  await db.query(
    `INSERT INTO recon.operations (id, provider, action, payload, payload_hash, idempotency_key, state, amount, currency,
                                   attempt_count, created_at, updated_at, first_attempt_at, resolved_at, review_reason)
     SELECT 'op-' || g, 'stripe', 'refund', ${p.payload}, ${p.hash}, 'op-' || g,
            CASE WHEN g % 10 <> 0 THEN 'confirmed'
                 ELSE (ARRAY['submitting', 'pending', 'outcome_unknown', 'needs_review'])[1 + (g / 10) % 4] END,
            1000 + g % 5000, 'usd', 1 + (g % 7 = 0)::int,
            $1::timestamptz - (g % 400000) * interval '1 second', $1::timestamptz, $1::timestamptz - (g % 400000) * interval '1 second',
            CASE WHEN g % 10 <> 0 THEN $1::timestamptz - (g % 400000) * interval '1 second' + (1 + (g::bigint * 7919) % 10000) * interval '1 second' END,
            CASE WHEN g % 40 = 30 THEN 'duplicate' END
       FROM generate_series(1, $2::int) AS g`,
    [now.toISOString(), rows],
  );
  for (const ix of indexes.rows) await db.query(ix.def);
  // A million-row table in use has been vacuumed: without this, autovacuum's first pass over the
  // fresh rows (and the hint bits the first scan writes) would be timed as stats' own.
  await db.query('VACUUM (ANALYZE) recon.operations');
}

export const statsBench: Benchmark = {
  name: 'stats',
  async run(ctx: BenchContext) {
    const rows = ctx.quick ? 200_000 : 1_000_000;
    const store = await freshPgStore(ctx);
    const dir = mkdir(ctx, 'stats');
    try {
      const now = new Date();
      const t0 = performance.now();
      await load(store.db, rows, now);
      ctx.log(`  loaded ${rows} operations in ${Math.round(performance.now() - t0)} ms`);
      const times: number[] = [];
      const scans: number[] = [];
      for (let i = 0; i < 3; i++) {
        const s0 = performance.now();
        await store.db.query('SELECT count(*) FROM recon.operations');
        scans.push(performance.now() - s0);
        const c0 = performance.now();
        const stats = await computeStats(store.db, { now });
        times.push(performance.now() - c0);
        if (stats.time_to_reconciliation_seconds.count !== rows - rows / 10)
          throw new Error(`stats counted ${stats.time_to_reconciliation_seconds.count} resolved operations`);
      }
      const config = writeStripeConfig(dir, { db: store.url, apiBase: 'http://127.0.0.1:9', apiKey: 'sk_test_unused' });
      const cli = await runRecon(ctx, ['stats', '--json', '--config', config], { cwd: dir, measureRss: true });
      expectExit(cli, 'recon stats');
      const small = await runRecon(ctx, ['ops', 'list', '--json', '--limit', '1', '--config', config], {
        cwd: dir,
        measureRss: true,
      });
      expectExit(small, 'recon ops list --limit 1');
      const ms = median(times);
      const rss = cli.peakRssMb!;
      return [
        {
          bench: 'stats',
          name: `stats on ${rows.toLocaleString('en')} operations, PostgreSQL (computeStats, median of 3)`,
          value: round(ms / 1000, 3),
          unit: 's',
          target: '≤ 0.6 s',
          baseline: round(median(scans) / 1000, 3),
          baseline_of: 'one bare count(*) scan of the table',
          pass: ms <= 600,
        },
        {
          bench: 'stats',
          name: `recon stats --json on ${rows.toLocaleString('en')} operations: peak RSS`,
          value: round(rss, 1),
          unit: 'MB',
          target: '≤ 1.1 × ops list --limit 1 (flat)',
          baseline: round(small.peakRssMb!, 1),
          baseline_of: 'recon ops list --json --limit 1, same store',
          pass: rss <= 1.1 * small.peakRssMb!,
          note: `recon stats --json took ${Math.round(cli.ms)} ms as a process (start-up included)`,
        },
      ];
    } finally {
      await store.db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },
};
