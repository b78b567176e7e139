import { UNRESOLVED_STATES, type DecisionKind, type Operation, type Provider } from '../../types.js';
import { exitCodeOf, LeaseLostError } from '../../errors.js';
import { backingOff, claimCandidates, claimForRun, newOwnerToken, releaseLease } from '../attempt/claims.js';
import type { CoreContext } from '../journal/context.js';
import { limitConcurrency } from '../../lib/ratelimit.js';
import type { Applied, DecisionJson } from '../journal/decision-json.js';
import { decisionWriter } from './write-decisions.js';
import { historiesOf, type History } from '../journal/history.js';
import type { PlannedDecision } from './plan.js';
import { lookupQueryFor, reconcileOne } from './reconcile.js';
import { UNRESOLVED_SQL } from '../journal/states.js';

export interface RunOptions {
  provider?: string;
  /** At most this many operations in the pass. Default 10,000. */
  limit?: number;
  /** Overrides each provider's `concurrency`. */
  concurrency?: number;
  /** Decide and write nothing: no claims, no observations, no attempts. */
  dryRun?: boolean;
  /** Operations claimed per transaction. Default 200, or more for a large backlog (batchSize). */
  batchSize?: number;
  onProgress?: (done: number, claimed: number) => void;
}

/** The JSON shape of `recon run` (SPEC §7), plus a few added fields. */
export interface RunSummary {
  claimed: number;
  confirmed: number;
  failed: number;
  pending: number;
  retried: number;
  escalated: number;
  waiting: number;
  unavailable: number;
  decisions: DecisionJson[];
  errors: { id: string; error: string }[];
  /**
   * Claimed, but our lease ran out (or another worker took the operation over) before the decision
   * was written: nothing was written, the next pass (or that worker) decides. Not an error: on a
   * slow machine a pass can outlast its lease, and on PGlite no other process can have claimed it.
   */
  lease_expired: string[];
  needs_review_total: number;
  /**
   * Unresolved operations not looked at because their provider was unavailable at their last lookup
   * (they back off until `until`, ISO time): the same for `run` and `run --dry-run`. The first 100,
   * soonest first; `backing_off_total` counts them all.
   */
  backing_off: { id: string; until: string }[];
  backing_off_total: number;
  unresolved_by_state: Record<string, number>;
  duration_ms: number;
  dry_run: boolean;
}

export type ProviderSource = (name: string) => Promise<Provider>;

/**
 * One reconciliation pass over unresolved operations, in batches, each in phases: claim (SKIP
 * LOCKED, leases: several `recon run` processes against one PostgreSQL share the work without
 * overlap), then for each operation look up, decide and write (reconcileOne; decisions written in
 * groups), and at the end the summary. Each provider's lookups run with bounded concurrency (its
 * rate limit is enforced in the adapter). The dry run claims nothing and writes nothing; it decides
 * with the same code.
 */
export async function runPass(ctx: CoreContext, providers: ProviderSource, o: RunOptions = {}): Promise<RunSummary> {
  const started = Date.now();
  const limit = o.limit ?? 10_000;
  const startedAt = ctx.now();
  const owner = newOwnerToken(ctx.actor);
  // Unresolved operations per provider (at most `limit`): what this pass may decide.
  const backlog = new Map<string, number>();
  if (!o.dryRun) {
    const { rows } = await ctx.db.query<{ provider: string; n: number }>(
      `SELECT provider, count(*)::int AS n FROM recon.operations
        WHERE state IN ${UNRESOLVED_SQL} AND ($1::text IS NULL OR provider = $1::text)
        GROUP BY provider`,
      [o.provider ?? null],
    );
    for (const r of rows) backlog.set(r.provider, Math.min(Number(r.n), limit));
  }
  const pass: Pass = {
    ctx,
    providers,
    o,
    limit,
    startedAt,
    owner,
    // Decisions are written in groups (group commit): one transaction per decision made the store's
    // round trips the cost of a pass against a fast provider (see write-decisions.ts).
    write: decisionWriter(ctx, owner),
    summary: {
      claimed: 0,
      confirmed: 0,
      failed: 0,
      pending: 0,
      retried: 0,
      escalated: 0,
      waiting: 0,
      unavailable: 0,
      decisions: [],
      errors: [],
      lease_expired: [],
      needs_review_total: 0,
      backing_off: [],
      backing_off_total: 0,
      unresolved_by_state: {},
      duration_ms: 0,
      dry_run: Boolean(o.dryRun),
    },
    seen: [],
    backlog,
    limiters: new Map(),
  };
  // Batches overlap: the next one is claimed while this one is looked up, and its lookups start when
  // this one's last few lookups are in flight. Waiting for a whole batch before claiming the next left
  // the provider idle at every batch boundary (~5% of a rate-limited pass: npm run bench, reconcile),
  // and waiting for its decisions to be written as well left it idle during every commit (claims).
  const running: Promise<void>[] = [];
  let next = claimBatch(pass);
  for (;;) {
    if (pass.stopped !== undefined) break;
    const batch = await next;
    if (batch.ops.length === 0) break;
    // At most two batches at once: one looked up while the other's decisions are written. With no
    // bound, a store slower than the provider would pile up decisions under leases that may expire.
    if (running.length >= 2) await running[running.length - 2];
    next = claimBatch(pass);
    // Awaited at the top of the loop; marked handled now so that a failing claim is not reported as
    // an unhandled rejection while this batch runs.
    next.catch(() => undefined);
    const { decided, nearlyLookedUp } = decideBatch(pass, batch);
    running.push(decided);
    await nearlyLookedUp;
  }
  await Promise.all(running);
  if (pass.stopped !== undefined) throw pass.stopped;
  return summarise(pass, started);
}

/** What one pass holds while it runs. */
interface Pass {
  ctx: CoreContext;
  providers: ProviderSource;
  o: RunOptions;
  /** At most this many operations in the pass. */
  limit: number;
  /** When the pass began: what another worker's pass looked up since is not claimed (claimForRun). */
  startedAt: Date;
  /** Our lease token on every operation the pass claims. */
  owner: string;
  write: (plan: PlannedDecision) => Promise<Applied>;
  summary: RunSummary;
  /** Operations this pass already took (a `wait` releases its lease: it must not be claimed again). */
  seen: string[];
  /** What the pass may decide, per provider: a provider's prepareLookups weighs a scan against it. */
  backlog: Map<string, number>;
  /** Each provider's concurrency limit. */
  limiters: Map<string, <T>(task: () => Promise<T>) => Promise<T>>;
  /**
   * The store gone (exit 6), or a provider that refused our key (2: every lookup would be refused):
   * nothing more can be written or is asked of the provider (each lookup is one of the account's
   * reads, and a pass may have hundreds claimed); the pass ends with this error once what is in
   * flight has settled.
   */
  stopped?: Error;
}

/** A batch of claimed operations (for the dry run: candidates) and their histories. */
interface Batch {
  ops: Operation[];
  histories: Map<string, History>;
}

/** Operations claimed per transaction, at least. */
const BATCH = 200;
/** Operations claimed per transaction, at most. */
const MAX_BATCH = 5000;

/**
 * How many operations to claim at once: 200, or a quarter of the pass's backlog when that is more
 * (at most 5,000). A provider that answers a batch from one listing of its ledger (Stripe's scan)
 * lists its recent refunds again before each batch, so that no answer is older than the batch's
 * claim: a larger batch shares that listing among more operations (4 workers over 4,000 found
 * operations: 4 listings of the ledger instead of 20). Up to 5,000 so that 4 workers over a backlog
 * of up to 20,000 take a quarter each, one batch: with at most 2,000, 4 workers over 12,000 split
 * it 4,000/4,000/2,000/2,000 (the next batch is claimed while this one is looked up), and the two
 * with a second batch listed the uncertainty window's refunds again for it: 902 requests instead of
 * 548–600, and a quarter more of recon's CPU (npm run bench, claims). Two batches in flight hold at
 * most 10,000 operations and their histories in memory. Bounded by each provider's rate limit and
 * lease: this batch and the next one (claimed while this one is looked up), looked up one by one
 * at the rate limit, take at most half the lease (25/s and 2 minutes: 750 operations). A provider
 * without `prepareLookups` keeps batches of 200.
 */
function batchSize(pass: Pass, providers: Provider[]): number {
  let backlog = 0;
  for (const n of pass.backlog.values()) backlog += n;
  return claimSize(backlog, providers);
}

/** batchSize for a backlog and the pass's providers. */
export function claimSize(backlog: number, providers: Pick<Provider, 'capabilities' | 'prepareLookups'>[]): number {
  // Only where every provider of the pass prepares its batches: others gain nothing from a larger one.
  if (providers.length === 0 || providers.some((p) => !p.prepareLookups)) return BATCH;
  let size = Math.min(MAX_BATCH, Math.ceil(backlog / 4));
  for (const { capabilities: c } of providers) size = Math.min(size, Math.floor((c.rateLimit * c.leaseMs) / 1000 / 4));
  return Math.max(BATCH, size);
}

/**
 * Claim: the next batch under our leases, then its histories, read while nothing else may decide
 * these operations (we hold their leases), and meanwhile the providers told which lookups are
 * coming (prepareLookups). The dry run claims nothing: its one batch is every candidate.
 */
async function claimBatch(pass: Pass): Promise<Batch> {
  const { ctx, o } = pass;
  const left = pass.limit - pass.summary.claimed;
  if (left <= 0) return { ops: [], histories: new Map() };
  let ops: Operation[];
  // The dry run's one batch: what the claim would take, all at once (claimed by nothing).
  if (o.dryRun)
    ops = pass.seen.length ? [] : await claimCandidates(ctx.db, { now: ctx.now(), limit: left, provider: o.provider });
  else {
    // Each operation is claimed with its own provider's lease (which outlives that provider's
    // request timeout): a fixed 2 minutes blocked a 3 s provider's operations that long after a kill.
    let leaseMs = 120_000;
    const leaseMsByProvider = new Map<string, number>();
    const inPass: Provider[] = [];
    if (o.provider) {
      const p = await pass.providers(o.provider);
      leaseMs = p.capabilities.leaseMs;
      inPass.push(p);
    } else {
      const names = await ctx.db.query<{ provider: string }>(
        `SELECT DISTINCT provider FROM recon.operations WHERE state IN ${UNRESOLVED_SQL}`,
      );
      for (const { provider } of names.rows) {
        // A provider that cannot be built keeps the default; its operations are reported as errors.
        const p = await pass.providers(provider).catch(() => null);
        if (p) {
          leaseMsByProvider.set(provider, p.capabilities.leaseMs);
          inPass.push(p);
        }
      }
    }
    const size = Math.min(o.batchSize ?? batchSize(pass, inPass), left);
    ops = await claimForRun(ctx.db, {
      owner: pass.owner,
      leaseMs,
      leaseMsByProvider,
      now: ctx.now(),
      limit: size,
      provider: o.provider,
      exclude: pass.seen,
      checkedBefore: pass.startedAt,
    });
  }
  pass.summary.claimed += ops.length;
  pass.seen.push(...ops.map((op) => op.id));
  const [histories] = await Promise.all([historiesOf(ctx.db, ops), prepareLookups(pass, ops)]);
  return { ops, histories };
}

/** Each provider's `prepareLookups` with its operations of the batch; trouble here only means lookups one by one. */
async function prepareLookups(pass: Pass, batch: Operation[]): Promise<void> {
  const byProvider = new Map<string, Operation[]>();
  for (const op of batch) {
    const ops = byProvider.get(op.provider);
    if (ops) ops.push(op);
    else byProvider.set(op.provider, [op]);
  }
  await Promise.all(
    [...byProvider].map(async ([name, ops]) => {
      const provider = await pass.providers(name).catch(() => null);
      try {
        await provider?.prepareLookups?.(ops.map(lookupQueryFor), { backlog: pass.backlog.get(name) ?? ops.length });
      } catch {
        // A module provider's trouble: its operations are looked up one by one.
      }
    }),
  );
}

/** The batch's last lookups: when only this many are left, the next batch's lookups may start. */
const TAIL = 16;

/**
 * Look up, decide and write each operation of the batch (decideOne). `decided` settles when every
 * one is decided; `nearlyLookedUp` when all but the batch's last TAIL lookups have answered.
 */
function decideBatch(pass: Pass, batch: Batch): { decided: Promise<void>; nearlyLookedUp: Promise<void> } {
  let left = batch.ops.length;
  let tail!: () => void;
  const nearlyLookedUp = new Promise<void>((resolve) => (tail = resolve));
  if (left <= TAIL) tail();
  const decided = Promise.all(
    batch.ops.map((op) => {
      let looked = false;
      // Called when the operation's lookup has answered (or it will make none).
      const lookedUp = () => {
        if (looked) return;
        looked = true;
        if (--left <= TAIL) tail();
      };
      return decideOne(pass, op, batch.histories.get(op.id)!, lookedUp).finally(lookedUp);
    }),
  ).then(() => undefined);
  return { decided, nearlyLookedUp };
}

/** The summary's count of each kind of decision. */
const COUNTED = {
  confirm: 'confirmed',
  fail: 'failed',
  pending: 'pending',
  retry: 'retried',
  review: 'escalated',
  wait: 'waiting',
  unavailable: 'unavailable',
} as const satisfies Record<DecisionKind, keyof RunSummary>;

/**
 * One operation: its lookup under its provider's concurrency limit, the rule, the decision written
 * (reconcileOne; for the dry run, the same without writing), and the summary told. An error costs
 * only this operation (its lease is given back), except one that ends the pass (Pass.stopped).
 */
async function decideOne(pass: Pass, claimed: Operation, history: History, lookedUp: () => void): Promise<void> {
  const { ctx, o, summary } = pass;
  let provider: Provider;
  try {
    provider = await pass.providers(claimed.provider);
  } catch (err) {
    summary.errors.push({ id: claimed.id, error: (err as Error).message });
    if (!o.dryRun) await releaseLease(ctx.db, claimed.id, pass.owner);
    return;
  }
  const limiter =
    pass.limiters.get(provider.name) ?? limitConcurrency(o.concurrency ?? provider.capabilities.concurrency);
  pass.limiters.set(provider.name, limiter);
  try {
    const d = await reconcileOne(ctx, provider, claimed, {
      owner: pass.owner,
      dryRun: o.dryRun,
      history,
      write: pass.write,
      // The operation's first provider call is its lookup.
      limited: (call) =>
        limiter(async () => {
          if (pass.stopped !== undefined) throw pass.stopped;
          return call();
        }).finally(lookedUp),
    });
    summary.decisions.push(d);
    summary[COUNTED[d.decision]]++;
  } catch (err) {
    if (exitCodeOf(err) === 6 || exitCodeOf(err) === 2) pass.stopped ??= err as Error;
    if (err instanceof LeaseLostError) summary.lease_expired.push(claimed.id);
    else summary.errors.push({ id: claimed.id, error: (err as Error).message });
    if (!o.dryRun) await releaseLease(ctx.db, claimed.id, pass.owner).catch(() => undefined);
  }
  o.onProgress?.(summary.decisions.length + summary.errors.length, summary.claimed);
}

/** The summary's totals over the store (unresolved by state, backing off), read when the pass is done. */
async function summarise(pass: Pass, started: number): Promise<RunSummary> {
  const { ctx, o, summary } = pass;
  const states = await ctx.db.query<{ state: string; n: number }>(
    `SELECT state, count(*)::int AS n FROM recon.operations
      WHERE state IN ${UNRESOLVED_SQL} AND ($1::text IS NULL OR provider = $1::text)
      GROUP BY state`,
    [o.provider ?? null],
  );
  for (const s of UNRESOLVED_STATES) summary.unresolved_by_state[s] = 0;
  for (const r of states.rows) summary.unresolved_by_state[r.state] = Number(r.n);
  summary.needs_review_total = summary.unresolved_by_state.needs_review ?? 0;
  const waiting = await backingOff(ctx.db, o.provider, pass.startedAt);
  [summary.backing_off, summary.backing_off_total] = [waiting.list, waiting.total];
  summary.decisions.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  summary.duration_ms = Date.now() - started;
  return summary;
}
