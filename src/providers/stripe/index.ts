/**
 * The `stripe` provider (SPEC §6): refunds through the official stripe-node SDK, pointed at
 * `apiBase` (a sandbox in tests). Every submit carries the operation's own idempotency key.
 */
import Stripe from 'stripe';
import { ProviderUnavailableError, UsageError } from '../../errors.js';
import type { StripeProviderConfig } from '../../config/types.js';
import type { Provider, ProviderTxn, SubmitRequest, SubmitResult, WebhookEvent } from '../../types.js';
import { classifyRefund, classifySubmitError, describeError, refundToTxn } from './classify.js';
import { createClient, type ClientDeps } from './client.js';
import { listRefunds, lookupRefunds, planLookup } from './ledger.js';

/** Event types whose `data.object` is a refund (`charge.refund.updated` included: its object is a refund too). */
export const REFUND_EVENT_TYPES = ['refund.created', 'refund.updated', 'refund.failed', 'charge.refund.updated'];

export interface StripeProviderDeps extends ClientDeps {
  now?: () => Date;
}

export function createStripeProvider(config: StripeProviderConfig, deps: StripeProviderDeps = {}): Provider {
  const client = createClient(config, deps);
  const now = deps.now ?? (() => new Date());
  const where = `providers.${config.name}`;

  return {
    name: config.name,
    type: 'stripe',
    capabilities: config.capabilities,

    async submit(req: SubmitRequest): Promise<SubmitResult> {
      const params = refundParams(req, where);
      try {
        // The key is always ours: a key the SDK generated would differ between recon's own
        // retries, and the provider could no longer deduplicate them.
        const refund = await client.call(
          () => client.stripe.refunds.create(params, { idempotencyKey: req.idempotency_key }),
          'write',
        );
        return classifyRefund(refund);
      } catch (err) {
        return classifySubmitError(err);
      }
    },

    lookup(query) {
      return lookupRefunds(client, planLookup(query, config.capabilities.keyRetentionMs, now()));
    },

    async get(providerId: string): Promise<ProviderTxn | null> {
      try {
        return refundToTxn(await client.call(() => client.stripe.refunds.retrieve(providerId), 'read'));
      } catch (err) {
        if (err instanceof Stripe.errors.StripeError && err.statusCode === 404) return null;
        throw new ProviderUnavailableError(`${config.name}: cannot fetch refund ${providerId}: ${describeError(err)}`);
      }
    },

    list(range) {
      return listRefunds(client, range);
    },

    parseWebhook(body: string, signature: string | undefined): WebhookEvent {
      if (!config.webhookSecret) {
        throw new UsageError(
          `${where}.webhookSecret: not configured; set it (or STRIPE_WEBHOOK_SECRET) to verify webhooks`,
        );
      }
      if (!signature) throw new UsageError('--signature: required; pass the Stripe-Signature header of the delivery');
      let event: Stripe.Event;
      try {
        event = client.stripe.webhooks.constructEvent(body, signature, config.webhookSecret);
      } catch (err) {
        const reason =
          err instanceof Stripe.errors.StripeSignatureVerificationError
            ? 'signature does not match'
            : describeError(err);
        throw new UsageError(`--signature: invalid webhook signature (${reason}); check the provider's webhookSecret`);
      }
      const object = (event.data as { object?: { object?: string } }).object;
      const txn =
        REFUND_EVENT_TYPES.includes(event.type) && object?.object === 'refund'
          ? refundToTxn(object as Stripe.Refund)
          : null;
      return { event_id: event.id, type: event.type, txn, raw: event };
    },
  };
}

/** The payload was validated when the operation was recorded; this only shapes it for the SDK. */
function refundParams(req: SubmitRequest, where: string): Stripe.RefundCreateParams {
  if (req.action !== 'refund') {
    throw new UsageError(
      `${where}: action ${JSON.stringify(req.action)} is not supported; the stripe provider does "refund"`,
    );
  }
  const p = req.payload;
  const params: Stripe.RefundCreateParams = {};
  if (typeof p['payment_intent'] === 'string') params.payment_intent = p['payment_intent'];
  else if (typeof p['charge'] === 'string') params.charge = p['charge'];
  else throw new UsageError('payload.payment_intent: required (or payload.charge) for a Stripe refund');
  if (p['amount'] !== undefined) {
    if (!Number.isSafeInteger(p['amount']) || (p['amount'] as number) <= 0) {
      throw new UsageError('payload.amount: must be a positive whole number of minor units (cents)');
    }
    params.amount = p['amount'] as number;
  }
  if (typeof p['currency'] === 'string') params.currency = p['currency'].toLowerCase();
  if (typeof p['reason'] === 'string') params.reason = p['reason'] as Stripe.RefundCreateParams.Reason;
  const metadata: Record<string, string> = {};
  const given = p['metadata'];
  if (given !== undefined && given !== null) {
    if (typeof given !== 'object' || Array.isArray(given))
      throw new UsageError('payload.metadata: must be an object of strings');
    for (const [k, v] of Object.entries(given)) metadata[k] = String(v);
  }
  // Ours win over the caller's: lookup depends on them.
  metadata['recon_operation_id'] = req.operation_id;
  if (req.client_reference) metadata['recon_client_reference'] = req.client_reference;
  params.metadata = metadata;
  return params;
}
