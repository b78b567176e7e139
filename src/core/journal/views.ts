import type { Queryable } from '../../store/db.js';
import type { Attempt, AuditEvent, Observation, Operation, ProviderTransaction } from '../../types.js';
import { eventsOf } from './chain.js';
import { attemptsOf, getOperation, observationsOf, transactionsOf, txnIdsByOperation } from './operations.js';

/** The operation's JSON shape of SPEC §7 (fields may be added, never renamed). */
export interface OperationJson {
  id: string;
  provider: string;
  action: string;
  state: string;
  idempotency_key: string;
  client_reference: string | null;
  amount: number | null;
  currency: string | null;
  attempt_count: number;
  created_at: string;
  updated_at: string;
  provider_txn_ids: string[];
  review_reason: string | null;
  first_attempt_at: string | null;
  resolved_at: string | null;
  assignee: string | null;
  approval: string | null;
  payload_hash: string;
  payload: Record<string, unknown>;
  subject: Record<string, unknown> | null;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

function operationJson(op: Operation, txnIds: string[]): OperationJson {
  return {
    id: op.id,
    provider: op.provider,
    action: op.action,
    state: op.state,
    idempotency_key: op.idempotency_key,
    client_reference: op.client_reference,
    amount: op.amount,
    currency: op.currency,
    attempt_count: op.attempt_count,
    created_at: op.created_at.toISOString(),
    updated_at: op.updated_at.toISOString(),
    provider_txn_ids: txnIds,
    review_reason: op.review_reason,
    first_attempt_at: iso(op.first_attempt_at),
    resolved_at: iso(op.resolved_at),
    assignee: op.assignee,
    approval: op.approval,
    payload_hash: op.payload_hash,
    payload: op.payload,
    subject: op.subject,
  };
}

export async function operationsJson(q: Queryable, ops: Operation[]): Promise<OperationJson[]> {
  const txns = await txnIdsByOperation(
    q,
    ops.map((o) => o.id),
  );
  return ops.map((o) => operationJson(o, txns.get(o.id) ?? []));
}

export interface OperationDetail {
  operation: OperationJson;
  attempts: Attempt[];
  provider_transactions: ProviderTransaction[];
  observations: Observation[];
  events: AuditEvent[];
}

/** Everything recon knows about one operation: `ops show`. */
export async function showOperation(q: Queryable, id: string): Promise<OperationDetail> {
  const op = await getOperation(q, id);
  const [attempts, txns, observations, events] = await Promise.all([
    attemptsOf(q, id),
    transactionsOf(q, id),
    observationsOf(q, id),
    eventsOf(q, id),
  ]);
  return {
    operation: operationJson(
      op,
      txns.map((t) => t.provider_id),
    ),
    attempts,
    provider_transactions: txns,
    observations,
    events,
  };
}
