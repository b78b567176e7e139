/**
 * What the stripe provider sends for a refund (SPEC §6), checked once for two callers: `ops record`
 * (nothing is written when it throws) and every attempt's claim (nothing is claimed). Only types
 * come from the SDK, so recording does not load stripe-node.
 */
import type Stripe from 'stripe';
import { UsageError } from '../../errors.js';
import type { SubmitRequest } from '../../types.js';

/** Stripe's refund reasons (https://docs.stripe.com/api/refunds/create#create_refund-reason). */
const REASONS = ['duplicate', 'fraudulent', 'requested_by_customer'];

/** The refund's create parameters, our metadata included; throws UsageError naming the field and the fix. */
export function refundParams(req: SubmitRequest, where: string): Stripe.RefundCreateParams {
  if (req.action !== 'refund') {
    throw new UsageError(
      `action: ${JSON.stringify(req.action)} is not supported by ${where} (type stripe); the stripe provider does "refund"`,
    );
  }
  const p = req.payload;
  const params: Stripe.RefundCreateParams = {};
  const target = (field: 'payment_intent' | 'charge') => {
    const v = p[field];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v.length === 0 || v.length > 255)
      throw new UsageError(
        `payload.${field}: must be a Stripe ${field.replace('_', ' ')} id such as "${field === 'charge' ? 'ch_' : 'pi_'}123"`,
      );
    return v;
  };
  const paymentIntent = target('payment_intent');
  const charge = target('charge');
  if (paymentIntent !== undefined && charge !== undefined)
    throw new UsageError('payload.charge: give payment_intent or charge, not both');
  if (paymentIntent !== undefined) params.payment_intent = paymentIntent;
  else if (charge !== undefined) params.charge = charge;
  else
    throw new UsageError(
      'payload.payment_intent: required (or payload.charge) for a Stripe refund: which payment to refund',
    );
  if (p['amount'] !== undefined) {
    if (!Number.isSafeInteger(p['amount']) || (p['amount'] as number) <= 0) {
      throw new UsageError('payload.amount: must be a positive whole number of minor units (cents)');
    }
    params.amount = p['amount'] as number;
  }
  if (p['currency'] !== undefined) {
    if (typeof p['currency'] !== 'string')
      throw new UsageError('payload.currency: must be a currency code such as "usd"');
    params.currency = p['currency'].toLowerCase();
  }
  if (p['reason'] !== undefined) {
    if (typeof p['reason'] !== 'string' || !REASONS.includes(p['reason']))
      throw new UsageError(`payload.reason: must be one of ${REASONS.join(', ')} (Stripe's refund reasons)`);
    params.reason = p['reason'];
  }
  let metadata: Record<string, string> = {};
  const given = p['metadata'];
  if (given !== undefined && given !== null) {
    if (typeof given !== 'object' || Array.isArray(given))
      throw new UsageError('payload.metadata: must be an object of strings');
    // fromEntries defines each key as its own, `__proto__` included (an assignment would set the prototype).
    metadata = Object.fromEntries(Object.entries(given).map(([k, v]) => [k, String(v)]));
  }
  // Ours win over the caller's: lookup depends on them.
  metadata['recon_operation_id'] = req.operation_id;
  if (req.client_reference) metadata['recon_client_reference'] = req.client_reference;
  params.metadata = metadata;
  return params;
}
