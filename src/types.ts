/**
 * recon's domain types.
 *
 * Glossary (SPEC §2):
 * - Operation: one business action (a refund, a shipment) recorded before the provider is called,
 *   with a frozen payload and a fixed idempotency key.
 * - Attempt: one network request that submits an operation to its provider.
 * - ProviderTransaction: what the provider holds for an operation (a Stripe refund, a shipment).
 * - Observation: one provider lookup and its result; the evidence the retry rule reads.
 * - AuditEvent: an append-only, hash-chained record of everything that happened to an operation.
 * - Decision: what the reconciliation rule (`decide()`) concluded, naming the rule that allowed it.
 */

export const STATES = [
  'proposed',
  'approved',
  'submitting',
  'pending',
  'outcome_unknown',
  'needs_review',
  'confirmed',
  'failed',
  'cancelled',
] as const;
export type State = (typeof STATES)[number];

export const UNRESOLVED_STATES: readonly State[] = ['submitting', 'pending', 'outcome_unknown', 'needs_review'];
export const TERMINAL_STATES: readonly State[] = ['confirmed', 'failed', 'cancelled'];

export interface Operation {
  id: string;
  provider: string;
  action: string;
  payload: Record<string, unknown>;
  payload_hash: string;
  idempotency_key: string;
  client_reference: string | null;
  subject: Record<string, unknown> | null;
  approval: string | null;
  /** Minor units (cents), taken from payload.amount when present. */
  amount: number | null;
  /** Lower-case ISO 4217 code, taken from payload.currency when present. */
  currency: string | null;
  state: State;
  attempt_count: number;
  created_at: Date;
  updated_at: Date;
  first_attempt_at: Date | null;
  resolved_at: Date | null;
  lease_owner: string | null;
  lease_expires_at: Date | null;
  review_reason: string | null;
  assignee: string | null;
}

export type AttemptOutcome = 'confirmed' | 'failed' | 'unknown';

export interface Attempt {
  operation_id: string;
  number: number;
  idempotency_key: string;
  request_hash: string;
  started_at: Date;
  ended_at: Date | null;
  /** null while the request is in flight (or the worker died during it). */
  outcome: AttemptOutcome | null;
  error_class: string | null;
  provider_request_id: string | null;
}

/** How a provider transaction got linked to an operation. */
export type LinkedVia = 'response' | 'lookup' | 'webhook' | 'attach' | 'replay';

/** The normalised state a provider transaction maps to. */
export type TxnState = 'confirmed' | 'pending' | 'failed';

/** A provider-side object as an adapter reports it (not yet linked). */
export interface ProviderTxn {
  provider_id: string;
  /** The provider's raw status string (e.g. Stripe refund `succeeded`). */
  status: string;
  state: TxnState;
  amount: number | null;
  currency: string | null;
  /** `metadata.recon_operation_id` or the mapped field: which operation the provider says it belongs to. */
  operation_id: string | null;
  client_reference: string | null;
  idempotency_key?: string | null;
  /** The charge/payment intent or other grouping the audit uses for "same charge, same amount". */
  group?: string | null;
  created: Date | null;
}

export interface ProviderTransaction extends ProviderTxn {
  provider: string;
  linked_via: LinkedVia;
  linked_at: Date;
  linked_by: string;
}

export type ObservationResult = 'found' | 'not_found' | 'pending' | 'unavailable' | 'ambiguous';

export interface Observation {
  operation_id: string;
  observed_at: Date;
  result: ObservationResult;
  detail: Record<string, unknown>;
}

export interface AuditEvent {
  operation_id: string;
  seq: number;
  at: Date;
  actor: string;
  kind: string;
  from_state: State | null;
  to_state: State | null;
  rule: string | null;
  detail: Record<string, unknown>;
  prev_hash: string;
  /**
   * sha256(prev_hash ‖ canonical JSON of the event), or, for a keyed event, HMAC-SHA-256 of the
   * same text under the audit key (SPEC §5 "Keyed chain").
   */
  hash: string;
  /** The audit key's id (audit-key.ts) for a keyed event; null for an event chained without a key. */
  key_id: string | null;
}

/** Durations are milliseconds inside recon; strings like `10m` only at the edges. */
export interface ProviderCapabilities {
  /** How long the provider remembers an idempotency key. Stripe: 24h. */
  keyRetentionMs: number;
  /** True when "not found" by lookup proves the provider holds nothing (Stripe refunds by charge). */
  lookupAuthoritative: boolean;
  /** How long after a not_found we keep waiting before a retry is allowed (delayed indexing). Default 10m. */
  uncertaintyWindowMs: number;
  /** Attempts allowed in total, first included. Default 3. */
  maxAttempts: number;
  /** Unresolved for longer than this since first attempt → needs_review (stale). Default 72h. */
  escalateAfterMs: number;
  /** Requests per second towards the provider (token bucket). */
  rateLimit: number;
  /** Concurrent lookups during `recon run`. */
  concurrency: number;
  /** Request timeout. Default 20s. */
  timeoutMs: number;
  /** Claim lease; must exceed timeoutMs. Default 2m. */
  leaseMs: number;
}

/** Result of one submit request, already classified per SPEC §3. */
export interface SubmitResult {
  /**
   * confirmed/pending/failed: from the returned object's status or a conclusive error;
   * unknown: timeout, 409 in flight, 5xx, 429, connection reset;
   * conflict: 400 idempotency_error (same key, other parameters) → needs_review.
   */
  outcome: 'confirmed' | 'pending' | 'failed' | 'unknown' | 'conflict';
  txn?: ProviderTxn;
  /** e.g. `timeout`, `connection`, `http_503`, `idempotency_error`, `invalid_request_error`. */
  error_class?: string;
  http_status?: number;
  provider_request_id?: string;
  /** true when the provider replayed a stored response (Stripe `Idempotent-Replayed: true`). */
  replayed?: boolean;
  message?: string;
}

/** What a lookup asks for. Any of the fields may be absent. */
export interface LookupQuery {
  operation_id?: string;
  idempotency_key?: string;
  client_reference?: string;
  /** The operation's payload, so adapters can find e.g. the charge/payment intent to list. */
  payload?: Record<string, unknown>;
  since?: Date;
  /** When the operation was recorded: none of its side effects can be older (a ledger scan's reach). */
  recorded_at?: Date;
}

export interface LookupResult {
  result: ObservationResult;
  /** Transactions that carry this operation's identity (metadata, key, client reference). */
  matches: ProviderTxn[];
  /** Look-alikes without identity (same charge, same amount, no recon metadata): shown, never linked. */
  candidates: ProviderTxn[];
  /** Why the provider was unavailable (error class, message; never secrets). */
  error?: string;
  retry_after_ms?: number;
  /** How the adapter searched (e.g. "listed refunds of payment intent pi_1; matched metadata.recon_operation_id = op_1"), for humans. */
  note?: string;
  /**
   * `ledger_scan`: answered from a listing made for a batch of `recon run` (providers/stripe/scan.ts),
   * not by a request of its own; recorded with the observation so that a person can tell.
   */
  source?: 'ledger_scan';
  /** Why nothing can be found, when the provider said so (Stripe: the payment intent does not exist). */
  reason?: string;
  /** The provider's clock: the `Date` header of the lookup's (last) response, when it sent one. */
  provider_date?: Date;
}

export interface ListRange {
  since?: Date;
  until?: Date;
  /** Called after each page is read, for progress and for tests that check streaming. */
  onPage?: (info: { page: number; items: number }) => void;
}

export interface SubmitRequest {
  operation_id: string;
  action: string;
  payload: Record<string, unknown>;
  idempotency_key: string;
  client_reference: string | null;
}

export interface WebhookEvent {
  event_id: string;
  type: string;
  /** The transaction the event is about, when it carries one. */
  txn: ProviderTxn | null;
  raw: unknown;
}

/** The interface every provider adapter implements (stripe, http, module). */
export interface Provider {
  name: string;
  type: string;
  capabilities: ProviderCapabilities;
  submit(req: SubmitRequest): Promise<SubmitResult>;
  /**
   * Throws UsageError (naming the field and the fix) when the adapter could not send this action
   * and payload. Pure, no I/O: run by `ops record` (nothing is written) and again in the claim
   * transaction of every attempt (nothing is claimed), so a payload the adapter cannot send never
   * becomes an attempt, let alone an unknown outcome.
   */
  validatePayload?(req: SubmitRequest): void;
  lookup(query: LookupQuery): Promise<LookupResult>;
  /**
   * Told the lookups a batch of `recon run` is about to make, so that the adapter can answer them
   * from fewer requests (Stripe: one listing of the ledger, see providers/stripe/scan.ts). `backlog`:
   * how many of this provider's operations the pass may decide in all (this batch and the next).
   * Never throws; a lookup it cannot answer is made on its own as before.
   */
  prepareLookups?(queries: LookupQuery[], o: { backlog: number }): Promise<void>;
  /** Fetch one transaction by provider id; null when the provider says 404. */
  get(providerId: string): Promise<ProviderTxn | null>;
  /** Iterate the provider's ledger page by page (audits). Never collects into memory. */
  list?(range: ListRange): AsyncIterable<ProviderTxn>;
  /** Verify and parse a webhook delivery; throws UsageError on a bad signature. */
  parseWebhook?(body: string, signature: string | undefined): WebhookEvent;
  close?(): Promise<void>;
}

/** The decision kinds of the reconciliation rule (SPEC §4). */
export type DecisionKind = 'confirm' | 'pending' | 'fail' | 'retry' | 'wait' | 'review' | 'unavailable';

export interface Decision {
  decision: DecisionKind;
  /** Stable rule name, recorded in the audit trail, e.g. `found.single`, `not_found.window`. */
  rule: string;
  /** The state the operation moves to (or stays in). */
  state: State;
  /** For review: duplicate, mismatch, stale, max_attempts, key_retention, payload_changed, pending_not_found, ambiguous (idempotency_conflict comes from submit). */
  review_reason?: string;
  /** Transactions to link (confirm/pending/fail/review with duplicates). */
  link?: ProviderTxn[];
  /** Human-readable explanation. */
  explanation: string;
  /**
   * `not_found.window` (wait): when the window ends, counted from the first `not_found` of the
   * current streak (SPEC §4); from then a lookup that still finds nothing may retry.
   */
  retry_at?: Date;
}
