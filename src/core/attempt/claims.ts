import { keepPlan, type Queryable } from '../../store/db.js';
import type { Operation, ProviderTransaction, State } from '../../types.js';
import { payloadHash } from '../../lib/canonical.js';
import type { CoreContext } from '../journal/context.js';
import { NotFoundError, RefusedError } from '../../errors.js';
import { headOf, type ChainHead } from '../journal/chain.js';
import {
  listOperations,
  operationColumns,
  rowToOperation,
  rowToTransaction,
  transactionsAndHead,
  type OperationRow,
  type TransactionRow,
} from '../journal/operations.js';
import { isInFlight, RECONCILABLE_SQL, RECONCILABLE_STATES, UNRESOLVED_SQL } from '../journal/states.js';
import { movedOn, transition, transitionMany, type Move, type Moved } from '../journal/transition.js';

/**
 * Claims (graphile-worker style): a claim is a lease — an owner token and an expiry — taken in
 * one transaction with FOR UPDATE SKIP LOCKED, so concurrent workers never take the same
 * operation. Every write of a result re-checks the lease (`assertLease`), so a worker whose lease
 * expired and was taken over cannot write over the newer claim.
 */
export function newOwnerToken(actor: string): string {
  return `${actor}/${process.pid}/${Math.random().toString(36).slice(2, 10)}`;
}

/**
 * A claimed operation, with the lease it had before this claim: a `submitting` one whose lease
 * expired was left by a crashed worker, and its `lease.expired` event records when that lease
 * expired (the row itself now holds the new lease).
 */
export type ClaimedOperation = Operation & { previous_lease_expires_at?: Date | null };

export interface RunClaimOptions {
  owner: string;
  /** The lease of operations whose provider has none in `leaseMsByProvider`. */
  leaseMs: number;
  /** Each provider's own `lease`: a worker killed mid-pass blocks an operation for its provider's lease only. */
  leaseMsByProvider?: Map<string, number>;
  now: Date;
  limit: number;
  provider?: string;
  /** Already handled in this pass (a `wait` releases its lease; it must not be claimed again). */
  exclude?: string[];
  /**
   * When this pass started: an operation looked up after that (last_checked_at) was already handled by another
   * worker's pass (a `wait` or `pending` gives its lease back), so it is not handled twice.
   * Strictly after, so a pass under a frozen test clock still sees the previous pass's work.
   */
  checkedBefore?: Date;
}

/**
 * Claims up to `limit` operations that `recon run` should reconcile: pending and outcome_unknown
 * ones that nobody holds, and submitting ones whose lease expired (a crashed worker's). Oldest
 * first, so a backlog drains in order. Operations backing off after `unavailable` are skipped
 * until their next_check_at.
 */
export async function claimForRun(q: Queryable, o: RunClaimOptions): Promise<ClaimedOperation[]> {
  // `checkedBefore` reads a column of the claimed row itself (last_checked_at, set in the same
  // transaction as the decision). Under READ COMMITTED, a row that another worker handled and
  // released while this statement ran is locked on its newest version and the WHERE clause is
  // re-checked on that version, so it is skipped. (When the check was a NOT EXISTS over
  // recon.observations, that subquery kept the statement's older snapshot: 4 concurrent
  // `recon run`s decided dozens of operations twice, npm run bench.)
  const r = await q.query<ClaimedRow>(
    `WITH c AS (
       SELECT id, lease_expires_at AS previous_lease_expires_at FROM recon.operations
        WHERE state IN ${UNRESOLVED_SQL}
          AND state IN ${RECONCILABLE_SQL}
          AND (lease_expires_at IS NULL OR lease_expires_at <= $1::timestamptz)
          AND (next_check_at IS NULL OR next_check_at <= $1::timestamptz)
          AND ($5::text IS NULL OR provider = $5::text)
          AND NOT (id = ANY($6::text[]))
          AND ($7::timestamptz IS NULL OR last_checked_at IS NULL OR last_checked_at <= $7::timestamptz)
        ORDER BY created_at, id
        LIMIT $3::int
        FOR UPDATE SKIP LOCKED)
     UPDATE recon.operations o
        SET lease_owner = $2::text,
            lease_expires_at = $1::timestamptz + make_interval(secs => coalesce(
              (SELECT l.ms FROM unnest($8::text[], $9::int[]) AS l(provider, ms) WHERE l.provider = o.provider),
              $4::int) / 1000.0)
       FROM c WHERE o.id = c.id
     RETURNING o.*, c.previous_lease_expires_at`,
    [
      o.now.toISOString(),
      o.owner,
      o.limit,
      o.leaseMs,
      o.provider ?? null,
      o.exclude ?? [],
      o.checkedBefore?.toISOString() ?? null,
      [...(o.leaseMsByProvider?.keys() ?? [])],
      [...(o.leaseMsByProvider?.values() ?? [])],
    ],
  );
  return r.rows
    .map(rowToClaimed)
    .sort((a, b) => a.created_at.getTime() - b.created_at.getTime() || (a.id < b.id ? -1 : 1));
}

/**
 * What `claimForRun` would take, claiming nothing (`recon run --dry-run`): the reconcilable
 * operations but those in flight (a lease another worker holds) and those backing off, at most
 * `limit`, oldest first. Every candidate backing off is left out, not only the first 100 that the
 * summary lists.
 */
export async function claimCandidates(
  q: Queryable,
  o: { now: Date; limit: number; provider?: string },
): Promise<Operation[]> {
  const ops = await listOperations(q, { states: [...RECONCILABLE_STATES], provider: o.provider, limit: o.limit });
  const waiting = new Set(
    (await backingOff(q, o.provider, o.now, { among: ops.map((op) => op.id) })).list.map((b) => b.id),
  );
  return ops.filter((op) => !isInFlight(op, o.now) && !waiting.has(op.id)).reverse();
}

/**
 * Operations `recon run` does not claim yet: backing off after an unavailable lookup (SPEC §4 step 6).
 * The first `limit` soonest first, and how many there are; `among`: only these operations, all of them.
 */
export async function backingOff(
  q: Queryable,
  provider: string | undefined,
  now: Date,
  o: { among?: string[]; limit?: number } = {},
): Promise<{ list: { id: string; until: string }[]; total: number }> {
  const { rows } = await q.query<{ id: string; next_check_at: Date | string; total: number }>(
    `SELECT id, next_check_at, count(*) OVER ()::int AS total FROM recon.operations
      WHERE state IN ${UNRESOLVED_SQL} AND state <> 'needs_review' AND next_check_at > $1::timestamptz
        AND ($2::text IS NULL OR provider = $2::text) AND ($3::text[] IS NULL OR id = ANY($3::text[]))
      ORDER BY next_check_at, id LIMIT $4`,
    [now.toISOString(), provider ?? null, o.among ?? null, o.among ? o.among.length : (o.limit ?? 100)],
  );
  return {
    list: rows.map((r) => ({ id: r.id, until: new Date(r.next_check_at).toISOString() })),
    total: rows.length ? Number(rows[0].total) : 0,
  };
}

/** Gives a lease back (only if we still hold it). */
export async function releaseLease(q: Queryable, id: string, owner: string): Promise<void> {
  await q.query(
    'UPDATE recon.operations SET lease_owner = NULL, lease_expires_at = NULL WHERE id = $1 AND lease_owner = $2',
    [id, owner],
  );
}

export interface AttemptClaim {
  op: Operation;
  attempt: number;
  owner: string;
  leaseExpiresAt: Date;
  /**
   * What the claim's transaction left, read under its row lock: the chain's head after the claim's
   * events and the transactions linked to the operation. The attempt's end writes on them without a
   * lock or a read of its own (submit.ts writeResult); should anything have been written for the
   * operation since (an event, a link: a link always comes with an event), its event's seq is taken
   * and the end is written again the long way.
   */
  left: { head: ChainHead; transactions: ProviderTransaction[] };
}

/**
 * The payload is frozen (SPEC §1.3): what would be sent must still hash to the hash recorded with
 * it, in the `payload_hash` column and in the operation's first audit event (which the hash chain
 * and an anchor protect, so changing `payload` and `payload_hash` together is caught too). Null when
 * it does; else the recorded and the found hash. Anyone with UPDATE on recon.operations can change
 * `payload` behind recon's back: without this check the changed amount was sent and the operation
 * confirmed at its old one (issue 10). `recorded` is the first event's hash (lockForClaim reads it).
 */
function payloadTampering(
  op: Pick<Operation, 'payload' | 'payload_hash'>,
  recorded: string | null,
): { recorded: string; found: string } | null {
  const found = payloadHash(op.payload);
  // An operation without its first event is reported by audit verify (missing_chain).
  const expected = recorded ?? op.payload_hash;
  return found === expected && found === op.payload_hash ? null : { recorded: expected, found };
}

/**
 * Locks the operation's row (lockOperation) and reads, in the same statement, the payload hash its
 * first audit event recorded: that event is written with the row and never changes, so it needs no
 * read of its own after the lock.
 */
async function lockForClaim(tx: Queryable, id: string): Promise<{ op: Operation; recorded: string | null }> {
  const r = await tx.query<OperationRow & { recorded_payload_hash: string | null }>(
    keepPlan(`SELECT ${operationColumns('o')}, (SELECT e.detail->>'payload_hash' FROM recon.audit_events e
                   WHERE e.operation_id = o.id AND e.seq = 1) AS recorded_payload_hash
       FROM recon.operations o WHERE o.id = $1 FOR UPDATE`),
    [id],
  );
  if (!r.rows[0]) throw new NotFoundError(`operation ${id} not found; list operations with: recon ops list`);
  return { op: rowToOperation(r.rows[0]), recorded: r.rows[0].recorded_payload_hash };
}

/** An operation as a claim checks it: the row, the payload hash its first event recorded, its chain's head, its links. */
export interface ClaimView {
  op: Operation;
  recorded: string | null;
  head: ChainHead;
  transactions: ProviderTransaction[];
  /** The row's version (xmin) as read: a claim on this view is written only on that row (Move.attempt.rowVersion). */
  version: string;
}

/**
 * The operation as a claim checks it, in one statement without a lock (one snapshot: the row, its
 * chain's head and its links agree): what execute_action reads first, and claims on (claimAttempt's
 * `seen`). Null when there is no such operation.
 */
export async function readForClaim(q: Queryable, id: string): Promise<ClaimView | null> {
  const r = await q.query<
    OperationRow & {
      row_version: string;
      recorded_payload_hash: string | null;
      head_seq: number | null;
      head_hash: string | null;
      head_to_state: State | null;
      linked: (Omit<TransactionRow, 'created' | 'linked_at'> & { created: string | null; linked_at: string })[];
    }
  >(
    keepPlan(`SELECT ${operationColumns('o')}, o.xmin::text AS row_version,
            (SELECT e.detail->>'payload_hash' FROM recon.audit_events e
              WHERE e.operation_id = o.id AND e.seq = 1) AS recorded_payload_hash,
            h.seq AS head_seq, h.hash AS head_hash, h.to_state AS head_to_state,
            (SELECT coalesce(json_agg(t ORDER BY t.linked_at, t.provider_id), '[]'::json)
               FROM recon.provider_transactions t WHERE t.operation_id = o.id) AS linked
       FROM recon.operations o
       LEFT JOIN LATERAL (SELECT seq, hash, to_state FROM recon.audit_events WHERE operation_id = o.id
                           ORDER BY seq DESC LIMIT 1) h ON true
      WHERE o.id = $1`),
    [id],
  );
  const row = r.rows[0];
  if (!row) return null;
  return {
    op: rowToOperation(row),
    recorded: row.recorded_payload_hash,
    head: headOf(row.head_seq, row.head_hash, row.head_to_state),
    version: row.row_version,
    // JSON's timestamps are strings: as Dates, the links are the rows transactionsAndHead reads.
    transactions: row.linked.map((t) =>
      rowToTransaction({
        ...t,
        created: t.created === null ? null : new Date(t.created),
        linked_at: new Date(t.linked_at),
      }),
    ),
  };
}

/**
 * Phase 1 of an attempt (one transaction): move to `submitting` under our lease, count the attempt
 * and persist the attempt row BEFORE the request is sent, so a crash during the request leaves a
 * record from which the truth is recovered (lease expiry → outcome_unknown → lookup).
 * `from` is `approved` for a first submit, `outcome_unknown` for a retry the rule authorised.
 *
 * In the same transaction, before anything is written: the payload is re-checked against its
 * stored hash (a mismatch commits `needs_review`, reason `payload_tampered`, and throws
 * RefusedError: nothing is sent), and `check` (the adapter's own validation of what it would
 * send) may throw, which leaves the operation as it was: an error found before any byte is sent
 * is never an unknown outcome, and burns no attempt.
 */
export async function claimAttempt(
  ctx: CoreContext,
  id: string,
  o: {
    owner: string;
    leaseMs: number;
    from: 'approved' | 'outcome_unknown';
    rule: string;
    detail?: Record<string, unknown>;
    heldLease?: string;
    /** Validates what would be sent (Provider.validatePayload); a throw rolls the claim back. */
    check?: (op: Operation) => void;
    /**
     * Asked once the claim is certain: an event to chain after `attempt.started`, in its statement
     * (Move.note), e.g. the `mcp.call` of the agent's execute_action that made the claim.
     */
    note?: () => Move['note'];
    /**
     * Told when the claim on `seen` (one statement, no transaction) was given the note and wrote nothing:
     * the long way decides, and asks for the note again (a refusal leaves it to the caller).
     */
    noteUnwritten?: () => void;
    /**
     * The operation as read just before (readForClaim): the claim is tried on it first, in one
     * statement with no lock or read of its own (claimSeen); the long way below when that fails.
     */
    seen?: ClaimView;
  },
): Promise<AttemptClaim> {
  const now = ctx.now();
  const expires = new Date(now.getTime() + o.leaseMs);
  const fast = o.seen ? await claimSeen(ctx, id, o, o.seen, now, expires) : null;
  if (fast) return fast;
  const claimed = await ctx.db.transaction(async (tx): Promise<AttemptClaim | { tampered: string }> => {
    const { op: current, recorded } = await lockForClaim(tx, id);
    if (current.state === 'needs_review') {
      // A webhook may have found a transaction made outside recon before the first submit (SPEC §3).
      throw new RefusedError(
        `operation ${id} is needs_review${current.review_reason ? ` (${current.review_reason})` : ''}; nothing was sent: a person decides it (recon ops show ${id}, recon review resolve)`,
        'state_machine',
      );
    }
    if (current.state !== o.from) {
      throw new RefusedError(
        `operation ${id} is ${current.state}; only ${o.from} operations can be ${o.from === 'approved' ? 'submitted (approve it first: recon ops approve)' : 'retried'}`,
        'state_machine',
      );
    }
    const held = current.lease_owner && current.lease_expires_at && current.lease_expires_at > now;
    if (held && current.lease_owner !== o.heldLease) {
      throw new RefusedError(
        `operation ${id} is claimed by ${current.lease_owner} until ${current.lease_expires_at!.toISOString()}`,
        'lease_held',
      );
    }
    const tampered = payloadTampering(current, recorded);
    if (tampered) {
      await transition(tx, id, 'needs_review', {
        actor: ctx.actor,
        auditKey: ctx.auditKey,
        now,
        kind: 'attempt.refused',
        rule: 'claim.payload_tampered',
        review_reason: 'payload_tampered',
        detail: { payload_hash_recorded: tampered.recorded, payload_hash_found: tampered.found, nothing_sent: true },
      });
      return {
        tampered: `operation ${id}: its payload no longer matches the payload_hash recorded with it (${tampered.recorded.slice(0, 12)}… vs ${tampered.found.slice(0, 12)}…): it was changed in the store after recording. Nothing was sent; the operation is now needs_review (payload_tampered)`,
      };
    }
    o.check?.(current);
    // The row is locked (above), so the move needs no second lock: the state seen then, and the chain's
    // head (with the transactions linked) read now, in a statement of its own after the lock (chainHeads).
    const { head, transactions } = await transactionsAndHead(tx, id);
    const [moved] = await transitionMany(tx, [claimMove(id, current, head, o, expires)], {
      actor: ctx.actor,
      auditKey: ctx.auditKey,
      now,
      returnRows: true,
    });
    return claimOf(moved, current, o.owner, expires, transactions);
  });
  if ('tampered' in claimed) throw new RefusedError(claimed.tampered, 'payload_tampered');
  return claimed;
}

type ClaimOptions = Parameters<typeof claimAttempt>[2];

/** The claim's move: → submitting under the new lease, its attempt's row and count, and the caller's note. */
function claimMove(id: string, current: Operation, head: ChainHead, o: ClaimOptions, expires: Date): Move {
  const attempt = current.attempt_count + 1;
  return {
    id,
    from: current.state,
    to: 'submitting',
    head,
    kind: 'attempt.started',
    rule: o.rule,
    detail: { attempt, idempotency_key: current.idempotency_key, ...(o.detail ?? {}) },
    lease: { owner: o.owner, expiresAt: expires },
    note: o.note?.(),
    // The attempt's row and the operation's count, in the move's statement.
    attempt: { number: attempt, idempotencyKey: current.idempotency_key, requestHash: payloadHash(current.payload) },
  };
}

/** The claim a written move made, with what it left for the attempt's end (AttemptClaim.left). */
function claimOf(
  moved: Moved,
  current: Operation,
  owner: string,
  expires: Date,
  transactions: ProviderTransaction[],
): AttemptClaim {
  if (!moved.ok) throw moved.error;
  const last = moved.noted ?? moved.event;
  return {
    op: moved.op!,
    attempt: current.attempt_count + 1,
    owner,
    leaseExpiresAt: expires,
    left: { head: { seq: last.seq, hash: last.hash, to_state: last.to_state }, transactions },
  };
}

/**
 * The claim on the operation as read before (ClaimView), in one statement (no transaction around it:
 * BEGIN and COMMIT were two more round trips of execute_action's): the move checks the state (and a
 * retry's held lease) and the row's version under the row lock (the row as read, so its payload is
 * the one checked here), and an event written since the read (a link always comes with one) has taken
 * the seq its event needs, so it fails on the chain's key. Null, and nothing written, when the long
 * way must decide: a refusal (another state, a lease held, the row changed), a changed payload (which
 * the long way records), or the statement failing. A first
 * submit (`approved`: no lease is ever held on one) or a retry under the caller's own lease only.
 */
async function claimSeen(
  ctx: CoreContext,
  id: string,
  o: ClaimOptions,
  seen: ClaimView,
  now: Date,
  expires: Date,
): Promise<AttemptClaim | null> {
  const current = seen.op;
  if (current.state !== o.from || (o.from !== 'approved' && !o.heldLease)) return null;
  const held = current.lease_owner && current.lease_expires_at && current.lease_expires_at > now;
  if (held && current.lease_owner !== o.heldLease) return null;
  if (payloadTampering(current, seen.recorded)) return null;
  // The adapter's refusal of what would be sent is the caller's answer, as on the long way: nothing written.
  o.check?.(current);
  const move = claimMove(id, current, seen.head, o, expires);
  // On the row as read (its version): what is sent is the payload, hash and key checked above. Changed
  // since, even behind recon's back, the move is not written and the long way decides (and records a
  // payload changed in the store).
  move.attempt = { ...move.attempt!, rowVersion: seen.version };
  try {
    const [moved] = await transitionMany(ctx.db, [o.heldLease ? { ...move, leaseOwner: o.heldLease } : move], {
      actor: ctx.actor,
      auditKey: ctx.auditKey,
      now,
      returnRows: true,
    });
    return claimOf(moved, current, o.owner, expires, seen.transactions);
  } catch (err) {
    // Written since the read, or refused under the row lock: the long way decides, the note with it. A
    // store error is the caller's.
    if (movedOn(err)) {
      o.noteUnwritten?.();
      return null;
    }
    throw err;
  }
}

/** Claims one operation for reconciliation (`recon retry`); null when another worker holds it. */
export async function claimOne(
  q: Queryable,
  id: string,
  o: { owner: string; leaseMs: number; now: Date },
): Promise<ClaimedOperation | null> {
  const r = await q.query<ClaimedRow>(
    `UPDATE recon.operations o
        SET lease_owner = $2::text, lease_expires_at = $3::timestamptz + make_interval(secs => $4::int / 1000.0)
       FROM (SELECT id, lease_expires_at AS previous_lease_expires_at FROM recon.operations WHERE id = $1 FOR UPDATE) c
      WHERE o.id = c.id AND o.state IN ${RECONCILABLE_SQL}
        AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= $3::timestamptz)
      RETURNING o.*, c.previous_lease_expires_at`,
    [id, o.owner, o.now.toISOString(), o.leaseMs],
  );
  return r.rows[0] ? rowToClaimed(r.rows[0]) : null;
}

type ClaimedRow = OperationRow & { previous_lease_expires_at?: Date | null };

function rowToClaimed(row: ClaimedRow): ClaimedOperation {
  return { ...rowToOperation(row), previous_lease_expires_at: row.previous_lease_expires_at ?? null };
}
