/**
 * Classifying Stripe's answers (SPEC §3) and mapping refunds to ProviderTxn. Pure functions over the
 * shapes stripe-node v23 produces, so every row of the table is unit-testable.
 */
import type Stripe from 'stripe';
import { StripeSdk } from './sdk.js';
import type { ProviderTxn, SubmitResult, TxnState } from '../../types.js';
import { redact } from '../../config/redact.js';
import { UsageError } from '../../errors.js';

/** Refund statuses (docs.stripe.com/api/refunds/object#refund_object-status). */
function refundState(status: string | null | undefined): TxnState {
  if (status === 'succeeded') return 'confirmed';
  if (status === 'failed' || status === 'canceled') return 'failed';
  // `pending`, `requires_action`, and any status Stripe adds later: not final, so looked at again.
  return 'pending';
}

type RefundLike = Pick<Stripe.Refund, 'id' | 'amount' | 'currency' | 'created' | 'status'> & {
  metadata?: Stripe.Metadata | null;
  charge?: string | { id: string } | null;
  payment_intent?: string | { id: string } | null;
};

export function refundToTxn(refund: RefundLike): ProviderTxn {
  const metadata = refund.metadata ?? {};
  const status = refund.status ?? 'pending';
  return {
    provider_id: refund.id,
    status,
    state: refundState(status),
    amount: refund.amount,
    currency: refund.currency,
    operation_id: metadata['recon_operation_id'] ?? null,
    client_reference: metadata['recon_client_reference'] ?? null,
    idempotency_key: null,
    group: idOf(refund.charge) ?? idOf(refund.payment_intent),
    created: typeof refund.created === 'number' ? new Date(refund.created * 1000) : null,
  };
}

export function idOf(ref: string | { id: string } | null | undefined): string | null {
  if (!ref) return null;
  return typeof ref === 'string' ? ref : ref.id;
}

/** A refunds.create response: the refund itself decides (succeeded → confirmed…). */
export function classifyRefund(refund: Stripe.Response<Stripe.Refund>): SubmitResult {
  const txn = refundToTxn(refund);
  const last = refund.lastResponse;
  return {
    outcome: txn.state,
    txn,
    ...(last?.statusCode !== undefined ? { http_status: last.statusCode } : {}),
    ...(last?.requestId ? { provider_request_id: last.requestId } : {}),
    replayed: headerOf(last?.headers, 'idempotent-replayed') === 'true',
  };
}

/**
 * A refunds.create that threw. Only answers that prove nothing was created are `failed`; a timeout
 * or a dropped connection says nothing about what Stripe did (SPEC §1.1), so it is `unknown`.
 */
export function classifySubmitError(err: unknown): SubmitResult {
  if (!(err instanceof StripeSdk.errors.StripeError)) {
    return { outcome: 'unknown', error_class: 'unexpected', message: redact(String((err as Error)?.message ?? err)) };
  }
  const status = err.statusCode;
  const base: SubmitResult = {
    outcome: 'unknown',
    ...(status !== undefined ? { http_status: status } : {}),
    ...(err.requestId ? { provider_request_id: err.requestId } : {}),
    message: redact(err.message),
  };
  if (err instanceof StripeSdk.errors.StripeConnectionError || status === undefined) {
    return { ...base, error_class: isTimeout(err) ? 'timeout' : 'connection' };
  }
  // 409 `idempotency_key_in_use`: the first request with this key is still running. stripe-node
  // raises it as a plain StripeAPIError; its outcome is whatever the first request's will be.
  if (status === 409) return { ...base, error_class: err.code ?? 'http_409' };
  if (status === 400 && err.rawType === 'idempotency_error') {
    return { ...base, outcome: 'conflict', error_class: 'idempotency_error' };
  }
  if (
    (status === 400 || status === 402 || status === 404) &&
    (err.rawType === 'invalid_request_error' || err.rawType === 'card_error')
  ) {
    return { ...base, outcome: 'failed', error_class: err.rawType };
  }
  return { ...base, error_class: status === 429 ? 'rate_limited' : `http_${status}` };
}

function isTimeout(err: Stripe.errors.StripeError): boolean {
  const detail = err.detail as { code?: string } | undefined;
  return detail?.code === 'ETIMEDOUT' || /timeout/i.test(err.message);
}

/** A short, secret-free description for LookupResult.error and UsageErrors. */
export function describeError(err: unknown): string {
  if (err instanceof StripeSdk.errors.StripeError) {
    const what =
      err instanceof StripeSdk.errors.StripeConnectionError
        ? isTimeout(err)
          ? 'timeout'
          : 'connection'
        : `http_${err.statusCode ?? '?'}${err.code ? ` ${err.code}` : ''}`;
    return redact(`${what}: ${err.message}`);
  }
  return redact(`unexpected: ${String((err as Error)?.message ?? err)}`);
}

export function headerOf(headers: Record<string, unknown> | undefined, name: string): string | undefined {
  if (!headers) return undefined;
  const value =
    headers[name] ??
    headers[name.toLowerCase()] ??
    Object.entries(headers).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- a header value, as String() prints it
  return Array.isArray(value) ? String(value[0]) : value === undefined ? undefined : String(value);
}

/** A response's `Date` header: the provider's clock when it answered (to the second), or null. */
export function dateOf(headers: Record<string, unknown> | undefined): Date | null {
  const ms = Date.parse(headerOf(headers, 'date') ?? '');
  return Number.isFinite(ms) ? new Date(ms) : null;
}

/**
 * A key Stripe refused (401, or 403 for a restricted key without the permission): a configuration
 * error (exit 2), never "the provider is unavailable" (SPEC §4 step 6), which would page as an outage.
 */
export function refusedKey(err: unknown, provider: string): UsageError | null {
  if (!(err instanceof StripeSdk.errors.StripeError)) return null;
  if (err.statusCode !== 401 && err.statusCode !== 403) return null;
  return new UsageError(`the provider refused the key for ${provider} (${err.statusCode}): check STRIPE_API_KEY`);
}

/**
 * Stripe's 404 `resource_missing` for the payment intent or charge a listing names: that object does
 * not exist in this account, so nothing can exist for it (SPEC §4 step 5). null for any other error.
 */
export function missingParent(err: unknown): string | null {
  if (!(err instanceof StripeSdk.errors.StripeError)) return null;
  if (err.statusCode !== 404 || err.code !== 'resource_missing') return null;
  if (err.param !== 'payment_intent' && err.param !== 'charge') return null;
  return err.param;
}
