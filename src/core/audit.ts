import type { Queryable } from '../store/db.js';
import type { AuditEvent, State } from '../types.js';
import { canonicalJson, sha256Hex } from './canonical.js';

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

/** hash = sha256(prev_hash ‖ canonical JSON of the event), SPEC §2. */
export function eventHash(prevHash: string, ev: Omit<AuditEvent, 'hash' | 'prev_hash'>): string {
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
  return sha256Hex(prevHash + body);
}

/** Builds the chained row for an event whose predecessor is (seq, hash). */
export function chainEvent(prev: { seq: number; hash: string }, ev: NewAuditEvent): AuditEvent {
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
  return { ...base, prev_hash: prev.hash, hash: eventHash(prev.hash, base) };
}

const INSERT_EVENTS = `
  INSERT INTO recon.audit_events (operation_id, seq, at, actor, kind, from_state, to_state, rule, detail, prev_hash, hash)
  SELECT * FROM unnest($1::text[], $2::int[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[],
                       $8::text[], $9::jsonb[], $10::text[], $11::text[])`;

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
  ]);
}

/**
 * Appends one event to an operation's chain. The caller holds the operation's row lock
 * (`lockOperation`), so no other writer can append to this chain at the same time; chains
 * of different operations never contend.
 */
export async function appendEvent(tx: Queryable, ev: NewAuditEvent): Promise<AuditEvent> {
  const last = await tx.query<{ seq: number; hash: string }>(
    'SELECT seq, hash FROM recon.audit_events WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1',
    [ev.operation_id],
  );
  const event = chainEvent(last.rows[0] ?? { seq: 0, hash: GENESIS_HASH }, ev);
  await insertEvents(tx, [event]);
  return event;
}

export function rowToEvent(r: any): AuditEvent {
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
  };
}

export async function eventsOf(q: Queryable, operationId: string): Promise<AuditEvent[]> {
  const r = await q.query('SELECT * FROM recon.audit_events WHERE operation_id = $1 ORDER BY seq', [operationId]);
  return r.rows.map(rowToEvent);
}

export interface BrokenLink {
  operation_id: string;
  seq: number;
  problem: 'hash_mismatch' | 'prev_hash_mismatch' | 'seq_gap';
  expected: string;
  found: string;
}

export interface VerifyReport {
  ok: boolean;
  operations_checked: number;
  events_checked: number;
  broken: BrokenLink[];
}

/**
 * Re-computes every chain, reading the table in keyset pages so a large trail is never held
 * in memory. Reports the first broken link per operation.
 */
export async function verifyChains(
  q: Queryable,
  opts: { pageSize?: number; operationId?: string } = {},
): Promise<VerifyReport> {
  const pageSize = opts.pageSize ?? 5000;
  const report: VerifyReport = { ok: true, operations_checked: 0, events_checked: 0, broken: [] };
  let cursor: [string, number] = ['', 0];
  let current: string | null = null;
  let prev = { seq: 0, hash: GENESIS_HASH };
  let brokenHere = false;
  for (;;) {
    const page = await q.query(
      `SELECT * FROM recon.audit_events
        WHERE (operation_id, seq) > ($1::text, $2::int) AND ($4::text IS NULL OR operation_id = $4::text)
        ORDER BY operation_id, seq LIMIT $3::int`,
      [cursor[0], cursor[1], pageSize, opts.operationId ?? null],
    );
    for (const row of page.rows) {
      const ev = rowToEvent(row);
      if (ev.operation_id !== current) {
        current = ev.operation_id;
        prev = { seq: 0, hash: GENESIS_HASH };
        brokenHere = false;
        report.operations_checked++;
      }
      report.events_checked++;
      if (!brokenHere) {
        const problem = checkLink(prev, ev);
        if (problem) {
          report.broken.push(problem);
          brokenHere = true;
        }
      }
      prev = { seq: ev.seq, hash: ev.hash };
    }
    if (page.rows.length < pageSize) break;
    const last = page.rows[page.rows.length - 1];
    cursor = [last.operation_id, Number(last.seq)];
  }
  report.ok = report.broken.length === 0;
  return report;
}

function checkLink(prev: { seq: number; hash: string }, ev: AuditEvent): BrokenLink | null {
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
  const expected = eventHash(ev.prev_hash, ev);
  if (expected !== ev.hash) {
    return { operation_id: ev.operation_id, seq: ev.seq, problem: 'hash_mismatch', expected, found: ev.hash };
  }
  return null;
}
