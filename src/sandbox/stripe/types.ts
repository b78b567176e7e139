/**
 * The Stripe objects the sandbox serves, with the fields of the API reference (docs.stripe.com/api)
 * that recon and its tests read. Fields Stripe has and the sandbox does not model are `null`.
 */

export const SANDBOX_API_VERSION = '2026-10-28.endive';

export interface Refund {
  id: string;
  object: 'refund';
  amount: number;
  balance_transaction: string | null;
  charge: string | null;
  /** Unix seconds. */
  created: number;
  currency: string;
  customer: string | null;
  failure_reason?: string;
  metadata: Record<string, string>;
  payment_intent: string | null;
  payment_method: string | null;
  reason: string | null;
  receipt_number: string | null;
  source_transfer_reversal: string | null;
  status: string;
  transfer_reversal: string | null;
}

export interface Charge {
  id: string;
  object: 'charge';
  amount: number;
  amount_captured: number;
  amount_refunded: number;
  captured: boolean;
  created: number;
  currency: string;
  livemode: false;
  metadata: Record<string, string>;
  paid: boolean;
  payment_intent: string;
  refunded: boolean;
  status: 'succeeded';
}

export interface PaymentIntent {
  id: string;
  object: 'payment_intent';
  amount: number;
  amount_received: number;
  created: number;
  currency: string;
  latest_charge: string;
  livemode: false;
  metadata: Record<string, string>;
  status: 'succeeded';
}

export interface StripeEvent {
  id: string;
  object: 'event';
  api_version: string;
  created: number;
  data: { object: Refund; previous_attributes?: Partial<Refund> };
  livemode: false;
  pending_webhooks: number;
  request: { id: string | null; idempotency_key: string | null };
  type: string;
}

export interface StripeErrorBody {
  error: { type: string; code?: string; message: string; param?: string; doc_url?: string };
}

export function stripeError(
  type: string,
  message: string,
  extra: { code?: string; param?: string } = {},
): StripeErrorBody {
  const error: StripeErrorBody['error'] = { type, message };
  if (extra.code) {
    error.code = extra.code;
    error.doc_url = `https://stripe.com/docs/error-codes/${extra.code.replace(/_/g, '-')}`;
  }
  if (extra.param) error.param = extra.param;
  return { error };
}

/** A failure the endpoint reports: `stored` tells whether Stripe's idempotency layer would save it. */
export interface EndpointError {
  status: number;
  body: StripeErrorBody;
  /** false for parameter validation (the endpoint never began executing, so nothing is saved). */
  stored: boolean;
}

/** Whether an endpoint's result is Stripe's error for it rather than its value. */
export function isError(x: object): x is EndpointError {
  return 'body' in x && typeof (x as EndpointError).body === 'object' && 'error' in ((x as EndpointError).body ?? {});
}

export function paramError(message: string, param: string, code = 'parameter_invalid'): EndpointError {
  return { status: 400, body: stripeError('invalid_request_error', message, { code, param }), stored: false };
}

export function missingResource(kind: string, id: string, param: string): EndpointError {
  return {
    status: 404,
    body: stripeError('invalid_request_error', `No such ${kind}: '${id}'`, { code: 'resource_missing', param }),
    stored: true,
  };
}
