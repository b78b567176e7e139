/**
 * Reading operations and what is recorded about them (attempts, linked provider transactions,
 * observations): the row shapes, lookups by id, and the filtered lists of `ops list`, `review list`
 * and the agent's `list_open_actions`. Nothing here writes: state changes go through transition.ts.
 */
import { NotFoundError } from '../../errors.js';
import { keepPlan, type Queryable } from '../../store/db.js';
import {
  UNRESOLVED_STATES,
  type Attempt,
  type Observation,
  type Operation,
  type ProviderTransaction,
  type State,
} from '../../types.js';
import { headOf, type ChainHead } from './chain.js';
import { isUnresolved, UNRESOLVED_SQL } from './states.js';

/** A recon.operations row: bigint columns may come back as strings, hence the Number() below. */
export type OperationRow = Omit<Operation, 'amount' | 'attempt_count'> & {
  amount: number | string | null;
  attempt_count: number | string;
};
type AttemptRow = Omit<Attempt, 'number'> & { number: number | string };
export type TransactionRow = Omit<ProviderTransaction, 'amount' | 'client_reference'> & {
  amount: number | string | null;
};
export type ObservationRow = Omit<Observation, 'detail'> & { detail: Observation['detail'] | null };

/**
 * recon.operations' columns by name (all of them, in the table's order): what a statement whose plan
 * a session keeps (keepPlan) returns in place of `*`. A kept plan whose result changes shape is
 * refused by PostgreSQL, and `*` would change with a column a migration adds while recon runs.
 */
const OPERATION_COLUMNS = [
  'id',
  'provider',
  'action',
  'payload',
  'payload_hash',
  'idempotency_key',
  'client_reference',
  'subject',
  'approval',
  'amount',
  'currency',
  'state',
  'attempt_count',
  'created_at',
  'updated_at',
  'first_attempt_at',
  'resolved_at',
  'lease_owner',
  'lease_expires_at',
  'review_reason',
  'assignee',
  'next_check_at',
  'last_checked_at',
] as const;

/** OPERATION_COLUMNS as a select list, each qualified by `alias` when given. */
export function operationColumns(alias?: string): string {
  return OPERATION_COLUMNS.map((c) => (alias ? `${alias}.${c}` : c)).join(', ');
}

/** Row → Operation. Both backends return timestamptz as Date and (with our parsers) bigint as number. */
export function rowToOperation(r: OperationRow): Operation {
  return {
    id: r.id,
    provider: r.provider,
    action: r.action,
    payload: r.payload,
    payload_hash: r.payload_hash,
    idempotency_key: r.idempotency_key,
    client_reference: r.client_reference,
    subject: r.subject,
    approval: r.approval,
    amount: r.amount === null ? null : Number(r.amount),
    currency: r.currency,
    state: r.state,
    attempt_count: Number(r.attempt_count),
    created_at: r.created_at,
    updated_at: r.updated_at,
    first_attempt_at: r.first_attempt_at,
    resolved_at: r.resolved_at,
    lease_owner: r.lease_owner,
    lease_expires_at: r.lease_expires_at,
    review_reason: r.review_reason,
    assignee: r.assignee,
  };
}

export async function findOperation(q: Queryable, id: string): Promise<Operation | null> {
  const r = await q.query<OperationRow>('SELECT * FROM recon.operations WHERE id = $1', [id]);
  return r.rows[0] ? rowToOperation(r.rows[0]) : null;
}

export async function getOperation(q: Queryable, id: string): Promise<Operation> {
  const op = await findOperation(q, id);
  if (!op) throw new NotFoundError(`operation ${id} not found; list operations with: recon ops list`);
  return op;
}

const LOCK_OPERATION = keepPlan(`SELECT ${operationColumns()} FROM recon.operations WHERE id = $1 FOR UPDATE`);

/** Locks the operation row for the rest of the transaction: the serialisation point for its state and audit chain. */
export async function lockOperation(tx: Queryable, id: string): Promise<Operation> {
  const r = await tx.query<OperationRow>(LOCK_OPERATION, [id]);
  if (!r.rows[0]) throw new NotFoundError(`operation ${id} not found; list operations with: recon ops list`);
  return rowToOperation(r.rows[0]);
}

export interface ListFilter {
  states?: State[];
  provider?: string;
  /** Only operations created before this instant. */
  createdBefore?: Date;
  /** Only operations created at or after this instant (`ops list --since`). */
  createdSince?: Date;
  clientReference?: string;
  /**
   * Also the proposals held for a person by the re-plan guard (`review_reason` "held: …"), whatever
   * `states` says: `review list` shows them beside needs_review.
   */
  orHeld?: boolean;
  /** Cursor: only operations listed after this one (in the list's order). */
  after?: string;
  limit: number;
  /** Oldest first (the review queue: whoever waited longest is seen first); default newest first. */
  oldestFirst?: boolean;
}

/**
 * Newest first (or oldest first). When the filter asks for exactly the unresolved states, the predicate is written
 * as the partial index's own so the planner can use `operations_unresolved_idx`.
 */
export async function listOperations(q: Queryable, f: ListFilter): Promise<Operation[]> {
  const { where, params } = filterSql(f);
  if (f.after) {
    // Cursor paging (`--after ID`): the rows after that operation in this order, stable while new
    // operations arrive at the top.
    params.push(f.after);
    where.push(
      `(created_at, id) ${f.oldestFirst ? '>' : '<'} (SELECT created_at, id FROM recon.operations WHERE id = $${params.length}::text)`,
    );
  }
  params.push(f.limit);
  const order = f.oldestFirst ? 'ASC' : 'DESC';
  const sql = `SELECT * FROM recon.operations ${where.length ? 'WHERE ' + where.join(' AND ') : ''}
               ORDER BY created_at ${order}, id ${order} LIMIT $${params.length}::int`;
  const r = await q.query<OperationRow>(sql, params);
  return r.rows.map(rowToOperation);
}

/** How many operations match the filter, whatever its limit and cursor: "showing 50 of 151". */
export async function countOperations(
  q: Queryable,
  f: Omit<ListFilter, 'limit' | 'after' | 'oldestFirst'>,
): Promise<number> {
  const { where, params } = filterSql(f);
  const r = await q.query<{ n: number | string }>(
    `SELECT count(*)::int AS n FROM recon.operations ${where.length ? 'WHERE ' + where.join(' AND ') : ''}`,
    params,
  );
  return Number(r.rows[0]?.n ?? 0);
}

function filterSql(f: Omit<ListFilter, 'limit' | 'after' | 'oldestFirst'>): { where: string[]; params: unknown[] } {
  const where: string[] = [];
  const params: unknown[] = [];
  if (f.states && f.states.length && f.orHeld) {
    params.push(f.states);
    where.push(`(state = ANY($${params.length}::text[]) OR (state = 'proposed' AND review_reason LIKE 'held:%'))`);
  } else if (f.states && f.states.length) {
    const states = f.states;
    const sameAsUnresolved =
      states.length === UNRESOLVED_STATES.length && UNRESOLVED_STATES.every((s) => states.includes(s));
    if (sameAsUnresolved) where.push(`state IN ${UNRESOLVED_SQL}`);
    else {
      params.push(states);
      where.push(`state = ANY($${params.length}::text[])`);
      // Lets the planner prove the partial index applies when all requested states are unresolved.
      if (states.every(isUnresolved)) where.push(`state IN ${UNRESOLVED_SQL}`);
    }
  }
  if (f.provider) {
    params.push(f.provider);
    where.push(`provider = $${params.length}::text`);
  }
  if (f.createdBefore) {
    params.push(f.createdBefore.toISOString());
    where.push(`created_at < $${params.length}::timestamptz`);
  }
  if (f.createdSince) {
    params.push(f.createdSince.toISOString());
    where.push(`created_at >= $${params.length}::timestamptz`);
  }
  if (f.clientReference) {
    params.push(f.clientReference);
    where.push(`client_reference = $${params.length}::text`);
  }
  return { where, params };
}

/** The provider transaction ids linked to each operation, for the JSON shape's `provider_txn_ids`. */
export async function txnIdsByOperation(q: Queryable, ids: string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  if (ids.length === 0) return out;
  const r = await q.query<{ operation_id: string; provider_id: string }>(
    `SELECT operation_id, provider_id FROM recon.provider_transactions
      WHERE operation_id = ANY($1::text[]) ORDER BY linked_at, provider_id`,
    [ids],
  );
  for (const row of r.rows) {
    const list = out.get(row.operation_id) ?? [];
    list.push(row.provider_id);
    out.set(row.operation_id, list);
  }
  return out;
}

export async function attemptsOf(q: Queryable, id: string): Promise<Attempt[]> {
  const r = await q.query<AttemptRow>('SELECT * FROM recon.attempts WHERE operation_id = $1 ORDER BY number', [id]);
  return r.rows.map((a) => ({
    operation_id: a.operation_id,
    number: Number(a.number),
    idempotency_key: a.idempotency_key,
    request_hash: a.request_hash,
    started_at: a.started_at,
    ended_at: a.ended_at,
    outcome: a.outcome,
    error_class: a.error_class,
    provider_request_id: a.provider_request_id,
  }));
}

export async function transactionsOf(q: Queryable, id: string): Promise<ProviderTransaction[]> {
  const r = await q.query<TransactionRow>(
    'SELECT * FROM recon.provider_transactions WHERE operation_id = $1 ORDER BY linked_at, provider_id',
    [id],
  );
  return r.rows.map(rowToTransaction);
}

/**
 * transactionsOf and the operation's chain head (chainHeads), one statement: for a writer holding
 * the row lock, read in a statement begun after the lock was granted (see chainHeads).
 */
export async function transactionsAndHead(
  tx: Queryable,
  id: string,
): Promise<{ transactions: ProviderTransaction[]; head: ChainHead }> {
  const r = await tx.query<
    Partial<TransactionRow> & { head_seq: number | null; head_hash: string | null; head_to_state: State | null }
  >(
    `SELECT h.seq AS head_seq, h.hash AS head_hash, h.to_state AS head_to_state, t.*
       FROM (SELECT seq, hash, to_state FROM recon.audit_events WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1) h
       RIGHT JOIN (SELECT 1) one ON true
       LEFT JOIN recon.provider_transactions t ON t.operation_id = $1
      ORDER BY t.linked_at, t.provider_id`,
    [id],
  );
  const first = r.rows[0];
  const head = headOf(first?.head_seq ?? null, first?.head_hash ?? null, first?.head_to_state ?? null);
  const transactions = r.rows.filter((t) => t.provider_id != null).map((t) => rowToTransaction(t as TransactionRow));
  return { transactions, head };
}

export function rowToTransaction(t: TransactionRow): ProviderTransaction {
  return {
    provider: t.provider,
    provider_id: t.provider_id,
    operation_id: t.operation_id,
    status: t.status,
    state: t.state,
    amount: t.amount === null ? null : Number(t.amount),
    currency: t.currency,
    client_reference: null,
    created: t.created,
    linked_via: t.linked_via,
    linked_at: t.linked_at,
    linked_by: t.linked_by,
  };
}

export async function observationsOf(q: Queryable, id: string): Promise<Observation[]> {
  const r = await q.query<ObservationRow>(
    'SELECT * FROM recon.observations WHERE operation_id = $1 ORDER BY observed_at, id',
    [id],
  );
  return r.rows.map(rowToObservation);
}

export function rowToObservation(o: ObservationRow): Observation {
  return { operation_id: o.operation_id, observed_at: o.observed_at, result: o.result, detail: o.detail ?? {} };
}
