import { LeaseLostError } from '../errors.js';
import type { Queryable } from '../store/db.js';
import type { AuditEvent, LinkedVia, Operation, ProviderTxn, State, ObservationResult } from '../types.js';
import { appendEvent } from './audit.js';
import { lockOperation, rowToOperation, type OperationRow } from './operations.js';
import { assertTransition, isTerminal } from './states.js';

export interface TransitionOptions {
  actor: string;
  now: Date;
  /** Audit event kind, e.g. `submit.classified`, `run.decision`, `review.resolved`. */
  kind: string;
  /** The rule that allowed the move (SPEC §1.6), e.g. `found.confirmed`, `human`. */
  rule: string;
  detail?: Record<string, unknown>;
  review_reason?: string | null;
  assignee?: string | null;
  /** `person` for `review resolve` and `attach`: only a person leaves needs_review (SPEC §3). */
  by?: 'person' | 'system';
  /**
   * The worker's lease token. When given, the move is refused unless that worker still holds an
   * unexpired lease: a worker whose lease was lost must not write over a newer claim.
   */
  leaseOwner?: string;
  /** Keep the lease (e.g. → submitting for a retry); by default a transition releases it. */
  keepLease?: { owner: string; expiresAt: Date };
}

/** Throws LeaseLostError unless `owner` holds an unexpired lease on `op`. */
export function assertLease(
  op: Pick<Operation, 'id' | 'lease_owner' | 'lease_expires_at'>,
  owner: string,
  now: Date,
): void {
  if (op.lease_owner !== owner || !op.lease_expires_at || op.lease_expires_at.getTime() <= now.getTime()) {
    throw new LeaseLostError(
      `lease on ${op.id} was lost (held by ${op.lease_owner ?? 'nobody'}, expires ${op.lease_expires_at?.toISOString() ?? '-'}); result not written`,
    );
  }
}

/**
 * The one way to change an operation's state: checks the move against the state machine,
 * updates the row and appends the audit event in the caller's transaction.
 */
export async function transition(
  tx: Queryable,
  id: string,
  to: State,
  o: TransitionOptions,
): Promise<{ op: Operation; event: AuditEvent }> {
  const op = await lockOperation(tx, id);
  if (o.leaseOwner) assertLease(op, o.leaseOwner, o.now);
  assertTransition(id, op.state, to, { by: o.by, review_reason: o.review_reason });
  const r = await tx.query<OperationRow>(
    `UPDATE recon.operations
        SET state = $2::text, updated_at = $3::timestamptz,
            resolved_at = CASE WHEN $4::boolean THEN $3::timestamptz ELSE NULL END,
            review_reason = CASE WHEN $2::text = 'needs_review' THEN coalesce($5::text, review_reason) ELSE review_reason END,
            assignee = coalesce($6::text, assignee),
            lease_owner = $7::text, lease_expires_at = $8::timestamptz,
            next_check_at = NULL
      WHERE id = $1 RETURNING *`,
    [
      id,
      to,
      o.now.toISOString(),
      isTerminal(to),
      o.review_reason ?? null,
      o.assignee ?? null,
      o.keepLease?.owner ?? null,
      o.keepLease?.expiresAt.toISOString() ?? null,
    ],
  );
  const event = await appendEvent(tx, {
    operation_id: id,
    at: o.now,
    actor: o.actor,
    kind: o.kind,
    from_state: op.state,
    to_state: to,
    rule: o.rule,
    detail: {
      ...(o.detail ?? {}),
      ...(to === 'needs_review' && o.review_reason ? { review_reason: o.review_reason } : {}),
    },
  });
  return { op: rowToOperation(r.rows[0]), event };
}

/** An audit event that records something without changing state (an observation, a wait, a note). */
export async function note(
  tx: Queryable,
  id: string,
  o: {
    actor: string;
    now: Date;
    kind: string;
    rule?: string | null;
    detail?: Record<string, unknown>;
    leaseOwner?: string;
  },
): Promise<AuditEvent> {
  const op = await lockOperation(tx, id);
  if (o.leaseOwner) assertLease(op, o.leaseOwner, o.now);
  return appendEvent(tx, {
    operation_id: id,
    at: o.now,
    actor: o.actor,
    kind: o.kind,
    from_state: op.state,
    to_state: op.state,
    rule: o.rule ?? null,
    detail: o.detail ?? {},
  });
}

/**
 * Links a provider transaction to an operation. A transaction already linked to another
 * operation is not re-pointed (it stays where it is, and the caller is told).
 */
export async function linkTransaction(
  tx: Queryable,
  provider: string,
  operationId: string,
  t: ProviderTxn,
  how: { via: LinkedVia; by: string; at: Date },
): Promise<{ linked: boolean; existingOperation: string | null }> {
  return (await linkTransactions(tx, [{ provider, operationId, txn: t }], how))[0];
}

/**
 * linkTransaction for many at once: two statements whatever their number (the second only when
 * some were already linked elsewhere). One statement cannot insert the same (provider, provider_id)
 * twice: callers pass each at most once.
 */
export async function linkTransactions(
  tx: Queryable,
  links: { provider: string; operationId: string; txn: ProviderTxn }[],
  how: { via: LinkedVia; by: string; at: Date },
): Promise<{ linked: boolean; existingOperation: string | null }[]> {
  if (links.length === 0) return [];
  const key = (provider: string, id: string) => `${provider}\u0000${id}`;
  const r = await tx.query<{ provider: string; provider_id: string }>(
    `INSERT INTO recon.provider_transactions
       (provider, provider_id, operation_id, status, state, amount, currency, linked_via, linked_at, linked_by, created)
     SELECT provider, provider_id, operation_id, status, state, amount, currency, $8, $9::timestamptz, $10, created
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $11::timestamptz[])
            AS u(provider, provider_id, operation_id, status, state, amount, currency, created)
     ON CONFLICT (provider, provider_id) DO UPDATE SET status = EXCLUDED.status, state = EXCLUDED.state
       WHERE recon.provider_transactions.operation_id = EXCLUDED.operation_id
     RETURNING provider, provider_id`,
    [
      links.map((l) => l.provider),
      links.map((l) => l.txn.provider_id),
      links.map((l) => l.operationId),
      links.map((l) => l.txn.status),
      links.map((l) => l.txn.state),
      links.map((l) => l.txn.amount),
      links.map((l) => l.txn.currency),
      how.via,
      how.at.toISOString(),
      how.by,
      links.map((l) => (l.txn.created ? l.txn.created.toISOString() : null)),
    ],
  );
  const linked = new Set(r.rows.map((row) => key(row.provider, row.provider_id)));
  const refused = links.filter((l) => !linked.has(key(l.provider, l.txn.provider_id)));
  const ownerOf = new Map<string, string>();
  if (refused.length) {
    const owners = await tx.query<{ provider: string; provider_id: string; operation_id: string }>(
      `SELECT p.provider, p.provider_id, p.operation_id FROM recon.provider_transactions p
         JOIN unnest($1::text[], $2::text[]) AS u(provider, provider_id) USING (provider, provider_id)`,
      [refused.map((l) => l.provider), refused.map((l) => l.txn.provider_id)],
    );
    for (const o of owners.rows) ownerOf.set(key(o.provider, o.provider_id), o.operation_id);
  }
  return links.map((l) =>
    linked.has(key(l.provider, l.txn.provider_id))
      ? { linked: true, existingOperation: null }
      : { linked: false, existingOperation: ownerOf.get(key(l.provider, l.txn.provider_id)) ?? null },
  );
}

export async function recordObservation(
  tx: Queryable,
  operationId: string,
  o: { at: Date; result: ObservationResult; detail: Record<string, unknown> },
): Promise<void> {
  await recordObservations(tx, [{ operationId, ...o }]);
}

/**
 * Observations (the evidence the rule reads), and each operation's last_checked_at with them:
 * a pass of `recon run` does not claim what was looked up after it began (claimForRun).
 */
export async function recordObservations(
  tx: Queryable,
  rows: { operationId: string; at: Date; result: ObservationResult; detail: Record<string, unknown> }[],
): Promise<void> {
  if (rows.length === 0) return;
  const params = [
    rows.map((r) => r.operationId),
    rows.map((r) => r.at.toISOString()),
    rows.map((r) => r.result),
    rows.map((r) => JSON.stringify(r.detail)),
  ];
  await tx.query(
    `INSERT INTO recon.observations (operation_id, observed_at, result, detail)
     SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::jsonb[])`,
    params,
  );
  await tx.query(
    `UPDATE recon.operations o SET last_checked_at = greatest(o.last_checked_at, u.at)
       FROM (SELECT id, max(at) AS at FROM unnest($1::text[], $2::timestamptz[]) AS x(id, at) GROUP BY id) u
      WHERE o.id = u.id`,
    params.slice(0, 2),
  );
}
