/**
 * The built-in actions' payloads, typed for the MCP input schemas and for `openRecon().act()` (SPEC
 * §9). A provider's name is the caller's choice ("stripe", "stripe_eu"), so the schema offers the
 * typed shape beside a free one; the provider's own check (src/providers/validate.ts) decides.
 */
import { z } from 'zod';

/** A Stripe refund (https://docs.stripe.com/api/refunds/create): which payment, how much, why. */
const stripeRefundPayload = z
  .object({
    payment_intent: z.string().min(1).max(255).optional().describe('The payment to refund, e.g. "pi_123" (or charge)'),
    charge: z.string().min(1).max(255).optional().describe('The charge to refund, e.g. "ch_123" (or payment_intent)'),
    amount: z.number().int().positive().optional().describe('Minor units (cents): 2599 is 25.99 USD; absent: all'),
    currency: z.string().length(3).optional().describe('ISO 4217, lower case, e.g. "usd"'),
    reason: z.enum(['duplicate', 'fraudulent', 'requested_by_customer']).optional(),
    metadata: z
      .record(z.string(), z.string())
      .optional()
      .describe('Your own keys; recon_* keys are recon’s and refused'),
  })
  // Strict: a payload with other fields is taken whole by the free shape, never stripped to these.
  .strict()
  .describe('Stripe refund');

export type StripeRefundPayload = z.infer<typeof stripeRefundPayload>;

/** `payload` in propose_action's input schema. */
export const payloadSchema = z
  .union([
    stripeRefundPayload,
    z.record(z.string(), z.unknown()).describe('Any other provider action: the fields that provider expects'),
  ])
  .describe(
    'Exactly what the provider is asked to do, frozen once recorded. Stripe refund: {payment_intent or charge, amount (minor units), currency, reason?}',
  );
