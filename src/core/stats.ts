import type { Db, Queryable } from '../store/db.js';
import { countDuplicates } from './duplicates.js';
import { UNRESOLVED_SQL } from './states.js';

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
 * The age bucket of an unresolved operation, in SQL: the same comparisons as AGE_BUCKETS (an age in
 * float8 seconds, each bucket's upper bound exclusive).
 */
const AGE_BUCKET_SQL = `CASE ${AGE_BUCKETS.filter(([, max]) => Number.isFinite(max))
  .map(([name, max]) => `WHEN age < ${max} THEN '${name}'`)
  .join(' ')} ELSE '${AGE_BUCKETS[AGE_BUCKETS.length - 1][0]}' END`;

/**
 * Everything is counted and ranked by the database: no row is streamed into JS (on a million
 * operations that was 990k rows and 178 MiB to sort percentiles here). Percentiles are
 * `percentile_disc`, which is the nearest-rank percentile of `percentile()` above (the first value
 * whose rank reaches ceil(p · n)), so the figures are exactly what they were when computed in JS;
 * `percentile_cont` would interpolate between two values and report a time no operation took.
 */
export async function computeStats(q: Queryable, o: { now: Date; since?: Date }): Promise<Stats> {
  const now = o.now.toISOString();
  const since = o.since?.toISOString() ?? null;
  // One pass over the operations for the state counts, the duplicates and the attempts histogram
  // (grouping sets); the unresolved ones, few and under their partial index, for the age buckets.
  const counts = await q.query<{ state: string | null; attempt_count: number | null; n: number; dup: number }>(
    `SELECT state, attempt_count, count(*)::int AS n, count(*) FILTER (WHERE review_reason = 'duplicate')::int AS dup
       FROM recon.operations
      WHERE ($1::timestamptz IS NULL OR created_at >= $1::timestamptz)
      GROUP BY GROUPING SETS ((state), (attempt_count))`,
    [since],
  );
  const buckets = await q.query<{ state: string; age_bucket: string; n: number }>(
    `SELECT state, ${AGE_BUCKET_SQL} AS age_bucket, count(*)::int AS n
       FROM (SELECT state, extract(epoch FROM ($1::timestamptz - coalesce(first_attempt_at, created_at)))::float8 AS age
               FROM recon.operations WHERE state IN ${UNRESOLVED_SQL}) AS u
      GROUP BY 1, 2`,
    [now],
  );
  // One sort for the three percentiles (the array form of the aggregate), in memory: at the
  // default work_mem (4MB) a million durations spill to disk and the sort takes several times longer.
  const ttrSql = `SELECT count(*)::int AS n, percentile_disc(ARRAY[0.5, 0.9, 0.99]) WITHIN GROUP (ORDER BY s) AS p
       FROM (SELECT extract(epoch FROM (resolved_at - first_attempt_at))::float8 AS s FROM recon.operations
              WHERE resolved_at IS NOT NULL AND first_attempt_at IS NOT NULL AND state IN ('confirmed', 'failed')
                AND ($1::timestamptz IS NULL OR resolved_at >= $1::timestamptz)) AS r`;
  const ttr =
    'transaction' in q
      ? await (q as Db).transaction(async (tx) => {
          await tx.query("SET LOCAL work_mem = '64MB'");
          return tx.query<{ n: number; p: number[] | null }>(ttrSql, [since]);
        })
      : await q.query<{ n: number; p: number[] | null }>(ttrSql, [since]);
  const histogram: Record<string, number> = {};
  const byState: Record<string, number> = {};
  let ops = 0;
  let sum = 0;
  let max: number | null = null;
  let duplicateActions = 0;
  for (const r of counts.rows) {
    if (r.state !== null) {
      byState[r.state] = Number(r.n);
      duplicateActions += Number(r.dup);
    } else if (r.attempt_count !== null && Number(r.attempt_count) > 0) {
      histogram[String(r.attempt_count)] = Number(r.n);
      ops += Number(r.n);
      sum += Number(r.attempt_count) * Number(r.n);
      max = Math.max(max ?? 0, Number(r.attempt_count));
    }
  }
  const esc = await q.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM recon.audit_events WHERE to_state = 'needs_review' AND from_state IS DISTINCT FROM 'needs_review'
        AND ($1::timestamptz IS NULL OR at >= $1::timestamptz)`,
    [since],
  );
  // The same groups `audit duplicates` reports (by operation id, by client reference, same charge and
  // amount within 24h), so the two commands never disagree; null until an audit has read a ledger.
  const audited = await q.query<{ n: number }>('SELECT count(*)::int AS n FROM recon.audit_scans');
  const ledgerGroups = Number(audited.rows[0].n) > 0 ? await countDuplicates(q, {}) : null;

  const unresolved: Stats['unresolved'] = buckets.rows.map((r) => ({
    state: r.state,
    age_bucket: r.age_bucket,
    count: Number(r.n),
  }));
  const unresolvedTotal = unresolved.reduce((total, u) => total + u.count, 0);
  const t = ttr.rows[0];
  const num = (v: number | null | undefined) => (v === null || v === undefined ? null : Number(v));
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
    time_to_reconciliation_seconds: { count: Number(t.n), p50: num(t.p?.[0]), p90: num(t.p?.[1]), p99: num(t.p?.[2]) },
    attempts_per_operation: { operations: ops, mean: ops ? sum / ops : null, max, histogram },
    escalations: Number(esc.rows[0].n),
  };
}

export function statsPrometheus(s: Stats): string {
  const out: string[] = [];
  const head = (name: string, help: string, type = 'gauge') =>
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
  head('recon_unresolved_operations_by_age', 'Unresolved operations by state and age bucket.');
  for (const u of s.unresolved)
    out.push(`recon_unresolved_operations_by_age{state="${u.state}",age="${u.age_bucket}"} ${u.count}`);
  head('recon_operations', 'Operations by state.');
  for (const [state, n] of Object.entries(s.by_state)) out.push(`recon_operations{state="${state}"} ${n}`);
  head('recon_duplicate_actions', 'Operations with several provider transactions.');
  out.push(`recon_duplicate_actions ${s.duplicate_actions}`);
  head('recon_time_to_reconciliation_seconds', 'Time from first attempt to resolution.', 'summary');
  for (const [q, v] of [
    ['0.5', s.time_to_reconciliation_seconds.p50],
    ['0.9', s.time_to_reconciliation_seconds.p90],
    ['0.99', s.time_to_reconciliation_seconds.p99],
  ] as const) {
    if (v !== null) out.push(`recon_time_to_reconciliation_seconds{quantile="${q}"} ${v}`);
  }
  out.push(`recon_time_to_reconciliation_seconds_count ${s.time_to_reconciliation_seconds.count}`);
  head('recon_attempts_per_operation_mean', 'Mean attempts per attempted operation.');
  out.push(`recon_attempts_per_operation_mean ${s.attempts_per_operation.mean ?? 0}`);
  head('recon_escalations', 'Moves into needs_review.');
  out.push(`recon_escalations ${s.escalations}`);
  return out.join('\n') + '\n';
}
