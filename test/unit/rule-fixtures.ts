/** Shared builders for the rule tests: one operation attempted at T0, Stripe-like capabilities. */
import { payloadHash } from '../../src/lib/canonical.js';
import type { RuleInput } from '../../src/core/reconcile/rule.js';
import type { LookupResult, ProviderCapabilities, ProviderTxn } from '../../src/types.js';

const SEC = 1_000;
export const MIN = 60 * SEC;
export const HOUR = 60 * MIN;

export const T0 = new Date('2024-05-01T12:00:00.000Z');
export const at = (ms: number): Date => new Date(T0.getTime() + ms);

const PAYLOAD = { charge: 'ch_1', amount: 1000, currency: 'eur' };
export const HASH = payloadHash(PAYLOAD);

export const CAPS: ProviderCapabilities = {
  keyRetentionMs: 24 * HOUR,
  lookupAuthoritative: false,
  uncertaintyWindowMs: 10 * MIN,
  maxAttempts: 3,
  escalateAfterMs: 72 * HOUR,
  rateLimit: 25,
  concurrency: 8,
  timeoutMs: 20 * SEC,
  leaseMs: 2 * MIN,
};

export function txn(overrides: Partial<ProviderTxn> = {}): ProviderTxn {
  return {
    provider_id: 're_1',
    status: 'succeeded',
    state: 'confirmed',
    amount: 1000,
    currency: 'eur',
    operation_id: 'op_1',
    client_reference: 'order-1',
    group: 'ch_1',
    created: T0,
    ...overrides,
  };
}

export const NOT_FOUND: LookupResult = { result: 'not_found', matches: [], candidates: [] };
export const found = (...matches: ProviderTxn[]): LookupResult => ({ result: 'found', matches, candidates: [] });

export interface InputOverrides extends Partial<Omit<RuleInput, 'operation' | 'capabilities'>> {
  operation?: Partial<RuleInput['operation']>;
  capabilities?: Partial<ProviderCapabilities>;
}

/** Defaults: outcome_unknown after 1 attempt at T0, lookup not_found, now = T0 + 1h. */
export function input(overrides: InputOverrides = {}): RuleInput {
  const { operation, capabilities, ...rest } = overrides;
  return {
    operation: {
      id: 'op_1',
      state: 'outcome_unknown',
      amount: 1000,
      currency: 'eur',
      payload_hash: HASH,
      attempt_count: 1,
      first_attempt_at: T0,
      created_at: at(-1 * MIN),
      client_reference: 'order-1',
      subject: null,
      ...operation,
    },
    retryPayloadHash: HASH,
    history: [],
    lookup: NOT_FOUND,
    capabilities: { ...CAPS, ...capabilities },
    now: at(1 * HOUR),
    ...rest,
  };
}
