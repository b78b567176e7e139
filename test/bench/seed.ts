/**
 * Seeding for the reconciliation benchmarks: `n` outcome_unknown refund operations written straight
 * into the store (one attempt made a few minutes ago), each referencing its own payment intent in
 * the Stripe sandbox; the even ones have a refund at the provider carrying their operation id
 * (→ confirm), the odd ones none (→ wait: inside the uncertainty window).
 */
import type { StripeSandbox } from '../../src/sandbox/stripe/server.js';
import type { Db } from '../../src/store/db.js';
import type { LookupResult, Provider, ProviderCapabilities } from '../../src/types.js';
import { payloadSql } from './lib.js';

const AMOUNT = 1000;

export const opId = (prefix: string, i: number) => `op-${prefix}-${i}`;
export const piId = (prefix: string, i: number) => `pi_${prefix}_${i}`;

/** `every`: every operation has its refund (all confirm), instead of the even ones only. */
export function seedSandbox(sandbox: StripeSandbox, prefix: string, n: number, o: { every?: boolean } = {}): void {
  for (let i = 0; i < n; i++) {
    const payment_intent = piId(prefix, i);
    sandbox.seedPaymentIntent({ amount: AMOUNT, currency: 'usd', id: payment_intent });
    if (o.every || i % 2 === 0)
      sandbox.seedRefund({
        payment_intent,
        amount: AMOUNT,
        currency: 'usd',
        metadata: { recon_operation_id: opId(prefix, i) },
      });
  }
}

export async function seedOperations(db: Db, prefix: string, n: number, now: Date): Promise<void> {
  const p = payloadSql(`'pi_${prefix}_' || g`, String(AMOUNT));
  await db.query(
    `INSERT INTO recon.operations (id, provider, action, payload, payload_hash, idempotency_key, state, amount, currency,
                                   attempt_count, created_at, updated_at, first_attempt_at)
     SELECT 'op-${prefix}-' || g, 'stripe', 'refund', ${p.payload}, ${p.hash}, 'op-${prefix}-' || g, 'outcome_unknown',
            ${AMOUNT}, 'usd', 1, $1::timestamptz - interval '5 minutes' + g * interval '1 millisecond',
            $1::timestamptz - interval '4 minutes', $1::timestamptz - interval '4 minutes'
       FROM generate_series(0, $2::int - 1) AS g`,
    [now.toISOString(), n],
  );
  await db.query('ANALYZE recon.operations');
}

/**
 * A provider that answers lookups from memory, as the sandbox would for the seeded ledger, without
 * any network: what is left of a pass against it is recon's own time (store writes and the rule).
 */
export function instantProvider(prefix: string, capabilities: ProviderCapabilities): Provider {
  return {
    name: 'stripe',
    type: 'stripe',
    capabilities,
    async submit() {
      throw new Error('the instant provider does not submit');
    },
    async lookup(q): Promise<LookupResult> {
      const i = Number(q.operation_id!.slice(`op-${prefix}-`.length));
      if (i % 2) return { result: 'not_found', matches: [], candidates: [] };
      const txn = {
        provider_id: `re_${prefix}_${i}`,
        status: 'succeeded',
        state: 'confirmed' as const,
        amount: AMOUNT,
        currency: 'usd',
        operation_id: q.operation_id!,
        client_reference: null,
        group: piId(prefix, i),
        created: new Date(),
      };
      return { result: 'found', matches: [txn], candidates: [] };
    },
    async get() {
      return null;
    },
  };
}
