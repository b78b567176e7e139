import { NotFoundError, RefusedError } from '../errors.js';
import type { Queryable } from '../store/db.js';
import type { AuditEvent, Decision, LookupResult, Observation, Operation, Provider } from '../types.js';
import { GENESIS_HASH, chainEvent, insertEvents } from './audit.js';
import type { CoreContext } from './context.js';
import { backoffDelay } from './ratelimit.js';
import { rowToObservation, type ObservationRow } from './operations.js';
import { decide } from './rule.js';
import { payloadHash } from './canonical.js';
import { assertTransition, isTerminal } from './states.js';
import { writeGroupRows, type GroupRow } from './group-write.js';
import { assertLease, linkTransactions, recordObservations } from './transition.js';

/**
 * Writing reconciliation decisions (SPEC §4), many per transaction.
 *
 * One transaction per decision cost about ten store round trips per operation, and against a fast
 * provider those round trips were most of a pass (npm run bench, `claims`: 4 × `recon run` decided
 * ~310 operations/s, recon's and PostgreSQL's CPU split evenly between them). A group of decisions
 * is written here with a fixed number of statements whatever its size: lock the rows, then one
 * statement each for the observations, the linked transactions, the state changes and the audit
 * events. Every operation is still checked on its own (our lease, the state the rule saw, the
 * state machine); one that fails its check is reported and the rest of the group is written.
 */

/** What the rule decided for one claimed operation, ready to be written. */
export interface PlannedDecision {
  /** The operation as the rule saw it (its state is re-checked under the row lock). */
  op: Operation;
  provider: string;
  lookup: LookupResult;
  decision: Decision;
  /** `unavailable`: when to look again (the provider is backed off until then). */
  nextCheckAt: Date | null;
  /** The chain head read with the history, when it was (see History.head). */
  head?: ChainHead;
}

/** The JSON shape of a `retry`/`run` decision (SPEC §7). */
export interface DecisionJson {
  id: string;
  decision: Decision['decision'];
  rule: string;
  state: string;
  explanation: string;
  review_reason?: string;
  provider_txn_ids?: string[];
  attempt?: number;
  /** A wait: when a retry may be allowed (ISO time). */
  retry_at?: string;
}

export type Applied = { ok: true; json: DecisionJson } | { ok: false; error: Error };

export function decisionJson(id: string, d: Decision): DecisionJson {
  return {
    id,
    decision: d.decision,
    rule: d.rule,
    state: d.state,
    explanation: d.explanation,
    ...(d.review_reason ? { review_reason: d.review_reason } : {}),
    ...(d.link?.length ? { provider_txn_ids: d.link.map((t) => t.provider_id) } : {}),
    ...(d.retry_at ? { retry_at: d.retry_at.toISOString() } : {}),
  };
}

export function lookupDetail(l: LookupResult): Record<string, unknown> {
  return {
    result: l.result,
    matches: l.matches.map(txnSummary),
    candidates: l.candidates.map(txnSummary),
    ...(l.error ? { error: l.error } : {}),
  };
}

function txnSummary(t: LookupResult['matches'][number]) {
  return {
    provider_id: t.provider_id,
    status: t.status,
    amount: t.amount,
    currency: t.currency,
    operation_id: t.operation_id,
    created: t.created ? t.created.toISOString() : null,
  };
}

/** What the rule reads besides the operation: its observations so far and when its last attempt started. */
export interface History {
  observations: Observation[];
  lastAttemptAt: Date | null;
  /**
   * The head of the operation's audit chain when the history was read. The decision's event is
   * chained to it without reading it again; should another writer have appended meanwhile, the
   * event's seq is taken and the write fails as a whole (primary key), then goes step by step.
   */
  head?: ChainHead;
  /** The transactions linked to the operation so far (the rule's `linked`). */
  linked?: { provider_id: string; state: string }[];
}

export interface ChainHead {
  seq: number;
  hash: string;
}

/** The histories of many operations (observations, last attempt, chain head), three queries whatever their number. */
export async function historiesOf(q: Queryable, ops: Operation[]): Promise<Map<string, History>> {
  const out = new Map<string, History>();
  if (ops.length === 0) return out;
  // With one attempt, it started at first_attempt_at (claimAttempt writes both from one clock
  // reading): attempts are only read for retried operations.
  const retried = ops.filter((op) => op.attempt_count > 1).map((op) => op.id);
  const ids = ops.map((op) => op.id);
  const [obs, attempts, heads, linked] = await Promise.all([
    q.query<ObservationRow>(
      'SELECT * FROM recon.observations WHERE operation_id = ANY($1::text[]) ORDER BY operation_id, observed_at, id',
      [ids],
    ),
    retried.length
      ? q.query<{ operation_id: string; started_at: Date }>(
          `SELECT DISTINCT ON (operation_id) operation_id, started_at FROM recon.attempts
            WHERE operation_id = ANY($1::text[]) ORDER BY operation_id, number DESC`,
          [retried],
        )
      : Promise.resolve({ rows: [] as { operation_id: string; started_at: Date }[] }),
    chainHeads(q, ids),
    q.query<{ operation_id: string; provider_id: string; state: string }>(
      'SELECT operation_id, provider_id, state FROM recon.provider_transactions WHERE operation_id = ANY($1::text[])',
      [ids],
    ),
  ]);
  for (const op of ops)
    out.set(op.id, {
      observations: [],
      lastAttemptAt: op.attempt_count > 1 ? null : op.first_attempt_at,
      linked: [],
    });
  for (const o of obs.rows) {
    out.get(o.operation_id)!.observations.push(rowToObservation(o));
  }
  for (const a of attempts.rows) out.get(a.operation_id)!.lastAttemptAt = a.started_at;
  for (const [id, head] of heads) out.get(id)!.head = head;
  for (const t of linked.rows) out.get(t.operation_id)!.linked!.push({ provider_id: t.provider_id, state: t.state });
  return out;
}

/** The last event of each operation's chain (genesis for none), one query. */
export async function chainHeads(q: Queryable, ids: string[]): Promise<Map<string, ChainHead>> {
  const r = await q.query<{ id: string; seq: number | null; hash: string | null }>(
    `SELECT i.id, e.seq, e.hash FROM unnest($1::text[]) AS i(id)
       LEFT JOIN LATERAL (SELECT seq, hash FROM recon.audit_events WHERE operation_id = i.id ORDER BY seq DESC LIMIT 1) e ON true`,
    [ids],
  );
  return new Map(
    r.rows.map((h) => [h.id, h.seq === null ? { seq: 0, hash: GENESIS_HASH } : { seq: Number(h.seq), hash: h.hash! }]),
  );
}

/** Runs the rule (a pure function of what it is given and the clock) and plans the write. */
export function planDecision(
  ctx: CoreContext,
  provider: Provider,
  op: Operation,
  lookup: LookupResult,
  history: History,
): PlannedDecision {
  const now = ctx.now();
  // A `submitting` whose lease expired is judged as the outcome_unknown it is (SPEC §3).
  const subject = op.state === 'submitting' ? { ...op, state: 'outcome_unknown' as const } : op;
  const decision = decide({
    operation: subject,
    // Read by the rule only on the way to a retry: hashed only then.
    get retryPayloadHash() {
      return payloadHash(op.payload);
    },
    history: history.observations,
    lookup,
    capabilities: provider.capabilities,
    now,
    lastAttemptAt: history.lastAttemptAt,
    linked: history.linked,
  });
  let nextCheckAt: Date | null = null;
  if (decision.decision === 'unavailable') {
    let streak = 0;
    for (let i = history.observations.length - 1; i >= 0 && history.observations[i].result === 'unavailable'; i--)
      streak++;
    // Back off a provider that is down, bounded by its uncertainty window so short test windows stay short.
    const delay = backoffDelay(streak, {
      baseMs: Math.min(5_000, provider.capabilities.uncertaintyWindowMs / 2),
      maxMs: 15 * 60_000,
    });
    nextCheckAt = new Date(now.getTime() + delay);
  }
  return { op, provider: provider.name, lookup, decision, nextCheckAt, head: history.head };
}

/**
 * Writes planned decisions under `owner`'s leases, in one transaction. Never throws: each item
 * gets its own result. Should the group's transaction fail as a whole (a store error), each item
 * is tried again alone, so one bad item costs only itself.
 */
export async function applyDecisions(ctx: CoreContext, items: PlannedDecision[], owner: string): Promise<Applied[]> {
  if (items.length === 0) return [];
  // One statement cannot insert the same provider transaction twice (ON CONFLICT would refuse to
  // touch a row twice): a later item that links one an earlier item links goes in a later group.
  const seen = new Set<string>();
  const group: number[] = [];
  const later: number[] = [];
  items.forEach((item, i) => {
    const keys = [item.op.id, ...(item.decision.link ?? []).map((t) => `${item.provider}\u0000${t.provider_id}`)];
    if (keys.some((k) => seen.has(k))) later.push(i);
    else {
      for (const k of keys) seen.add(k);
      group.push(i);
    }
  });
  const results = new Array<Applied>(items.length);
  const members = group.map((i) => items[i]);
  // One statement for the group; should it fail as a whole (a chain head moved since it was read, a
  // transaction linked elsewhere meanwhile, a store error), the group goes again step by step,
  // reading everything under its row locks, and then item by item.
  const written = await writeGroup(ctx, members, owner)
    .catch(() => applyGroup(ctx, members, owner))
    .catch(async (err: unknown) => {
      if (group.length === 1)
        return [{ ok: false as const, error: err instanceof Error ? err : new Error(String(err)) }];
      const alone: Applied[] = [];
      for (const i of group) alone.push(...(await applyDecisions(ctx, [items[i]], owner)));
      return alone;
    });
  group.forEach((i, k) => (results[i] = written[k]!));
  if (later.length) {
    const rest = await applyDecisions(
      ctx,
      later.map((i) => items[i]),
      owner,
    );
    later.forEach((i, k) => (results[i] = rest[k]!));
  }
  return results;
}

/** The checks a decision passes under its row lock: it exists, our lease holds, its state is the one the rule saw. */
function checkLocked(
  cur: Pick<Operation, 'id' | 'state' | 'lease_owner' | 'lease_expires_at'> | undefined,
  item: PlannedDecision,
  owner: string,
  now: Date,
): void {
  if (!cur) throw new NotFoundError(`operation ${item.op.id} not found; list operations with: recon ops list`);
  assertLease(cur, owner, now);
  if (cur.state !== item.op.state) {
    throw new RefusedError(
      `operation ${cur.id} moved from ${item.op.state} to ${cur.state} while it was looked up; decision not written`,
      'state_machine',
    );
  }
  if (item.decision.decision !== 'retry' && item.decision.state !== cur.state)
    assertTransition(cur.id, cur.state, item.decision.state);
}

/** The audit event of a decision, chained to `head`. */
function decisionEvent(
  ctx: CoreContext,
  now: Date,
  head: ChainHead,
  item: PlannedDecision,
  d: Decision,
  lookup: Record<string, unknown>,
): AuditEvent {
  const detail: Record<string, unknown> = { explanation: d.explanation, lookup };
  const moved = d.decision !== 'retry' && d.state !== item.op.state;
  if (moved && d.state === 'needs_review' && d.review_reason) detail.review_reason = d.review_reason;
  return chainEvent(head, {
    operation_id: item.op.id,
    at: now,
    actor: ctx.actor,
    // Only a retry's authorisation is audited here; `submitting` is entered by the attempt itself (claimAttempt).
    kind: d.decision === 'retry' ? 'retry.authorised' : moved ? 'reconcile.decision' : `reconcile.${d.decision}`,
    from_state: item.op.state,
    to_state: moved ? d.state : item.op.state,
    rule: d.rule,
    detail,
  });
}

/**
 * The group in one statement (group-write.ts): each event chained to the head read with the
 * operation's history (read here, one query, for items planned without one). Throws when the
 * statement fails as a whole; the caller then writes the group step by step (applyGroup).
 */
async function writeGroup(ctx: CoreContext, items: PlannedDecision[], owner: string): Promise<Applied[]> {
  const now = ctx.now();
  const results = new Array<Applied>(items.length);
  const ok: { i: number; row: GroupRow; json: DecisionJson }[] = [];
  const missing = items.filter((item) => !item.head).map((item) => item.op.id);
  const heads = missing.length ? await chainHeads(ctx.db, missing) : new Map<string, ChainHead>();
  items.forEach((item, i) => {
    const d = item.decision;
    // What can be checked before the lock is checked here; the lock re-checks lease and state.
    if (d.decision !== 'retry' && d.state !== item.op.state) {
      try {
        assertTransition(item.op.id, item.op.state, d.state);
      } catch (err) {
        results[i] = { ok: false, error: err as Error };
        return;
      }
    }
    const detail = lookupDetail(item.lookup);
    const moved = d.decision !== 'retry' && d.state !== item.op.state;
    const head = item.head ?? heads.get(item.op.id)!;
    ok.push({
      i,
      json: decisionJson(item.op.id, d),
      row: {
        id: item.op.id,
        fromState: item.op.state,
        state: d.state,
        retry: d.decision === 'retry',
        moved,
        terminal: isTerminal(d.state),
        reviewReason: d.review_reason ?? null,
        nextCheckAt: item.nextCheckAt,
        result: item.lookup.result,
        observationDetail: detail,
        event: decisionEvent(ctx, now, head, item, d, detail),
        links: d.link ?? [],
        provider: item.provider,
      },
    });
  });
  if (ok.length === 0) return results;
  const outcomes = await writeGroupRows(
    ctx.db,
    ok.map((w) => w.row),
    { now, owner, actor: ctx.actor },
  );
  for (const w of ok) {
    const outcome = outcomes.get(w.row.id);
    if (outcome?.written) {
      results[w.i] = { ok: true, json: w.json };
      continue;
    }
    try {
      checkLocked(outcome?.current, items[w.i], owner, now);
      throw new Error(`operation ${w.row.id}: decision not written`);
    } catch (err) {
      results[w.i] = { ok: false, error: err as Error };
    }
  }
  return results;
}

async function applyGroup(ctx: CoreContext, items: PlannedDecision[], owner: string): Promise<Applied[]> {
  const now = ctx.now();
  const at = now.toISOString();
  return ctx.db.transaction(async (tx) => {
    // Rows are locked in id order, so two groups never wait on each other in a cycle.
    // Only what the checks read: a group's full rows were a measurable share of recon's own time.
    const locked = await tx.query<{
      id: string;
      state: Operation['state'];
      lease_owner: string | null;
      lease_expires_at: Date | null;
    }>(
      'SELECT id, state, lease_owner, lease_expires_at FROM recon.operations WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE',
      [items.map((item) => item.op.id)],
    );
    const current = new Map(locked.rows.map((r) => [r.id, r]));
    const results = new Array<Applied>(items.length);
    const ok: { i: number; item: PlannedDecision; d: Decision; detail: Record<string, unknown> }[] = [];
    items.forEach((item, i) => {
      try {
        checkLocked(current.get(item.op.id), item, owner, now);
        ok.push({ i, item, d: item.decision, detail: lookupDetail(item.lookup) });
      } catch (err) {
        results[i] = { ok: false, error: err as Error };
      }
    });
    if (ok.length === 0) return results;

    await recordObservations(
      tx,
      ok.map((w) => ({ operationId: w.item.op.id, at: now, result: w.item.lookup.result, detail: w.detail })),
    );
    // A transaction already linked to another operation is not re-pointed: it stays where it is,
    // and the decision's explanation says so.
    const links = ok.flatMap((w) =>
      (w.d.link ?? []).map((t) => ({ w, provider: w.item.provider, operationId: w.item.op.id, txn: t })),
    );
    const linked = await linkTransactions(tx, links, { via: 'lookup', by: ctx.actor, at: now });
    links.forEach(({ w, txn: t }, k) => {
      if (!linked[k].linked)
        w.d = {
          ...w.d,
          explanation: `${w.d.explanation}; ${t.provider_id} is already linked to ${linked[k].existingOperation}`,
        };
    });

    // State changes and lease releases. A retry keeps its lease and its
    // state: the attempt follows at once (claimAttempt moves it to submitting).
    await tx.query(
      `UPDATE recon.operations o
          SET state = CASE WHEN u.retry THEN o.state ELSE u.state END,
              updated_at = CASE WHEN u.moved THEN $1::timestamptz ELSE o.updated_at END,
              resolved_at = CASE WHEN NOT u.moved THEN o.resolved_at WHEN u.terminal THEN $1::timestamptz ELSE NULL END,
              review_reason = CASE WHEN u.moved AND u.state = 'needs_review' THEN coalesce(u.review_reason, o.review_reason) ELSE o.review_reason END,
              lease_owner = CASE WHEN u.retry THEN o.lease_owner END,
              lease_expires_at = CASE WHEN u.retry THEN o.lease_expires_at END,
              next_check_at = CASE WHEN u.moved THEN NULL ELSE coalesce(u.next_check_at, o.next_check_at) END
         FROM unnest($2::text[], $3::text[], $4::boolean[], $5::boolean[], $6::boolean[], $7::text[], $8::timestamptz[])
              AS u(id, state, retry, moved, terminal, review_reason, next_check_at)
        WHERE o.id = u.id`,
      [
        at,
        ok.map((w) => w.item.op.id),
        ok.map((w) => w.d.state),
        ok.map((w) => w.d.decision === 'retry'),
        ok.map((w) => w.d.decision !== 'retry' && w.d.state !== w.item.op.state),
        ok.map((w) => isTerminal(w.d.state)),
        ok.map((w) => w.d.review_reason ?? null),
        ok.map((w) => w.item.nextCheckAt?.toISOString() ?? null),
      ],
    );

    // Each operation's chain head, read after its row lock was granted (every writer of a chain
    // holds that lock), so no other writer can append in between.
    // Each operation's chain head, read after its row lock was granted (every writer of a chain
    // holds that lock), so no other writer can append in between.
    const head = await chainHeads(
      tx,
      ok.map((w) => w.item.op.id),
    );
    const events: AuditEvent[] = ok.map(({ item, d, detail }) =>
      decisionEvent(ctx, now, head.get(item.op.id)!, item, d, detail),
    );
    await insertEvents(tx, events);
    for (const w of ok) results[w.i] = { ok: true, json: decisionJson(w.item.op.id, w.d) };
    return results;
  });
}

/**
 * Group commit for `recon run`: decisions handed in while a group is being written wait and go
 * together in the next one. A group is written when it is full or `fillMs` after its first
 * decision arrived: against a slow provider decisions trickle in, and writing each alone made one
 * commit (and its WAL flush) per decision; a few milliseconds of waiting fills the group instead.
 */
export function decisionWriter(
  ctx: CoreContext,
  owner: string,
  o: { maxGroup?: number; fillMs?: number } = {},
): (item: PlannedDecision) => Promise<Applied> {
  const maxGroup = o.maxGroup ?? 500;
  const fillMs = o.fillMs ?? 5;
  const queue: { item: PlannedDecision; resolve: (a: Applied) => void }[] = [];
  let writing = false;
  let full: (() => void) | null = null;
  const drain = async () => {
    writing = true;
    try {
      while (queue.length) {
        if (queue.length < maxGroup) {
          // Let the group fill: until it is full, or fillMs have passed.
          await new Promise<void>((resolve) => {
            const timer = setTimeout(() => {
              full = null;
              resolve();
            }, fillMs);
            full = () => {
              clearTimeout(timer);
              full = null;
              resolve();
            };
          });
        }
        const group = queue.splice(0, maxGroup);
        const results = await applyDecisions(
          ctx,
          group.map((g) => g.item),
          owner,
        );
        group.forEach((g, k) => g.resolve(results[k]));
      }
    } finally {
      writing = false;
    }
  };
  return (item) =>
    new Promise<Applied>((resolve) => {
      queue.push({ item, resolve });
      if (!writing) void drain();
      else if (full && queue.length >= maxGroup) full();
    });
}
