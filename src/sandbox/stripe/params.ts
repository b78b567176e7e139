/**
 * Parameter parsing for the Stripe sandbox: how Stripe reads form-encoded values (everything
 * arrives as a string) and the error it gives for each bad one.
 */
import type { FormObject, FormValue } from '../http.js';
import { paramError, stripeError, type EndpointError } from './types.js';
import { dict } from '../../lib/dict.js';
import { formatMajor } from '../../lib/money.js';

export function endpointError(message: string, param: string, code: string): EndpointError {
  return { status: 400, body: stripeError('invalid_request_error', message, { code, param }), stored: true };
}

export function str(v: FormValue | undefined): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

export function positiveInt(v: FormValue): number | null {
  return typeof v === 'string' && /^\d+$/.test(v) && Number(v) > 0 && Number.isSafeInteger(Number(v))
    ? Number(v)
    : null;
}

/** An amount as Stripe's error messages write it ("$9.50", "1,000 jpy"), in major units through src/lib/money.ts. */
export function money(amount: number, currency: string): string {
  const major = formatMajor(amount, currency) ?? String(amount);
  return currency === 'usd' ? `$${major}` : `${major} ${currency}`;
}

export function parseMetadata(v: FormValue | undefined): Record<string, string> | { error: string } {
  if (v === undefined || v === '') return {};
  if (typeof v !== 'object' || Array.isArray(v)) return { error: 'Invalid object: metadata must be a hash' };
  const out = dict<string>();
  for (const [k, value] of Object.entries(v)) {
    if (typeof value !== 'string') return { error: `Invalid metadata value for ${k}: must be a string` };
    if (k.length > 40) return { error: `Metadata key ${k} is longer than 40 characters` };
    if (value.length > 500) return { error: `Metadata value for ${k} is longer than 500 characters` };
    if (value !== '') out[k] = value;
  }
  if (Object.keys(out).length > 50) return { error: 'Metadata may have at most 50 keys' };
  return out;
}

export interface CreatedRange {
  gt?: number;
  gte?: number;
  lt?: number;
  lte?: number;
}

function parseCreated(v: FormValue | undefined): CreatedRange | null {
  if (v === undefined) return {};
  const int = (x: FormValue | undefined) => (typeof x === 'string' && /^\d+$/.test(x) ? Number(x) : null);
  if (typeof v === 'string') {
    const n = int(v);
    return n === null ? null : { gte: n, lte: n };
  }
  if (Array.isArray(v)) return null;
  const range: CreatedRange = {};
  for (const [k, x] of Object.entries(v)) {
    if (k !== 'gt' && k !== 'gte' && k !== 'lt' && k !== 'lte') return null;
    const n = int(x);
    if (n === null) return null;
    range[k] = n;
  }
  return range;
}

export function inRange(created: number, r: CreatedRange): boolean {
  return (
    (r.gt === undefined || created > r.gt) &&
    (r.gte === undefined || created >= r.gte) &&
    (r.lt === undefined || created < r.lt) &&
    (r.lte === undefined || created <= r.lte)
  );
}

/**
 * The parameters every Stripe list endpoint shares, read as Stripe reads them: a parameter not in
 * `allowed` is refused; `limit` 1–100 (10 by default); `created` an integer or `created[gt|gte|lt|lte]`;
 * `starting_after` or `ending_before`, not both. The first error found is the answer.
 */
export function listParams(
  params: FormObject,
  allowed: ReadonlySet<string>,
): { limit: number; range: CreatedRange; after?: string; before?: string } | EndpointError {
  for (const key of Object.keys(params)) {
    if (!allowed.has(key)) return paramError(`Received unknown parameter: ${key}`, key, 'parameter_unknown');
  }
  const limit = params.limit === undefined ? 10 : positiveInt(params.limit);
  if (limit === null || limit > 100) {
    return paramError('Invalid integer: limit must be between 1 and 100', 'limit', 'parameter_invalid_integer');
  }
  const range = parseCreated(params.created);
  if (range === null) return paramError('Invalid created: use an integer or created[gt|gte|lt|lte]', 'created');
  const after = str(params.starting_after);
  const before = str(params.ending_before);
  if (after && before) {
    return paramError('You may only specify one of these parameters: ending_before, starting_after.', 'ending_before');
  }
  return { limit, range, after, before };
}
