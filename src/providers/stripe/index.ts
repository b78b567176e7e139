/**
 * The `stripe` provider (SPEC §6): refunds through the official stripe-node SDK, pointed at
 * `apiBase` (a sandbox in tests). Every submit carries the operation's own idempotency key.
 */
import type Stripe from 'stripe';
import { StripeSdk } from './sdk.js';
import { ProviderUnavailableError, UsageError } from '../../errors.js';
import type { StripeProviderConfig } from '../../config/types.js';
import type { Provider, ProviderTxn, SubmitRequest, SubmitResult, WebhookEvent } from '../../types.js';
import { classifyRefund, classifySubmitError, describeError, refundToTxn, refusedKey } from './classify.js';
import { createClient, type ClientDeps } from './client.js';
import { listRefunds, lookupRefunds, planLookup } from './ledger.js';
import { refundParams } from './payload.js';
import { ledgerScan, pagesPerBatchFor, REFUND_STATUS_EVENTS } from './scan.js';

/** Event types whose `data.object` is a refund (`charge.refund.updated` included: its object is a refund too). */
const REFUND_EVENT_TYPES = ['refund.created', ...REFUND_STATUS_EVENTS];

export interface StripeProviderDeps extends ClientDeps {
  now?: () => Date;
}

export function createStripeProvider(config: StripeProviderConfig, deps: StripeProviderDeps = {}): Provider {
  const client = createClient(config, deps);
  const now = deps.now ?? (() => new Date());
  const where = `providers.${config.name}`;
  // `recon run`'s batches are looked up from one listing of the ledger where that is cheaper (scan.ts).
  const scan = ledgerScan(client, {
    indexingMs: config.capabilities.uncertaintyWindowMs,
    pagesPerBatch: pagesPerBatchFor(config.capabilities),
  });

  return {
    name: config.name,
    type: 'stripe',
    capabilities: config.capabilities,

    validatePayload(req: SubmitRequest): void {
      refundParams(req, where);
    },

    async submit(req: SubmitRequest): Promise<SubmitResult> {
      // Validated when recorded and again in the attempt's claim (validatePayload): this cannot throw.
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
      const plan = planLookup(query, config.capabilities.keyRetentionMs, now());
      const scanned = scan.answer(query, plan);
      return scanned ? Promise.resolve(scanned) : lookupRefunds(client, plan, config.name);
    },

    prepareLookups(queries, o) {
      return scan.prepare(queries, o.backlog);
    },

    async get(providerId: string): Promise<ProviderTxn | null> {
      try {
        return refundToTxn(await client.call(() => client.stripe.refunds.retrieve(providerId), 'read'));
      } catch (err) {
        if (err instanceof StripeSdk.errors.StripeError && err.statusCode === 404) return null;
        const refused = refusedKey(err, config.name);
        if (refused) throw refused;
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
      // Named by the header, not by a flag: `webhook serve` reads the header, `webhook ingest` takes it as --signature.
      if (!signature)
        throw new UsageError(
          'Stripe-Signature: missing; pass the header the delivery came with (recon webhook ingest --signature)',
        );
      let event: Stripe.Event;
      try {
        event = client.stripe.webhooks.constructEvent(body, signature, config.webhookSecret);
      } catch (err) {
        const reason =
          err instanceof StripeSdk.errors.StripeSignatureVerificationError
            ? 'signature does not match'
            : describeError(err);
        throw new UsageError(
          `Stripe-Signature: invalid webhook signature (${reason}); check the provider's webhookSecret`,
        );
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
