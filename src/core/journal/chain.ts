import { keepPlan, type Queryable } from '../../store/db.js';
import type { AuditEvent, State } from '../../types.js';
import { hmacHex, type AuditKey } from '../../lib/keyed-hash.js';
import { canonicalJson, sha256Hex } from '../../lib/canonical.js';

/** The hash of the first event's predecessor. */
export const GENESIS_HASH = '0'.repeat(64);

export interface NewAuditEvent {
  operation_id: string;
  at: Date;
  actor: string;
  kind: string;
  from_state?: State | null;
  to_state?: State | null;
  rule?: string | null;
  detail?: Record<string, unknown>;
}

/**
 * hash = sha256(prev_hash ‖ canonical JSON of the event), SPEC §2; with an audit key, HMAC-SHA-256
 * of the same text under it (SPEC §5 "Keyed chain"). key_id is not part of the text: an event
 * moved between keyed and unkeyed no longer matches either way.
 */
export function eventHash(
  prevHash: string,
  ev: Omit<AuditEvent, 'hash' | 'prev_hash' | 'key_id'>,
  key?: AuditKey | null,
): string {
  // Keys in canonical order already: canonicalJson writes the object as it is, without a sorted copy.
  const body = canonicalJson({
    actor: ev.actor,
    at: ev.at.toISOString(),
    detail: ev.detail,
    from_state: ev.from_state,
    kind: ev.kind,
    operation_id: ev.operation_id,
    rule: ev.rule,
    seq: ev.seq,
    to_state: ev.to_state,
  });
  return key ? hmacHex(key, prevHash + body) : sha256Hex(prevHash + body);
}

/** Builds the chained row for an event whose predecessor is (seq, hash), keyed when a key is given. */
export function chainEvent(prev: ChainHead, ev: NewAuditEvent, key?: AuditKey | null): AuditEvent {
  const base = {
    operation_id: ev.operation_id,
    seq: prev.seq + 1,
    at: ev.at,
    actor: ev.actor,
    kind: ev.kind,
    from_state: ev.from_state ?? null,
    to_state: ev.to_state ?? null,
    rule: ev.rule ?? null,
    detail: ev.detail ?? {},
  };
  return { ...base, prev_hash: prev.hash, hash: eventHash(prev.hash, base, key), key_id: key?.id ?? null };
}

/**
 * The one spelling of an audit event's INSERT (issue 25): insertEvents and the move statement
 * (transition.ts, WRITE_MOVES) both use it. `rows` yields (operation_id, seq, at, actor, kind,
 * from_state, to_state, rule, detail, prev_hash, hash, key_id), each chained by chainEvent.
 */
export function insertEventsSql(rows: string): string {
  return `INSERT INTO recon.audit_events (operation_id, seq, at, actor, kind, from_state, to_state, rule, detail, prev_hash,
                                  hash, key_id)
  ${rows.trim()}`;
}

const INSERT_EVENTS = keepPlan(
  insertEventsSql(`
  SELECT * FROM unnest($1::text[], $2::int[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[],
                       $8::text[], $9::jsonb[], $10::text[], $11::text[], $12::text[])`),
);

/** Inserts already-chained events in one statement. */
export async function insertEvents(q: Queryable, events: AuditEvent[]): Promise<void> {
  if (events.length === 0) return;
  await q.query(INSERT_EVENTS, [
    events.map((e) => e.operation_id),
    events.map((e) => e.seq),
    events.map((e) => e.at.toISOString()),
    events.map((e) => e.actor),
    events.map((e) => e.kind),
    events.map((e) => e.from_state),
    events.map((e) => e.to_state),
    events.map((e) => e.rule),
    events.map((e) => JSON.stringify(e.detail)),
    events.map((e) => e.prev_hash),
    events.map((e) => e.hash),
    events.map((e) => e.key_id),
  ]);
}

/** The last event of an operation's chain: the next event is chained to it. */
export interface ChainHead {
  seq: number;
  hash: string;
  /** The state the chain ends in (null before the first event): where an event that changes no state stands. */
  to_state?: State | null;
}

/** A chain's head as a statement read it: its last event's seq, hash and state, or none yet (the genesis). */
export function headOf(seq: number | string | null, hash: string | null, toState: State | null): ChainHead {
  return seq === null
    ? { seq: 0, hash: GENESIS_HASH, to_state: null }
    : { seq: Number(seq), hash: hash!, to_state: toState };
}

/**
 * The read of one operation's head, its id an SQL expression (a lateral join's column): the last
 * event's seq, hash and to_state, or no row (the genesis: headOf(null, …)). chainHeads' statement,
 * and applyFound's with the links it reads (src/core/found/apply.ts).
 */
export const headSql = (id: string) =>
  `SELECT seq, hash, to_state FROM recon.audit_events WHERE operation_id = ${id} ORDER BY seq DESC LIMIT 1`;

/**
 * The head of each operation's chain (genesis for none), one query. A head is final only while its
 * reader holds the operation's row lock (every chain writer does while it appends), read in a
 * statement that began after the lock was granted: under READ COMMITTED a statement's snapshot
 * predates any wait for a lock, so reading the head in the locking statement itself could miss an
 * event appended by the writer it waited for. (transactionsAndHead reads it with the links under
 * the lock; readForClaim without one, for a claim whose event the chain's key refuses if it moved.)
 */
export async function chainHeads(q: Queryable, ids: string[]): Promise<Map<string, ChainHead>> {
  const r = await q.query<{ id: string; seq: number | null; hash: string | null; to_state: State | null }>(
    keepPlan(`SELECT i.id, e.seq, e.hash, e.to_state FROM unnest($1::text[]) AS i(id)
       LEFT JOIN LATERAL (${headSql('i.id')}) e ON true`),
    [ids],
  );
  return new Map(r.rows.map((h) => [h.id, headOf(h.seq, h.hash, h.to_state)]));
}

/**
 * Appends one event that changes no state (a note, an observation, an `mcp.call`) to an operation's
 * chain. Its from_state and to_state are where the chain stands, never the operation row's state:
 * a row changed behind recon's back (an UPDATE through SQL) must stay visible to `audit verify` as
 * a chain that does not end in the row's state, not be copied into the trail by the next note.
 * The caller holds the operation's row lock (`lockOperation`), so no other writer can append to
 * this chain at the same time; chains of different operations never contend.
 */
export async function appendEvent(
  tx: Queryable,
  ev: Omit<NewAuditEvent, 'from_state' | 'to_state'>,
  key?: AuditKey | null,
): Promise<AuditEvent> {
  const head = (await chainHeads(tx, [ev.operation_id])).get(ev.operation_id)!;
  const event = noteEvent(head, ev, key);
  await insertEvents(tx, [event]);
  return event;
}

/** An event that changes no state, chained after `head`: its from_state and to_state are where the chain stands. */
export function noteEvent(
  head: ChainHead,
  ev: Omit<NewAuditEvent, 'from_state' | 'to_state'>,
  key?: AuditKey | null,
): AuditEvent {
  return chainEvent(head, { ...ev, from_state: head.to_state ?? null, to_state: head.to_state ?? null }, key);
}

export type AuditEventRow = Omit<AuditEvent, 'seq' | 'at' | 'detail'> & {
  seq: number | string;
  at: Date | string;
  detail: AuditEvent['detail'] | null;
};

export function rowToEvent(r: AuditEventRow): AuditEvent {
  return {
    operation_id: r.operation_id,
    seq: Number(r.seq),
    at: new Date(r.at),
    actor: r.actor,
    kind: r.kind,
    from_state: r.from_state,
    to_state: r.to_state,
    rule: r.rule,
    detail: r.detail ?? {},
    prev_hash: r.prev_hash,
    hash: r.hash,
    key_id: r.key_id ?? null,
  };
}

export async function eventsOf(q: Queryable, operationId: string): Promise<AuditEvent[]> {
  const r = await q.query<AuditEventRow>('SELECT * FROM recon.audit_events WHERE operation_id = $1 ORDER BY seq', [
    operationId,
  ]);
  return r.rows.map(rowToEvent);
}
