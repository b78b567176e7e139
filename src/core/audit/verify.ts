/**
 * audit verify (SPEC §5): re-computes every chain (hashes, HMACs under the audit key, sequence,
 * each event starting where the previous one ended), compares each chain's end with the
 * operation's state and with the heads of an `--anchor` file. The chain itself (hashing, heads,
 * appending) is the journal's: src/core/journal/chain.ts.
 */
import { UsageError } from '../../errors.js';
import type { Queryable } from '../../store/db.js';
import type { AuditEvent, State } from '../../types.js';
import type { AnchorHeads } from './anchor.js';
import type { AuditKey } from '../../lib/keyed-hash.js';
import { eventHash, GENESIS_HASH, rowToEvent, type AuditEventRow } from '../journal/chain.js';

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
