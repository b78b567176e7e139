/**
 * Stripe webhook events and their signatures (docs.stripe.com/webhooks#verify-manually):
 * `Stripe-Signature: t=TIMESTAMP,v1=HEX` where HEX = HMAC-SHA256(secret, `${t}.${body}`).
 * Written from the documented scheme, not with the SDK, so the tests can check the SDK accepts it.
 */
import { createHmac } from 'node:crypto';
import { randomId } from '../http.js';
import { SANDBOX_API_VERSION, type Refund, type StripeEvent } from './types.js';

const EVENT_TYPES = ['refund.created', 'refund.updated', 'refund.failed', 'charge.refund.updated'] as const;

export function signPayload(payload: string, secret: string, timestamp: number): string {
  const signature = createHmac('sha256', secret).update(`${timestamp}.${payload}`, 'utf8').digest('hex');
  return `t=${timestamp},v1=${signature}`;
}

export function buildEvent(
  type: string,
  refund: Refund,
  createdSeconds: number,
  extra: { previous?: Partial<Refund>; requestId?: string | null; idempotencyKey?: string | null } = {},
): StripeEvent {
  if (!(EVENT_TYPES as readonly string[]).includes(type)) {
    throw new Error(`event type must be one of ${EVENT_TYPES.join(', ')}`);
  }
  const event: StripeEvent = {
    id: randomId('evt'),
    object: 'event',
    api_version: SANDBOX_API_VERSION,
    created: createdSeconds,
    data: { object: structuredClone(refund) },
    livemode: false,
    pending_webhooks: 1,
    request: { id: extra.requestId ?? null, idempotency_key: extra.idempotencyKey ?? null },
    type,
  };
  if (extra.previous) event.data.previous_attributes = extra.previous;
  return event;
}

/**
 * POSTs one event `times` times, signed afresh each time as Stripe does on redelivery, and returns
 * the statuses (0 when the endpoint could not be reached).
 */
export async function deliver(
  url: string,
  event: StripeEvent,
  secret: string,
  nowSeconds: () => number,
  times = 1,
): Promise<number[]> {
  const body = JSON.stringify(event, null, 2);
  const statuses: number[] = [];
  for (let i = 0; i < times; i++) {
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json; charset=utf-8',
          'User-Agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
          'Stripe-Signature': signPayload(body, secret, nowSeconds()),
        },
        body,
        // A hung receiver must not hang the sandbox's close().
        signal: AbortSignal.timeout(10_000),
      });
      await res.arrayBuffer();
      statuses.push(res.status);
    } catch {
      statuses.push(0);
    }
  }
  return statuses;
}
