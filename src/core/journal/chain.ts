import { UsageError } from '../../errors.js';
import type { Queryable } from '../../store/db.js';
import type { AuditEvent, State } from '../../types.js';
import type { AnchorHeads } from '../audit/anchor.js';
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
  const body = canonicalJson({
    operation_id: ev.operation_id,
    seq: ev.seq,
    at: ev.at.toISOString(),
    actor: ev.actor,
    kind: ev.kind,
    from_state: ev.from_state,
    to_state: ev.to_state,
    rule: ev.rule,
    detail: ev.detail,
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

const INSERT_EVENTS = `
  INSERT INTO recon.audit_events (operation_id, seq, at, actor, kind, from_state, to_state, rule, detail, prev_hash, hash,
                                  key_id)
  SELECT * FROM unnest($1::text[], $2::int[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[],
                       $8::text[], $9::jsonb[], $10::text[], $11::text[], $12::text[])`;

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

/**
 * The head of each operation's chain (genesis for none), one query: the one reader of chain heads.
 * A head is final only while its reader holds the operation's row lock (every chain writer does
 * while it appends), read in a statement that began after the lock was granted: under READ
 * COMMITTED a statement's snapshot predates any wait for a lock, so reading the head in the
 * locking statement itself could miss an event appended by the writer it waited for.
 */
export async function chainHeads(q: Queryable, ids: string[]): Promise<Map<string, ChainHead>> {
  const r = await q.query<{ id: string; seq: number | null; hash: string | null; to_state: State | null }>(
    `SELECT i.id, e.seq, e.hash, e.to_state FROM unnest($1::text[]) AS i(id)
       LEFT JOIN LATERAL (SELECT seq, hash, to_state FROM recon.audit_events WHERE operation_id = i.id
                           ORDER BY seq DESC LIMIT 1) e ON true`,
    [ids],
  );
  return new Map(
    r.rows.map((h) => [
      h.id,
      h.seq === null
        ? { seq: 0, hash: GENESIS_HASH, to_state: null }
        : { seq: Number(h.seq), hash: h.hash!, to_state: h.to_state },
    ]),
  );
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
  const event = chainEvent(head, { ...ev, from_state: head.to_state ?? null, to_state: head.to_state ?? null }, key);
  await insertEvents(tx, [event]);
  return event;
}

type AuditEventRow = Omit<AuditEvent, 'seq' | 'at' | 'detail'> & {
  seq: number | string;
  at: Date | string;
  detail: AuditEvent['detail'] | null;
};

function rowToEvent(r: AuditEventRow): AuditEvent {
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

interface BrokenLink {
  operation_id: string;
  seq: number;
  /**
   * hash_mismatch, prev_hash_mismatch, seq_gap: an event was changed or removed inside the chain.
   * state_gap: an event's from_state is not the previous event's to_state (the state was changed
   * behind recon's back, and a later event started from the changed row). bad_hmac: a keyed event
   * whose HMAC does not verify under the audit key (forged by someone without the key, or
   * altered); checked only when the key is given. unkeyed: an unkeyed event after its chain's
   * first keyed one (a downgrade to the public sha256 chain); found with or without the key.
   * missing_chain: an operation without any event. state_mismatch: the chain's last to_state is not
   * the operation's state (a tail deleted, or the state changed behind recon). orphan_chain: events
   * of an operation that does not exist. truncated / anchor_mismatch: the chain ends before, or
   * differs at, the head recorded in the `--anchor` file.
   */
  problem:
    | 'hash_mismatch'
    | 'prev_hash_mismatch'
    | 'seq_gap'
    | 'state_gap'
    | 'bad_hmac'
    | 'unkeyed'
    | 'missing_chain'
    | 'state_mismatch'
    | 'orphan_chain'
    | 'truncated'
    | 'anchor_mismatch';
  expected: string;
  found: string;
}

export interface VerifyReport {
  ok: boolean;
  operations_checked: number;
  events_checked: number;
  broken: BrokenLink[];
  /** What the audit key let this run check (SPEC §5 "Keyed chain"). */
  keying: KeyingReport;
}

export interface KeyingReport {
  /**
   * `checked`: the key was given, every keyed event's HMAC was checked. `not_checked`: keyed events
   * exist but no key was given: only the chain (seq, prev_hash, states) was checked for them, so a
   * forged keyed event would pass. `unkeyed_store`: no keyed event and no key: the public sha256
   * chain was checked, which anyone who may insert audit rows can compute.
   */
  hmac: 'checked' | 'not_checked' | 'unkeyed_store';
  /** When the store's first keyed event was written (the database's clock); null: never. */
  keyed_since: string | null;
  /** The id of the key the store is keyed with (never the key). */
  key_id: string | null;
  keyed_events: number;
  unkeyed_events: number;
}

export interface VerifyOptions {
  pageSize?: number;
  operationId?: string;
  /** Heads shown earlier (`--anchor`): no chain may end before, or differ at, its head. */
  anchor?: AnchorHeads;
  /** Filled with every chain's head as read, for writing the next anchor. */
  heads?: AnchorHeads;
  /** The audit key: keyed events are checked with it. Without it, only their chain is checked. */
  key?: AuditKey | null;
}

/**
 * Re-computes every chain, reading the table in keyset pages so a large trail is never held
 * in memory, and reports the first broken link per operation. Then what the chains alone cannot
 * show: operations without a chain, chains whose last to_state is not their operation's state,
 * chains without an operation, and, against an anchor, chains that end before a head they had.
 */
export async function verifyChains(q: Queryable, opts: VerifyOptions = {}): Promise<VerifyReport> {
  const pageSize = opts.pageSize ?? 5000;
  const key = opts.key ?? null;
  const marker = await keyingMarker(q);
  if (key && marker && marker.key_id !== key.id)
    throw new UsageError(
      `the audit key given (key id ${key.id}) is not the one this store's trail is keyed with (key id ${marker.key_id}, since ${marker.since}); nothing was checked. Set RECON_AUDIT_KEY or auditKey to that key`,
    );
  const keying: KeyingReport = {
    hmac: 'unkeyed_store',
    keyed_since: marker?.since ?? null,
    key_id: marker?.key_id ?? null,
    keyed_events: 0,
    unkeyed_events: 0,
  };
  const report: VerifyReport = { ok: true, operations_checked: 0, events_checked: 0, broken: [], keying };
  let keyedHere = false;
  const anchor: AnchorHeads = opts.anchor ?? new Map<string, [number, string]>();
  const lastSeq = new Map<string, number>();
  let cursor: [string, number] = ['', 0];
  let current: string | null = null;
  let prev: Link = { seq: 0, hash: GENESIS_HASH, to_state: null };
  let brokenHere = false;
  const endChain = () => {
    if (current === null) return;
    if (anchor.has(current)) lastSeq.set(current, prev.seq);
    opts.heads?.set(current, [prev.seq, prev.hash]);
  };
  for (;;) {
    const page = await q.query<AuditEventRow>(
      `SELECT * FROM recon.audit_events
        WHERE (operation_id, seq) > ($1::text, $2::int) AND ($4::text IS NULL OR operation_id = $4::text)
        ORDER BY operation_id, seq LIMIT $3::int`,
      [cursor[0], cursor[1], pageSize, opts.operationId ?? null],
    );
    for (const row of page.rows) {
      const ev = rowToEvent(row);
      if (ev.operation_id !== current) {
        endChain();
        current = ev.operation_id;
        prev = { seq: 0, hash: GENESIS_HASH, to_state: null };
        brokenHere = false;
        keyedHere = false;
        report.operations_checked++;
      }
      report.events_checked++;
      if (!brokenHere) {
        const problem = checkLink(prev, ev, key, keyedHere);
        if (problem) {
          report.broken.push(problem);
          brokenHere = true;
        }
      }
      const head = anchor.get(ev.operation_id);
      if (head && head[0] === ev.seq && head[1] !== ev.hash) {
        report.broken.push({
          operation_id: ev.operation_id,
          seq: ev.seq,
          problem: 'anchor_mismatch',
          expected: head[1],
          found: ev.hash,
        });
      }
      prev = { seq: ev.seq, hash: ev.hash, to_state: ev.to_state };
      if (ev.key_id !== null) keyedHere = true;
      if (ev.key_id !== null) keying.keyed_events++;
      else keying.unkeyed_events++;
    }
    if (page.rows.length < pageSize) break;
    const last = page.rows[page.rows.length - 1];
    cursor = [last.operation_id, Number(last.seq)];
  }
  endChain();
  report.broken.push(...(await chainsVersusOperations(q, opts.operationId ?? null)));
  for (const [id, [seq, hash]] of anchor) {
    if (opts.operationId !== undefined && id !== opts.operationId) continue;
    const ends = lastSeq.get(id) ?? 0;
    if (ends < seq)
      report.broken.push({
        operation_id: id,
        seq,
        problem: 'truncated',
        expected: hash,
        found: ends === 0 ? 'no chain' : `chain ends at seq ${ends}`,
      });
  }
  report.broken.sort((a, b) => (a.operation_id < b.operation_id ? -1 : a.operation_id > b.operation_id ? 1 : 0));
  keying.hmac = key ? 'checked' : keying.keyed_events > 0 || marker ? 'not_checked' : 'unkeyed_store';
  report.ok = report.broken.length === 0;
  return report;
}

/**
 * What only the operations table can tell: each operation's chain exists and ends in its state,
 * and every chain has an operation. One statement each (one snapshot), returning only problems.
 */
async function chainsVersusOperations(q: Queryable, operationId: string | null): Promise<BrokenLink[]> {
  const out: BrokenLink[] = [];
  const heads = await q.query<{ id: string; state: string; seq: number | null; to_state: string | null }>(
    `SELECT o.id, o.state, e.seq, e.to_state FROM recon.operations o
       LEFT JOIN LATERAL (SELECT seq, to_state FROM recon.audit_events WHERE operation_id = o.id
                           ORDER BY seq DESC LIMIT 1) e ON true
      WHERE ($1::text IS NULL OR o.id = $1::text) AND (e.seq IS NULL OR e.to_state IS DISTINCT FROM o.state)
      ORDER BY o.id`,
    [operationId],
  );
  for (const h of heads.rows) {
    out.push(
      h.seq === null
        ? { operation_id: h.id, seq: 0, problem: 'missing_chain', expected: 'a recorded event', found: 'no events' }
        : {
            operation_id: h.id,
            seq: Number(h.seq),
            problem: 'state_mismatch',
            expected: h.state,
            found: h.to_state ?? 'null',
          },
    );
  }
  const orphans = await q.query<{ operation_id: string; seq: number }>(
    `SELECT e.operation_id, max(e.seq) AS seq FROM recon.audit_events e
      WHERE ($1::text IS NULL OR e.operation_id = $1::text)
        AND NOT EXISTS (SELECT 1 FROM recon.operations o WHERE o.id = e.operation_id)
      GROUP BY e.operation_id ORDER BY e.operation_id`,
    [operationId],
  );
  for (const o of orphans.rows)
    out.push({
      operation_id: o.operation_id,
      seq: Number(o.seq),
      problem: 'orphan_chain',
      expected: 'an operation',
      found: 'none',
    });
  return out;
}

/** The previous event, as the next one is checked against it. */
interface Link {
  seq: number;
  hash: string;
  to_state: State | null;
}

/** Where keying began (migration 0004's one row), or null. */
async function keyingMarker(q: Queryable): Promise<{ key_id: string; since: string } | null> {
  const r = await q.query<{ key_id: string; since: Date | string }>('SELECT key_id, since FROM recon.audit_keying');
  const m = r.rows[0];
  return m ? { key_id: m.key_id, since: new Date(m.since).toISOString() } : null;
}

/**
 * The first problem of one link. A keyed event is checked with the key when it is given; without
 * it, only its place in the chain (seq, prev_hash, states). An unkeyed event after a keyed one in
 * its chain is refused by the database and reported here (the table's owner can bypass the one).
 */
function checkLink(prev: Link, ev: AuditEvent, key: AuditKey | null, keyedBefore: boolean): BrokenLink | null {
  if (ev.seq !== prev.seq + 1) {
    return {
      operation_id: ev.operation_id,
      seq: ev.seq,
      problem: 'seq_gap',
      expected: String(prev.seq + 1),
      found: String(ev.seq),
    };
  }
  if (ev.prev_hash !== prev.hash) {
    return {
      operation_id: ev.operation_id,
      seq: ev.seq,
      problem: 'prev_hash_mismatch',
      expected: prev.hash,
      found: ev.prev_hash,
    };
  }
  if (ev.key_id === null && keyedBefore) {
    return {
      operation_id: ev.operation_id,
      seq: ev.seq,
      problem: 'unkeyed',
      expected: 'a keyed event (its chain was keyed before)',
      found: 'an unkeyed event',
    };
  }
  if (ev.key_id === null) {
    const expected = eventHash(ev.prev_hash, ev);
    if (expected !== ev.hash)
      return { operation_id: ev.operation_id, seq: ev.seq, problem: 'hash_mismatch', expected, found: ev.hash };
  } else if (key) {
    if (ev.key_id !== key.id)
      return {
        operation_id: ev.operation_id,
        seq: ev.seq,
        problem: 'bad_hmac',
        expected: `key id ${key.id}`,
        found: `key id ${ev.key_id}`,
      };
    const expected = eventHash(ev.prev_hash, ev, key);
    if (expected !== ev.hash)
      return { operation_id: ev.operation_id, seq: ev.seq, problem: 'bad_hmac', expected, found: ev.hash };
  }
  // Every event starts where the previous one ended; the first (recorded) from nothing.
  if (ev.from_state !== prev.to_state) {
    return {
      operation_id: ev.operation_id,
      seq: ev.seq,
      problem: 'state_gap',
      expected: prev.to_state ?? 'null',
      found: ev.from_state ?? 'null',
    };
  }
  return null;
}
