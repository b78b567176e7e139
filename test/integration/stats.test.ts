/**
 * `recon stats` over a store with a known history, built through the core with a clock the test
 * sets: the backlog by state and age, time to reconciliation percentiles, attempts per operation,
 * escalations and duplicate actions, `--since`, the Prometheus text, and the CLI's `--json`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimAttempt } from '../../src/core/attempt/claims.js';
import type { CoreContext } from '../../src/core/journal/context.js';
import { scanLedger } from '../../src/core/audit/duplicates.js';
import { recordOperations } from '../../src/core/intake/record.js';
import { computeStats, statsPrometheus, type Stats } from '../../src/core/report/stats.js';
import { transition } from '../../src/core/journal/transition.js';
import { validateOperation } from '../../src/core/intake/validate.js';
import type { Db } from '../../src/store/db.js';
import { openStore } from '../../src/store/open.js';
import type { Provider, ProviderTxn, State } from '../../src/types.js';
import { listedRefund, listingProvider } from '../support/listing-provider.js';
import { backends, removeTempStores, type Backend } from '../support/backends.js';
import { runInProcess } from '../support/in-process.js';
import { parsePrometheus } from '../support/prometheus.js';

const S = 1000;
const M = 60 * S;
const H = 60 * M;
const D = 24 * H;
/** Long before the real clock, so that what the CLI (real clock) reports does not depend on when the test runs. */
const T0 = Date.parse('2024-01-01T00:00:00Z');
const NOW = T0 + 30 * D;
const SINCE = T0 + 10 * D;

/** The store's history, moved through the core (recordOperations, claimAttempt, transition) at set times. */
async function buildHistory(db: Db): Promise<void> {
  let clock = T0;
  const ctx: CoreContext = { db, actor: 'stats-test', now: () => new Date(clock) };
  const record = async (id: string, at: number, approved = true) => {
    clock = at;
    const input = validateOperation(
      {
        id,
        provider: 'stripe',
        action: 'refund',
        payload: { payment_intent: `pi_${id}`, amount: 1000, currency: 'usd' },
        ...(approved ? { approval: 'T-1' } : {}),
      },
      ['stripe'],
    );
    await recordOperations(ctx, [input]);
  };
  const attempt = async (id: string, at: number, from: 'approved' | 'outcome_unknown' = 'approved') => {
    clock = at;
    await claimAttempt(ctx, id, { owner: `w-${id}`, leaseMs: 2 * M, from, rule: 'test.attempt' });
  };
  const move = async (id: string, to: State, at: number, review_reason?: string) => {
    clock = at;
    await db.transaction((tx) =>
      // by a person: this history includes reviews resolved (only a person leaves needs_review).
      transition(tx, id, to, {
        actor: ctx.actor,
        now: new Date(at),
        kind: 'test.move',
        rule: 'test',
        review_reason,
        by: 'person',
      }),
    );
  };

  // 100 resolved operations, k = 1..100, resolved exactly k seconds after their first attempt, in shuffled
  // order; the first half on day 1, the second half on day 20. k % 7 = 0 fail; k = 25/50/75/100 took 3
  // attempts, the other multiples of 10 took 2.
  const ks = Array.from({ length: 100 }, (_, i) => i + 1).sort((a, b) => ((a * 37) % 101) - ((b * 37) % 101));
  for (const k of ks) {
    const id = `r${k}`;
    const start = (k <= 50 ? T0 + D : T0 + 20 * D) + k * M;
    await record(id, start - M);
    await attempt(id, start);
    const attempts = k % 25 === 0 ? 3 : k % 10 === 0 ? 2 : 1;
    for (let a = 2; a <= attempts; a++) {
      await move(id, 'outcome_unknown', start + (a - 1) * 100);
      await attempt(id, start + (a - 1) * 100 + 50, 'outcome_unknown');
    }
    await move(id, k % 7 === 0 ? 'failed' : 'confirmed', start + k * S);
  }
  // Day 1: cancelled before any attempt; a mismatch cancelled by review; a duplicate confirmed by review an hour after the first attempt.
  await record('c1', T0 + D);
  await move('c1', 'cancelled', T0 + D + M);
  await record('rc1', T0 + D);
  await attempt('rc1', T0 + D + M);
  await move('rc1', 'outcome_unknown', T0 + D + 2 * M);
  await move('rc1', 'needs_review', T0 + D + 3 * M, 'mismatch');
  await move('rc1', 'cancelled', T0 + D + 4 * M);
  await record('rd1', T0 + D);
  await attempt('rd1', T0 + D + M);
  await move('rd1', 'outcome_unknown', T0 + D + M + 10 * S);
  await move('rd1', 'needs_review', T0 + D + M + 20 * S, 'duplicate');
  await move('rd1', 'confirmed', T0 + D + M + H);
  await record('a1', T0 + D);
  await record('p1', T0 + D, false);
  // The backlog at NOW, each first attempted `age` before it.
  const backlog: [string, number, State, string?][] = [
    ['u1', 5 * M, 'outcome_unknown'],
    ['u2', 1 * M, 'submitting'],
    ['u3', 30 * M, 'outcome_unknown'],
    ['u4', 2 * H, 'pending'],
    ['u5', 2 * D, 'needs_review', 'duplicate'],
    ['u6', 5 * D, 'needs_review', 'stale'],
    ['u7', 10 * D, 'outcome_unknown'],
    ['u8', 10 * M, 'outcome_unknown'],
  ];
  for (const [id, age, state, reason] of backlog) {
    await record(id, NOW - age - M);
    await attempt(id, NOW - age);
    if (state === 'submitting') continue;
    if (state === 'needs_review') {
      await move(id, 'outcome_unknown', NOW - age + S);
      await move(id, 'needs_review', NOW - age + 2 * S, reason);
    } else await move(id, state, NOW - age + S);
  }
}

/** A provider whose ledger holds two duplicate groups (one order twice; one charge twice within a minute) and a clean refund. */
function fakeLedger(): Provider {
  const txn = (id: string, o: Partial<ProviderTxn>): ProviderTxn => listedRefund(id, new Date(T0), o);
  const ledger = [
    txn('re_1', { client_reference: 'order_1', operation_id: 'op_1', group: 'ch_a', amount: 100 }),
    txn('re_2', { client_reference: 'order_1', group: 'ch_b', amount: 200 }),
    txn('re_3', { group: 'ch_c', created: new Date(T0 + 5 * D) }),
    txn('re_4', { group: 'ch_c', created: new Date(T0 + 5 * D + M) }),
    txn('re_5', { operation_id: 'op_5', group: 'ch_d' }),
  ];
  return listingProvider(ledger);
}

const EXPECTED_BY_STATE = {
  confirmed: 87,
  failed: 14,
  cancelled: 2,
  outcome_unknown: 4,
  submitting: 1,
  pending: 1,
  needs_review: 2,
  approved: 1,
  proposed: 1,
};
const EXPECTED_UNRESOLVED = [
  { state: 'needs_review', age_bucket: '1d-3d', count: 1 },
  { state: 'needs_review', age_bucket: '>3d', count: 1 },
  { state: 'outcome_unknown', age_bucket: '<10m', count: 1 },
  { state: 'outcome_unknown', age_bucket: '10m-1h', count: 2 },
  { state: 'outcome_unknown', age_bucket: '>3d', count: 1 },
  { state: 'pending', age_bucket: '1h-24h', count: 1 },
  { state: 'submitting', age_bucket: '<10m', count: 1 },
];
// TTR: 1..100 s and the review's 3600 s → 101 values; nearest rank: p50 the 51st, p90 the 91st, p99 the 100th (not the max).
const EXPECTED_TTR = { count: 101, p50: 51, p90: 91, p99: 100 };
const EXPECTED_ATTEMPTS = { operations: 110, mean: 126 / 110, max: 3, histogram: { '1': 98, '2': 8, '3': 4 } };
// Since day 10: k = 51..100 (7 failed), the backlog; p50 = 75, p90 = 95, p99 = 100 over 50 values.
const EXPECTED_SINCE = {
  by_state: { confirmed: 43, failed: 7, outcome_unknown: 4, submitting: 1, pending: 1, needs_review: 2 },
  time_to_reconciliation_seconds: { count: 50, p50: 75, p90: 95, p99: 100 },
  attempts_per_operation: { operations: 58, mean: (52 + 8 + 6) / 58, max: 3, histogram: { '1': 52, '2': 4, '3': 2 } },
  escalations: 2,
  duplicate_actions: 1,
};

describe.each(backends)('recon stats on $name', (backend: Backend) => {
  let url: string;
  let db: Db | null = null;

  beforeAll(async () => {
    url = await backend.migratedUrl();
    db = await openStore(url);
    await buildHistory(db);
  });

  afterAll(async () => {
    await db?.close();
    removeTempStores();
  });

  it('reports the backlog by state and age, percentiles, attempts, escalations and duplicate actions', async () => {
    const s = await computeStats(db!, { now: new Date(NOW) });
    expect(s.since).toBeNull();
    expect(s.unresolved).toEqual(EXPECTED_UNRESOLVED);
    expect(s.unresolved_total).toBe(8);
    expect(s.by_state).toEqual(EXPECTED_BY_STATE);
    expect(s.time_to_reconciliation_seconds).toEqual(EXPECTED_TTR);
    expect(s.attempts_per_operation.mean).toBeCloseTo(EXPECTED_ATTEMPTS.mean, 12);
    expect(s.attempts_per_operation).toEqual({ ...EXPECTED_ATTEMPTS, mean: s.attempts_per_operation.mean });
    // u5, u6, rc1, rd1 moved into needs_review; u5 and rd1 for a duplicate.
    expect(s.escalations).toBe(4);
    expect(s.duplicate_actions).toBe(2);
    // No audit has run: nothing is known about the provider's ledger.
    expect(s.ledger_duplicate_groups).toBeNull();
  });

  it('--since keeps what was created, resolved or escalated since; the backlog stays whole', async () => {
    const s = await computeStats(db!, { now: new Date(NOW), since: new Date(SINCE) });
    expect(s.since).toBe(new Date(SINCE).toISOString());
    expect(s).toMatchObject({
      ...EXPECTED_SINCE,
      attempts_per_operation: {
        ...EXPECTED_SINCE.attempts_per_operation,
        mean: expect.closeTo(EXPECTED_SINCE.attempts_per_operation.mean, 12),
      },
    });
    expect(s.unresolved).toEqual(EXPECTED_UNRESOLVED);
  });

  it('counts every duplicate group the ledger audit finds, not only those by operation id', async () => {
    const ctx: CoreContext = { db: db!, actor: 'stats-test', now: () => new Date(NOW) };
    await scanLedger(ctx, fakeLedger(), { full: true });
    const s = await computeStats(db!, { now: new Date(NOW) });
    expect(s.ledger_duplicate_groups).toBe(2);
  });

  it('prints valid Prometheus text with the same numbers', async () => {
    const s = await computeStats(db!, { now: new Date(NOW) });
    const families = parsePrometheus(statsPrometheus(s));
    expect(families.get('recon_unresolved_operations_by_age')!.samples).toContainEqual({
      name: 'recon_unresolved_operations_by_age',
      labels: { state: 'outcome_unknown', age: '10m-1h' },
      value: 2,
    });
    expect(families.get('recon_operations')!.samples).toContainEqual({
      name: 'recon_operations',
      labels: { state: 'confirmed' },
      value: 87,
    });
    const ttr = families.get('recon_time_to_reconciliation_seconds')!;
    expect(ttr.type).toBe('summary');
    expect(ttr.samples).toContainEqual({
      name: 'recon_time_to_reconciliation_seconds',
      labels: { quantile: '0.99' },
      value: 100,
    });
    expect(ttr.samples).toContainEqual({ name: 'recon_time_to_reconciliation_seconds_count', labels: {}, value: 101 });
    expect(families.get('recon_escalations')!.samples[0].value).toBe(4);
    expect(families.get('recon_duplicate_actions')!.samples[0].value).toBe(2);
  });

  it('recon stats --json and --format prometheus through the CLI give the same numbers', async () => {
    const env = { RECON_DB: url };
    // In process, on the store this file already holds open (PGlite: one open instance at a time).
    const recon = (args: string[], opts: { env: Record<string, string> }) =>
      runInProcess(args, { ...opts, store: db! });
    const r = await recon(['stats', '--json'], { env });
    expect(r.code, r.stderr).toBe(0);
    const s: Stats = r.json;
    // The real clock is years after NOW: the whole backlog is older than 3 days.
    expect(s.unresolved).toEqual([
      { state: 'needs_review', age_bucket: '>3d', count: 2 },
      { state: 'outcome_unknown', age_bucket: '>3d', count: 4 },
      { state: 'pending', age_bucket: '>3d', count: 1 },
      { state: 'submitting', age_bucket: '>3d', count: 1 },
    ]);
    expect(s).toMatchObject({
      unresolved_total: 8,
      by_state: EXPECTED_BY_STATE,
      time_to_reconciliation_seconds: EXPECTED_TTR,
      escalations: 4,
      duplicate_actions: 2,
      ledger_duplicate_groups: 2,
    });
    expect(s.attempts_per_operation.histogram).toEqual(EXPECTED_ATTEMPTS.histogram);

    const since = await recon(['stats', '--json', '--since', new Date(SINCE).toISOString()], { env });
    expect(since.code, since.stderr).toBe(0);
    expect(since.json).toMatchObject({
      ...EXPECTED_SINCE,
      attempts_per_operation: { histogram: EXPECTED_SINCE.attempts_per_operation.histogram },
    });

    const prom = await recon(['stats', '--format', 'prometheus'], { env });
    expect(prom.code, prom.stderr).toBe(0);
    const families = parsePrometheus(prom.stdout);
    expect(families.get('recon_time_to_reconciliation_seconds')!.samples).toContainEqual({
      name: 'recon_time_to_reconciliation_seconds',
      labels: { quantile: '0.5' },
      value: 51,
    });

    const human = await recon(['stats'], { env });
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).not.toBe('');

    const bad = await recon(['stats', '--format', 'xml'], { env });
    expect(bad.code).toBe(2);
    expect(bad.stdout).toBe('');
  });
});
