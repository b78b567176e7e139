import type { Queryable } from '../store/db.js';
import type { AuditEvent, ObservationResult, Operation, ProviderTxn, State } from '../types.js';

/**
 * A group of reconciliation decisions written by one SQL statement: one round trip and one commit
 * whatever the group's size, and one UPDATE per operation (state, `last_checked_at` and the lease
 * release together; three updates of the row before, none of them HOT).
 *
 * npm run bench (write-path, claims) and a CPU profile of `recon run` showed the process idle most
 * of the time, waiting for the store: ~9 round trips per group (BEGIN, lock, observations,
 * last_checked_at, links, state, chain heads, events, COMMIT), with a WAL flush for the commit.
 *
 * The statement re-checks each operation under its row lock (FOR UPDATE, in id order so that two
 * groups never wait on each other in a cycle) and writes only those that pass: our lease unexpired
 * (a worker whose lease was lost must not write over a newer claim) and the state the rule saw.
 * The others are returned with what the lock found, for the caller's error.
 *
 * The events arrive chained to heads read before the statement. Every chain writer holds the row
 * lock while it appends, so a head that moved in between means its seq is taken: the insert hits
 * the primary key (operation_id, seq) and the whole statement fails, never a forked chain. Links
 * are expected to succeed (the decision's explanation, hashed into its event, says they did); one
 * refused because the transaction was linked elsewhere meanwhile also fails the statement. The
 * caller then writes the group step by step.
 */

/** One operation's part of the group: its observation, state change and chained event. */
export interface GroupRow {
  id: string;
  /** The state the rule saw; the row must still be in it. */
  fromState: State;
  /** The new state (ignored when `retry`). */
  state: State;
  /** A retry keeps its state and its lease: the attempt follows (claimAttempt). */
  retry: boolean;
  moved: boolean;
  terminal: boolean;
  reviewReason: string | null;
  nextCheckAt: Date | null;
  result: ObservationResult;
  observationDetail: Record<string, unknown>;
  event: AuditEvent;
  links: ProviderTxn[];
  provider: string;
}

export interface GroupOutcome {
  written: boolean;
  /** What the row lock found; absent when the operation does not exist. */
  current?: Pick<Operation, 'id' | 'state' | 'lease_owner' | 'lease_expires_at'>;
}

const WRITE_GROUP = `
WITH u AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::boolean[], $5::boolean[], $6::boolean[], $7::text[],
                       $8::timestamptz[], $9::text[], $10::jsonb[], $11::int[], $12::text[], $13::text[], $14::text[],
                       $15::jsonb[], $16::text[], $17::text[])
    AS u(id, from_state, state, retry, moved, terminal, review_reason, next_check_at, result, observation, seq, kind,
         to_state, rule, detail, prev_hash, hash)
),
locked AS (
  SELECT id, state, lease_owner, lease_expires_at FROM recon.operations
   WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE
),
ok AS (
  SELECT u.* FROM u JOIN locked l ON l.id = u.id
   WHERE l.lease_owner = $19::text AND l.lease_expires_at > $18::timestamptz AND l.state = u.from_state
),
observed AS (
  INSERT INTO recon.observations (operation_id, observed_at, result, detail)
  SELECT id, $18::timestamptz, result, observation FROM ok
),
links AS (
  SELECT x.* FROM unnest($21::text[], $22::text[], $23::text[], $24::text[], $25::text[], $26::bigint[], $27::text[],
                         $28::timestamptz[])
           AS x(operation_id, provider, provider_id, status, state, amount, currency, created)
   WHERE x.operation_id IN (SELECT id FROM ok)
),
linked AS (
  INSERT INTO recon.provider_transactions
    (provider, provider_id, operation_id, status, state, amount, currency, linked_via, linked_at, linked_by, created)
  SELECT provider, provider_id, operation_id, status, state, amount, currency, 'lookup', $18::timestamptz, $20::text, created
    FROM links
  ON CONFLICT (provider, provider_id) DO UPDATE SET status = EXCLUDED.status, state = EXCLUDED.state
    WHERE recon.provider_transactions.operation_id = EXCLUDED.operation_id
  RETURNING 1
),
updated AS (
  UPDATE recon.operations o
     SET state = CASE WHEN ok.retry THEN o.state ELSE ok.state END,
         updated_at = CASE WHEN ok.moved THEN $18::timestamptz ELSE o.updated_at END,
         resolved_at = CASE WHEN NOT ok.moved THEN o.resolved_at WHEN ok.terminal THEN $18::timestamptz ELSE NULL END,
         review_reason = CASE WHEN ok.moved AND ok.state = 'needs_review' THEN coalesce(ok.review_reason, o.review_reason)
                              ELSE o.review_reason END,
         lease_owner = CASE WHEN ok.retry THEN o.lease_owner END,
         lease_expires_at = CASE WHEN ok.retry THEN o.lease_expires_at END,
         next_check_at = CASE WHEN ok.moved THEN NULL ELSE coalesce(ok.next_check_at, o.next_check_at) END,
         last_checked_at = greatest(o.last_checked_at, $18::timestamptz)
    FROM ok
   -- ANY as well as the join: the planner knows nothing of ok's size and may otherwise scan the table.
   WHERE o.id = ok.id AND o.id = ANY($1::text[])
),
appended AS (
  INSERT INTO recon.audit_events (operation_id, seq, at, actor, kind, from_state, to_state, rule, detail, prev_hash, hash)
  SELECT id, seq, $18::timestamptz, $20::text, kind, from_state, to_state, rule, detail, prev_hash, hash FROM ok
)
SELECT l.id, l.state, l.lease_owner, l.lease_expires_at, l.id IN (SELECT id FROM ok) AS written,
       -- Aborts the statement (division by zero) unless every link was made.
       1 / (CASE WHEN (SELECT count(*) FROM linked) = (SELECT count(*) FROM links) THEN 1 ELSE 0 END) AS links_made
  FROM locked l`;

export async function writeGroupRows(
  q: Queryable,
  rows: GroupRow[],
  o: { now: Date; owner: string; actor: string },
): Promise<Map<string, GroupOutcome>> {
  const links = rows.flatMap((r) => r.links.map((t) => ({ r, t })));
  const result = await q.query<{
    id: string;
    state: State;
    lease_owner: string | null;
    lease_expires_at: Date | null;
    written: boolean;
  }>(WRITE_GROUP, [
    rows.map((r) => r.id),
    rows.map((r) => r.fromState),
    rows.map((r) => r.state),
    rows.map((r) => r.retry),
    rows.map((r) => r.moved),
    rows.map((r) => r.terminal),
    rows.map((r) => r.reviewReason),
    rows.map((r) => r.nextCheckAt?.toISOString() ?? null),
    rows.map((r) => r.result),
    rows.map((r) => JSON.stringify(r.observationDetail)),
    rows.map((r) => r.event.seq),
    rows.map((r) => r.event.kind),
    rows.map((r) => r.event.to_state),
    rows.map((r) => r.event.rule),
    rows.map((r) => JSON.stringify(r.event.detail)),
    rows.map((r) => r.event.prev_hash),
    rows.map((r) => r.event.hash),
    o.now.toISOString(),
    o.owner,
    o.actor,
    links.map((l) => l.r.id),
    links.map((l) => l.r.provider),
    links.map((l) => l.t.provider_id),
    links.map((l) => l.t.status),
    links.map((l) => l.t.state),
    links.map((l) => l.t.amount),
    links.map((l) => l.t.currency),
    links.map((l) => (l.t.created ? l.t.created.toISOString() : null)),
  ]);
  const out = new Map<string, GroupOutcome>();
  for (const r of result.rows) {
    out.set(r.id, {
      written: r.written,
      current: {
        id: r.id,
        state: r.state,
        lease_owner: r.lease_owner,
        lease_expires_at: r.lease_expires_at === null ? null : new Date(r.lease_expires_at),
      },
    });
  }
  return out;
}
