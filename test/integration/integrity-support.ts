/** Signed Stripe events for the integrity tests' webhooks. */
import type { StripeSandbox } from '../../src/sandbox/stripe/server.js';

/** A signed Stripe event for `webhook ingest`: the body and its Stripe-Signature header. */
export function signedEvent(
  sandbox: StripeSandbox,
  type: string,
  refundId: string,
): { body: string; signature: string } {
  const refund = sandbox.refunds().find((r) => r.id === refundId);
  if (!refund) throw new Error(`no refund ${refundId} in the sandbox ledger`);
  const body = JSON.stringify(sandbox.eventFor(type, refund));
  return { body, signature: sandbox.signPayload(body) };
}
