import { UNRESOLVED_STATES, type Operation, type Provider } from '../../types.js';
import { exitCodeOf, LeaseLostError } from '../../errors.js';
import { claimForRun, newOwnerToken, releaseLease } from '../attempt/claims.js';
import type { CoreContext } from '../journal/context.js';
import { limitConcurrency } from '../../lib/ratelimit.js';
import { decisionJson, type DecisionJson } from '../journal/decision-json.js';
import { decisionWriter } from './decision-writer.js';
import { historiesOf, type History } from '../journal/history.js';
import { evaluate, lookupQueryFor, reconcileOne } from './reconcile.js';
import { listOperations } from '../journal/operations.js';
import { isInFlight, RECONCILABLE_STATES, UNRESOLVED_SQL } from '../journal/states.js';

export interface RunOptions {
  provider?: string;
  /** At most this many operations in the pass. Default 10,000. */
  limit?: number;
  /** Overrides each provider's `concurrency`. */
  concurrency?: number;
  /** Decide and write nothing: no claims, no observations, no attempts. */
  dryRun?: boolean;
  /** Operations claimed per transaction. Default 200. */
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
   * (they back off until `until`, ISO time): the same for `run` and `run --dry-run`. At most 100.
   */
  backing_off: { id: string; until: string }[];
  unresolved_by_state: Record<string, number>;
  duration_ms: number;
  dry_run: boolean;
}

export type ProviderSource = (name: string) => Promise<Provider>;

/**
 * One reconciliation pass over unresolved operations. Claims in batches (SKIP LOCKED, leases) so
 * several `recon run` processes against one PostgreSQL share the work without overlap; each
 * provider's lookups run with bounded concurrency (its rate limit is enforced in the adapter).
 */
export async function runPass(ctx: CoreContext, providers: ProviderSource, o: RunOptions = {}): Promise<RunSummary> {
  const started = Date.now();
  const passStartedAt = ctx.now();
  const limit = o.limit ?? 10_000;
  const summary: RunSummary = {
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
    unresolved_by_state: {},
    duration_ms: 0,
    dry_run: Boolean(o.dryRun),
  };
  const limiters = new Map<string, <T>(task: () => Promise<T>) => Promise<T>>();
  const limiterFor = (p: Provider) => {
    let l = limiters.get(p.name);
    if (!l) limiters.set(p.name, (l = limitConcurrency(o.concurrency ?? p.capabilities.concurrency)));
    return l;
  };
  const owner = newOwnerToken(ctx.actor);
  // Decisions are written in groups (group commit): one transaction per decision made the store's
  // round trips the cost of a pass against a fast provider (see write-decisions.ts).
  const write = decisionWriter(ctx, owner);
  // The store gone (exit 6): nothing more can be written, so nothing more is asked of the provider
  // (each lookup is one of the account's reads, and a pass may have hundreds claimed); the pass ends
  // with this error once what is in flight has settled.
  let storeLost: Error | undefined;
  const seen: string[] = [];
  // What the pass may decide, per provider: a provider's prepareLookups weighs a scan against it.
  const backlog = o.dryRun ? new Map<string, number>() : await backlogByProvider(ctx, o.provider, limit);
  const claimNext = async (): Promise<{ batch: Operation[]; histories: Map<string, History> | null }> => {
    const size = Math.min(o.batchSize ?? 200, limit - summary.claimed);
    if (size <= 0) return { batch: [], histories: null };
    const batch = o.dryRun
      ? await candidatesForDryRun(ctx, o, size, seen)
      : await claimBatch(ctx, providers, owner, size, o, seen, passStartedAt);
    summary.claimed += batch.length;
    seen.push(...batch.map((b) => b.id));
    // The batch's histories in a few queries, read while nothing else may decide these operations (we
    // hold their leases), and meanwhile the providers told which lookups are coming (prepareLookups).
    const [histories] = await Promise.all([
      o.dryRun || batch.length === 0 ? null : historiesOf(ctx.db, batch),
      prepareLookups(providers, batch, backlog),
    ]);
    return { batch, histories };
  };
  // Batches overlap: the next one is claimed while this one is looked up, and its lookups start when
  // this one's last few lookups are in flight. Waiting for a whole batch before claiming the next left
  // the provider idle at every batch boundary (~5% of a rate-limited pass: npm run bench, reconcile),
  // and waiting for its decisions to be written as well left it idle during every commit (claims).
  const running: Promise<void>[] = [];
  let next = claimNext();
  for (;;) {
    if (storeLost !== undefined) break;
    const { batch, histories } = await next;
    if (batch.length === 0) break;
    // At most two batches at once: one looked up while the other's decisions are written. With no
    // bound, a store slower than the provider would pile up decisions under leases that may expire.
    if (running.length >= 2) await running[running.length - 2];
    next = claimNext();
    // Awaited at the top of the loop; marked handled now so that a failing claim is not reported as
    // an unhandled rejection while this batch runs.
    next.catch(() => undefined);
    let left = batch.length;
    let tail!: () => void;
    const nearlyDone = new Promise<void>((resolve) => (tail = resolve));
    const TAIL = 16;
    if (left <= TAIL) tail();
    running.push(
      Promise.all(
        batch.map(async (claimed) => {
          let looked = false;
          // Called when the operation's lookup has answered (or it will make none).
          const lookedUp = () => {
            if (looked) return;
            looked = true;
            if (--left <= TAIL) tail();
          };
          try {
            await decideOne(claimed, histories, lookedUp);
          } finally {
            lookedUp();
          }
        }),
      ).then(() => undefined),
    );
    await nearlyDone;
  }
  await Promise.all(running);
  if (storeLost !== undefined) {
    throw storeLost;
  }

  async function decideOne(
    claimed: Operation,
    histories: Map<string, History> | null,
    lookedUp: () => void,
  ): Promise<void> {
    let provider: Provider;
    try {
      provider = await providers(claimed.provider);
    } catch (err) {
      summary.errors.push({ id: claimed.id, error: (err as Error).message });
      if (!o.dryRun) await releaseLease(ctx.db, claimed.id, owner);
      return;
    }
    const limiter = limiterFor(provider);
    // The operation's first provider call is its lookup.
    const limited = <T>(call: () => Promise<T>) =>
      limiter(async () => {
        if (storeLost !== undefined) throw storeLost;
        return call();
      }).finally(lookedUp);
    try {
      if (o.dryRun) {
        count(summary, await limited(() => dryDecision(ctx, provider, claimed)));
      } else {
        count(
          summary,
          await reconcileOne(ctx, provider, claimed, {
            owner,
            history: histories!.get(claimed.id)!,
            write,
            limited,
          }),
        );
      }
    } catch (err) {
      // The store gone (6), or a provider that refused our key (2: every lookup would be refused):
      // nothing more is asked; the pass ends with that error.
      if (exitCodeOf(err) === 6 || exitCodeOf(err) === 2) storeLost ??= err as Error;
      if (err instanceof LeaseLostError) summary.lease_expired.push(claimed.id);
      else summary.errors.push({ id: claimed.id, error: (err as Error).message });
      if (!o.dryRun) await releaseLease(ctx.db, claimed.id, owner).catch(() => undefined);
    }
    o.onProgress?.(summary.decisions.length + summary.errors.length, summary.claimed);
  }
  const states = await ctx.db.query<{ state: string; n: number }>(
    `SELECT state, count(*)::int AS n FROM recon.operations
      WHERE state IN ${UNRESOLVED_SQL} AND ($1::text IS NULL OR provider = $1::text)
      GROUP BY state`,
    [o.provider ?? null],
  );
  for (const s of UNRESOLVED_STATES) summary.unresolved_by_state[s] = 0;
  for (const r of states.rows) summary.unresolved_by_state[r.state] = Number(r.n);
  summary.needs_review_total = summary.unresolved_by_state.needs_review ?? 0;
  summary.backing_off = await backingOff(ctx, o.provider, passStartedAt);
  summary.decisions.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  summary.duration_ms = Date.now() - started;
  return summary;
}

/** Unresolved operations per provider (at most `limit`): what this pass may decide. */
async function backlogByProvider(ctx: CoreContext, provider: string | undefined, limit: number) {
  const { rows } = await ctx.db.query<{ provider: string; n: number }>(
    `SELECT provider, count(*)::int AS n FROM recon.operations
      WHERE state IN ${UNRESOLVED_SQL} AND ($1::text IS NULL OR provider = $1::text)
      GROUP BY provider`,
    [provider ?? null],
  );
  return new Map(rows.map((r) => [r.provider, Math.min(Number(r.n), limit)]));
}

/** Each provider's `prepareLookups` with its operations of the batch; trouble here only means lookups one by one. */
async function prepareLookups(
  providers: ProviderSource,
  batch: Operation[],
  backlog: Map<string, number>,
): Promise<void> {
  const byProvider = new Map<string, Operation[]>();
  for (const op of batch) {
    const ops = byProvider.get(op.provider);
    if (ops) ops.push(op);
    else byProvider.set(op.provider, [op]);
  }
  await Promise.all(
    [...byProvider].map(async ([name, ops]) => {
      const provider = await providers(name).catch(() => null);
      try {
        await provider?.prepareLookups?.(ops.map(lookupQueryFor), { backlog: backlog.get(name) ?? ops.length });
      } catch {
        // A module provider's trouble: its operations are looked up one by one.
      }
    }),
  );
}

async function claimBatch(
  ctx: CoreContext,
  providers: ProviderSource,
  owner: string,
  size: number,
  o: RunOptions,
  seen: string[],
  passStartedAt: Date,
): Promise<Operation[]> {
  // Each operation is claimed with its own provider's lease (which outlives that provider's
  // request timeout): a fixed 2 minutes blocked a 3 s provider's operations that long after a kill.
  let leaseMs = 120_000;
  const leaseMsByProvider = new Map<string, number>();
  if (o.provider) leaseMs = (await providers(o.provider)).capabilities.leaseMs;
  else {
    const names = await ctx.db.query<{ provider: string }>(
      `SELECT DISTINCT provider FROM recon.operations WHERE state IN ${UNRESOLVED_SQL}`,
    );
    for (const { provider } of names.rows) {
      // A provider that cannot be built keeps the default; its operations are reported as errors.
      const p = await providers(provider).catch(() => null);
      if (p) leaseMsByProvider.set(provider, p.capabilities.leaseMs);
    }
  }
  return claimForRun(ctx.db, {
    owner,
    leaseMs,
    leaseMsByProvider,
    now: ctx.now(),
    limit: size,
    provider: o.provider,
    exclude: seen,
    checkedBefore: passStartedAt,
  });
}

/** Operations `recon run` does not claim yet: backing off after an unavailable lookup (SPEC §4 step 6). */
async function backingOff(ctx: CoreContext, provider: string | undefined, now: Date) {
  const { rows } = await ctx.db.query<{ id: string; next_check_at: Date | string }>(
    `SELECT id, next_check_at FROM recon.operations
      WHERE state IN ${UNRESOLVED_SQL} AND state <> 'needs_review' AND next_check_at > $1::timestamptz
        AND ($2::text IS NULL OR provider = $2::text)
      ORDER BY next_check_at, id LIMIT 100`,
    [now.toISOString(), provider ?? null],
  );
  return rows.map((r) => ({ id: r.id, until: new Date(r.next_check_at).toISOString() }));
}

async function candidatesForDryRun(
  ctx: CoreContext,
  o: RunOptions,
  size: number,
  seen: string[],
): Promise<Operation[]> {
  if (seen.length) return [];
  const now = ctx.now();
  const ops = await listOperations(ctx.db, {
    states: [...RECONCILABLE_STATES],
    provider: o.provider,
    limit: Math.max(size, o.limit ?? 10_000),
  });
  // The real pass's claim skips operations backing off after an unavailable lookup: so does the dry run.
  const waiting = new Set((await backingOff(ctx, o.provider, now)).map((b) => b.id));
  return ops.filter((op) => !isInFlight(op, now) && !waiting.has(op.id)).reverse();
}

async function dryDecision(ctx: CoreContext, provider: Provider, op: Operation): Promise<DecisionJson> {
  const { decision: d } = await evaluate(ctx, provider, op);
  return decisionJson(op.id, d);
}

function count(s: RunSummary, d: DecisionJson): void {
  s.decisions.push(d);
  switch (d.decision) {
    case 'confirm':
      s.confirmed++;
      break;
    case 'fail':
      s.failed++;
      break;
    case 'pending':
      s.pending++;
      break;
    case 'retry':
      s.retried++;
      break;
    case 'review':
      s.escalated++;
      break;
    case 'wait':
      s.waiting++;
      break;
    case 'unavailable':
      s.unavailable++;
      break;
  }
}
