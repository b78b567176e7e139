import { keepPlan, type Queryable } from '../../store/db.js';
import { pgCode, UNIQUE_VIOLATION } from '../../store/pgcodes.js';
import type { AuditEvent, Operation } from '../../types.js';
import type { AuditKey } from '../../lib/keyed-hash.js';
import { appendEvent, insertEventsSql, noteEvent, type ChainHead } from './chain.js';
import { lockOperation, operationColumns, rowToOperation, type OperationRow } from './operations.js';
import { assertLease } from './transition.js';

/**
 * An audit event that records something without changing state (an observation, a wait, a note).
 * Its state is the chain's, not the row's (appendEvent): a note cannot launder a state change made
 * behind recon's back.
 */
export async function note(
  tx: Queryable,
  id: string,
  o: {
    actor: string;
    /** The audit key (CoreContext.auditKey): the event is keyed with it. */
    auditKey?: AuditKey | null;
    now: Date;
    kind: string;
    rule?: string | null;
    detail?: Record<string, unknown>;
    leaseOwner?: string;
  },
): Promise<AuditEvent> {
  const op = await lockOperation(tx, id);
  if (o.leaseOwner) assertLease(op, o.leaseOwner, o.now);
  return appendEvent(
    tx,
    {
      operation_id: id,
      at: o.now,
      actor: o.actor,
      kind: o.kind,
      rule: o.rule ?? null,
      detail: o.detail ?? {},
    },
    o.auditKey,
  );
}

/**
 * `note` on the chain's head as read before (`head`, with the row, in one statement without a lock:
 * currentOperation), in one statement of its own: the row is locked (FOR UPDATE) and the event
 * inserted after `head`, where `note` takes a transaction of four (the lock, the head, the insert and
 * the commit). Should another writer have appended since the read, the event's seq is taken and the
 * statement fails on the chain's key (operation_id, seq), never a forked chain: null, nothing
 * written, and the caller notes the long way. Null too when there is no such operation. Else the
 * event, and the row as the lock found it (a writer waited for has changed it meanwhile).
 */
export async function noteOnHead(
  q: Queryable,
  id: string,
  head: ChainHead,
  o: { actor: string; auditKey?: AuditKey | null; now: Date; kind: string; detail?: Record<string, unknown> },
): Promise<{ op: Operation; event: AuditEvent } | null> {
  const event = noteEvent(
    head,
    { operation_id: id, at: o.now, actor: o.actor, kind: o.kind, rule: null, detail: o.detail ?? {} },
    o.auditKey,
  );
  try {
    const r = await q.query<OperationRow>(NOTE_ON_HEAD, [
      id,
      event.seq,
      event.at.toISOString(),
      event.actor,
      event.kind,
      event.from_state,
      event.to_state,
      JSON.stringify(event.detail),
      event.prev_hash,
      event.hash,
      event.key_id,
    ]);
    return r.rows[0] ? { op: rowToOperation(r.rows[0]), event } : null;
  } catch (err) {
    if (pgCode(err) === UNIQUE_VIOLATION) return null;
    throw err;
  }
}

/** The row locked first (the insert reads it), then the event: a writer holding the lock is waited for. */
const NOTE_ON_HEAD = keepPlan(`
WITH l AS MATERIALIZED (SELECT ${operationColumns('o')} FROM recon.operations o WHERE o.id = $1 FOR UPDATE),
appended AS (
  ${insertEventsSql(`
  SELECT l.id, $2::int, $3::timestamptz, $4::text, $5::text, $6::text, $7::text, NULL, $8::jsonb, $9::text, $10::text,
         $11::text
    FROM l`)}
)
SELECT * FROM l`);
