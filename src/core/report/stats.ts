import { prometheusText } from '../../lib/prometheus.js';
import type { Db, Queryable } from '../../store/db.js';
import { countDuplicates } from '../audit/duplicates.js';
import { UNRESOLVED_SQL } from '../journal/states.js';

/** `recon stats`: where the backlog is, how fast it resolves, how often humans are needed. */
export interface Stats {
  since: string | null;
  unresolved: { state: string; age_bucket: string; count: number }[];
  unresolved_total: number;
  by_state: Record<string, number>;
  /** Operations recon found with several provider transactions (review reason duplicate). */
  duplicate_actions: number;
  /** Duplicate groups found by `audit duplicates` in the provider ledger index. */
  ledger_duplicate_groups: number | null;
  time_to_reconciliation_seconds: { count: number; p50: number | null; p90: number | null; p99: number | null };
  attempts_per_operation: {
    operations: number;
    mean: number | null;
    max: number | null;
    histogram: Record<string, number>;
  };
  escalations: number;
}

export const AGE_BUCKETS: [string, number][] = [
  ['<10m', 10 * 60],
  ['10m-1h', 3600],
  ['1h-24h', 24 * 3600],
  ['1d-3d', 3 * 24 * 3600],
  ['>3d', Number.POSITIVE_INFINITY],
];

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: number[], p: number): number | null {
  if (!sorted.length) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1];
}

/**
 * Everything is counted and ranked by the database: no row is streamed into JS (on a million
 * operations that was 990k rows and 178 MiB to sort percentiles here), from operations_stats_idx
 * (migration 7: the state, attempts and review reason, with the three timestamps stats reads), never
 * the table's rows, whose columns sit behind the payload. Three statements, side by side on the
 * pool's connections (PostgreSQL; one after the other on PGlite):
 *
 * - the counts by state, attempts and review reason (duplicates are one reason), with the count
 *   created in the `--since` window beside each: a read of the index in its key order, grouped as it
 *   comes (a dozen groups, no hash table). On a million operations the planner prefers the table and
 *   a hash aggregate, which took twice as long here (npm run bench, stats), or parallel workers,
 *   which on two cores compete with the percentiles' sort beside it (interleaved runs of the three
 *   statements on 1,000,000 operations: median 477 ms without them, 600 ms with): the statement's
 *   transaction turns all three off for it.
 * - the unresolved operations' age buckets: a range of the index (the unresolved states only). The
 *   bucket is found by comparing the operation's start with `now` minus each bound: the comparisons
 *   of AGE_BUCKETS (upper bound exclusive) on exact timestamps. Every unresolved operation counts,
 *   `--since` or not.
 * - one sort for the three percentiles (the array form of the ordered-set aggregate), in memory:
 *   at the default work_mem (4MB) a million durations spill to disk and the sort takes several times
 *   longer. Percentiles are `percentile_disc`, the nearest-rank percentile of `percentile()` above
 *   (the first value whose rank reaches ceil(p · n)), so the figures are exactly what they were when
 *   computed in JS; `percentile_cont` would interpolate between two values and report a time no
 *   operation took. The sort key is the duration in whole microseconds (bigint: PostgreSQL's own
 *   resolution, and a cheaper sort than float8), reached through float8 `date_part` rather than
 *   `extract`, whose numeric result costs a quarter of the pass; seconds are microseconds / 1e6 in JS,
 *   the same double `extract(...)::float8` gave.
 */
export async function computeStats(q: Queryable, o: { now: Date; since?: Date }): Promise<Stats> {
  const since = o.since?.toISOString() ?? null;
  const bounds = AGE_BUCKETS.filter(([, max]) => Number.isFinite(max)).map(([, max]) =>
    new Date(o.now.getTime() - max * 1000).toISOString(),
  );
  const countsSql = `SELECT state, attempt_count, review_reason = 'duplicate' AS dup,
            count(*) FILTER (WHERE $1::timestamptz IS NULL OR created_at >= $1::timestamptz)::int AS in_window
       FROM recon.operations
      GROUP BY state, attempt_count, review_reason`;
  const bucketsSql = `SELECT state, CASE ${bounds.map((_, i) => `WHEN coalesce(first_attempt_at, created_at) > $${i + 1}::timestamptz THEN ${i}`).join(' ')}
                         ELSE ${bounds.length} END AS bucket, count(*)::int AS n
       FROM recon.operations WHERE state IN ${UNRESOLVED_SQL}
      GROUP BY 1, 2`;
  const ttrSql = `SELECT count(*)::int AS n,
            percentile_disc(ARRAY[0.5, 0.9, 0.99]) WITHIN GROUP (ORDER BY (date_part('epoch', resolved_at - first_attempt_at) * 1000000)::bigint) AS p
       FROM recon.operations
      WHERE resolved_at IS NOT NULL AND first_attempt_at IS NOT NULL AND state IN ('confirmed', 'failed')
        AND ($1::timestamptz IS NULL OR resolved_at >= $1::timestamptz)`;
  type CountRow = { state: string; attempt_count: number; dup: boolean | null; in_window: number };
  type BucketRow = { state: string; bucket: number; n: number };
  type TtrRow = { n: number; p: (string | number)[] | null };
  /** The statement in a transaction of its own with these settings (PostgreSQL), else as it is (PGlite: one connection). */
  const withSettings = <T>(settings: string[], sql: string, params: unknown[]) =>
    'transaction' in q
      ? (q as Db).transaction(async (tx) => {
          for (const setting of settings) await tx.query(`SET LOCAL ${setting}`);
          return tx.query<T>(sql, params);
        })
      : q.query<T>(sql, params);
  const [counts, buckets, ttr, esc, audited] = await Promise.all([
    withSettings<CountRow>(
      ['enable_seqscan = off', 'enable_hashagg = off', 'max_parallel_workers_per_gather = 0'],
      countsSql,
      [since],
    ),
    q.query<BucketRow>(bucketsSql, bounds),
    withSettings<TtrRow>(["work_mem = '64MB'"], ttrSql, [since]),
    q.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM recon.audit_events WHERE to_state = 'needs_review' AND from_state IS DISTINCT FROM 'needs_review'
          AND ($1::timestamptz IS NULL OR at >= $1::timestamptz)`,
      [since],
    ),
    q.query<{ n: number }>('SELECT count(*)::int AS n FROM recon.audit_scans'),
  ]);
  const histogram: Record<string, number> = {};
  const byState: Record<string, number> = {};
  const unresolved: Stats['unresolved'] = [];
  let ops = 0;
  let sum = 0;
  let max: number | null = null;
  let duplicateActions = 0;
  const attempts = new Map<number, number>();
  for (const r of buckets.rows) {
    const age_bucket = AGE_BUCKETS[Number(r.bucket)][0];
    unresolved.push({ state: r.state, age_bucket, count: Number(r.n) });
  }
  for (const r of counts.rows) {
    const n = Number(r.in_window);
    if (!n) continue;
    byState[r.state] = (byState[r.state] ?? 0) + n;
    if (r.dup) duplicateActions += n;
    const a = Number(r.attempt_count);
    if (a > 0) attempts.set(a, (attempts.get(a) ?? 0) + n);
  }
  for (const [a, n] of [...attempts].sort(([x], [y]) => x - y)) {
    histogram[String(a)] = n;
    ops += n;
    sum += a * n;
    max = Math.max(max ?? 0, a);
  }
  // The same groups `audit duplicates` reports (by operation id, by client reference, same charge and
  // amount within 24h), so the two commands never disagree; null until an audit has read a ledger.
  const ledgerGroups = Number(audited.rows[0].n) > 0 ? await countDuplicates(q, {}) : null;

  const unresolvedTotal = unresolved.reduce((total, u) => total + u.count, 0);
  const t = ttr.rows[0];
  const seconds = (us: string | number | null | undefined) =>
    us === null || us === undefined ? null : Number(us) / 1e6;
  return {
    since,
    unresolved: unresolved.sort(
      (a, b) =>
        a.state.localeCompare(b.state) ||
        AGE_BUCKETS.findIndex((x) => x[0] === a.age_bucket) - AGE_BUCKETS.findIndex((x) => x[0] === b.age_bucket),
    ),
    unresolved_total: unresolvedTotal,
    by_state: byState,
    duplicate_actions: duplicateActions,
    ledger_duplicate_groups: ledgerGroups,
    time_to_reconciliation_seconds: {
      count: Number(t.n),
      p50: seconds(t.p?.[0]),
      p90: seconds(t.p?.[1]),
      p99: seconds(t.p?.[2]),
    },
    attempts_per_operation: { operations: ops, mean: ops ? sum / ops : null, max, histogram },
    escalations: Number(esc.rows[0].n),
  };
}

export function statsPrometheus(s: Stats): string {
  const ttr = s.time_to_reconciliation_seconds;
  const quantiles = [
    ['0.5', ttr.p50],
    ['0.9', ttr.p90],
    ['0.99', ttr.p99],
  ] as const;
  return prometheusText([
    {
      name: 'recon_unresolved_operations_by_age',
      help: 'Unresolved operations by state and age bucket.',
      type: 'gauge',
      samples: s.unresolved.map((u) => ({ labels: { state: u.state, age: u.age_bucket }, value: u.count })),
    },
    {
      name: 'recon_operations',
      help: 'Operations by state.',
      type: 'gauge',
      samples: Object.entries(s.by_state).map(([state, n]) => ({ labels: { state }, value: n })),
    },
    {
      name: 'recon_duplicate_actions',
      help: 'Operations with several provider transactions.',
      type: 'gauge',
      samples: [{ value: s.duplicate_actions }],
    },
    {
      name: 'recon_time_to_reconciliation_seconds',
      help: 'Time from first attempt to resolution.',
      type: 'summary',
      samples: [
        ...quantiles.flatMap(([quantile, v]) => (v === null ? [] : [{ labels: { quantile }, value: v }])),
        { suffix: '_count', value: ttr.count },
      ],
    },
    {
      name: 'recon_attempts_per_operation_mean',
      help: 'Mean attempts per attempted operation.',
      type: 'gauge',
      samples: [{ value: s.attempts_per_operation.mean ?? 0 }],
    },
    { name: 'recon_escalations', help: 'Moves into needs_review.', type: 'gauge', samples: [{ value: s.escalations }] },
  ]);
}
