/** Classifying an http provider's submit answer by HTTP status first (SPEC §3). */
import type { HttpProviderConfig } from '../../config/types.js';
import type { SubmitResult } from '../../types.js';
import { redact } from '../../config/redact.js';
import { toTxn } from './mapping.js';

export interface HttpAnswer {
  status: number;
  headers: Headers;
  /** The body as text (may be empty or not JSON). */
  text: string;
}

export function classifyAnswer(answer: HttpAnswer, config: HttpProviderConfig): SubmitResult {
  const { status, headers, text } = answer;
  const requestId = headers.get('request-id') ?? headers.get('x-request-id');
  const base = {
    http_status: status,
    ...(requestId ? { provider_request_id: requestId } : {}),
    replayed: headers.get('idempotent-replayed') === 'true',
  };
  if (status >= 200 && status < 300) {
    const txn = toTxn(parseJson(text), config);
    // Accepted, but we cannot tell what was created: a lookup will.
    if (txn === null)
      return {
        ...base,
        outcome: 'unknown',
        error_class: 'unreadable_response',
        message: `no ${config.fields.id} in the response`,
      };
    return { ...base, outcome: txn.state, txn };
  }
  const message = redact(summarise(text));
  // In flight with the same key (IETF idempotency-key draft §2.6, and Stripe): the first request decides.
  if (status === 409) return { ...base, outcome: 'unknown', error_class: 'http_409', message };
  if (isConflict(status, text, config))
    return { ...base, outcome: 'conflict', error_class: 'idempotency_error', message };
  if (status === 408 || status === 429 || status >= 500)
    return { ...base, outcome: 'unknown', error_class: `http_${status}`, message };
  // Any other 4xx: the provider refused the request, so nothing was created.
  if (status >= 400) return { ...base, outcome: 'failed', error_class: `http_${status}`, message };
  return { ...base, outcome: 'unknown', error_class: `http_${status}`, message };
}

/** Key reused with other parameters: by default 400/422 whose body mentions idempotency (configurable). */
function isConflict(status: number, text: string, config: HttpProviderConfig): boolean {
  const { statuses, bodyContains } = config.conflict;
  if (!statuses.includes(status)) return false;
  return bodyContains === null || text.toLowerCase().includes(bodyContains.toLowerCase());
}

/** A network failure: the request may or may not have reached the provider. */
export function classifyNetworkError(err: unknown): SubmitResult {
  const e = err as Error & { cause?: { code?: string } };
  const timeout = e?.name === 'TimeoutError' || e?.name === 'AbortError';
  return {
    outcome: 'unknown',
    error_class: timeout ? 'timeout' : 'connection',
    message: redact(`${e?.message ?? String(err)}${e?.cause?.code ? ` (${e.cause.code})` : ''}`),
  };
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The provider's error message when it sent one in a common shape, else the start of the body. */
export function summarise(text: string): string {
  const body = parseJson(text) as { error?: unknown; message?: unknown } | undefined;
  const err = body?.error;
  if (typeof err === 'string') return err;
  if (err && typeof err === 'object' && typeof (err as { message?: unknown }).message === 'string') {
    return (err as { message: string }).message;
  }
  if (typeof body?.message === 'string') return body.message;
  return text.slice(0, 200);
}
