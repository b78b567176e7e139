/**
 * The declarative part of the `http` provider: filling `{name}` placeholders in paths, reading
 * dotted fields out of responses, and mapping provider statuses (SPEC §6).
 */
import { UsageError } from '../../errors.js';
import type { HttpFieldMapping, HttpProviderConfig } from '../../config/types.js';
import type { LookupQuery, ProviderTxn, TxnState } from '../../types.js';

const PLACEHOLDER = /\{([A-Za-z0-9_.]+)\}/g;

/**
 * Fills `{name}` from `values`, URL-encoded (a client reference like `order 12/3` must not change
 * the path). A placeholder with no value is an error naming the key: silently dropping
 * `client_reference=` from a lookup would list everything and match by chance. Only with
 * `dropMissingQuery` (list ranges: `created_gte={since}`) does it drop its query parameter instead.
 */
export function fillPath(
  template: string,
  values: Record<string, unknown>,
  where: string,
  { dropMissingQuery = false }: { dropMissingQuery?: boolean } = {},
): string {
  const fill = (text: string) =>
    text.replace(PLACEHOLDER, (_m, name: string) => {
      const v = valueOf(values, name);
      if (v === undefined) {
        const has = Object.keys(values).filter((k) => valueOf(values, k) !== undefined);
        throw new UsageError(
          `${where}: {${name}} cannot be filled for this request; it has ${has.length > 0 ? has.join(', ') : 'no values'}`,
        );
      }
      return encodeURIComponent(v);
    });
  const [pathPart, queryPart] = splitOnce(template, '?');
  if (!dropMissingQuery) return fill(template);
  const path = fill(pathPart);
  if (queryPart === undefined) return path;
  const params = queryPart
    .split('&')
    .filter((pair) => pair !== '')
    .flatMap((pair) => {
      let missing = false;
      const filled = pair.replace(PLACEHOLDER, (_m, name: string) => {
        const v = valueOf(values, name);
        if (v === undefined) missing = true;
        return v === undefined ? '' : encodeURIComponent(v);
      });
      return missing ? [] : [filled];
    });
  return params.length > 0 ? `${path}?${params.join('&')}` : path;
}

function valueOf(values: Record<string, unknown>, name: string): string | undefined {
  const v = name in values ? values[name] : getPath(values, name);
  if (v === undefined || v === null || v === '') return undefined;
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- a scalar here (objects are JSON above)
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

function splitOnce(s: string, sep: string): [string, string | undefined] {
  const i = s.indexOf(sep);
  return i === -1 ? [s, undefined] : [s.slice(0, i), s.slice(i + 1)];
}

/** The values `{name}` can take in submit and lookup paths: payload fields, then the operation's own. */
export function operationValues(q: {
  operation_id?: string;
  idempotency_key?: string;
  client_reference?: string | null;
  payload?: Record<string, unknown>;
}): Record<string, unknown> {
  return {
    ...(q.payload ?? {}),
    ...(q.operation_id !== undefined ? { id: q.operation_id, operation_id: q.operation_id } : {}),
    ...(q.idempotency_key !== undefined ? { idempotency_key: q.idempotency_key } : {}),
    ...(q.client_reference ? { client_reference: q.client_reference } : {}),
  };
}

/** `a.b.0.c` into nested objects and arrays. */
export function getPath(obj: unknown, dotted: string): unknown {
  let cur: unknown = obj;
  for (const part of dotted.split('.')) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

function stateOf(status: string, map: HttpProviderConfig['status']): TxnState {
  if (map.confirmed.includes(status)) return 'confirmed';
  if (map.failed.includes(status)) return 'failed';
  // Mapped pending, or a status the config does not know: not final, so it is looked at again.
  return 'pending';
}

/** Maps one provider object; null when it lacks the configured id (not something recon can link). */
export function toTxn(obj: unknown, config: HttpProviderConfig): ProviderTxn | null {
  const f: HttpFieldMapping = config.fields;
  const id = getPath(obj, f.id);
  if (typeof id !== 'string' && typeof id !== 'number') return null;
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- a provider body's field, as String() prints it
  const status = String(getPath(obj, f.status) ?? '');
  const str = (p: string | null) => {
    const v = p === null ? undefined : getPath(obj, p);
    return typeof v === 'string' || typeof v === 'number' ? String(v) : null;
  };
  const amount = f.amount === null ? undefined : getPath(obj, f.amount);
  return {
    provider_id: String(id),
    status,
    state: stateOf(status, config.status),
    amount: typeof amount === 'number' ? amount : null,
    currency: str(f.currency)?.toLowerCase() ?? null,
    operation_id: str(f.operationId),
    client_reference: str(f.clientReference),
    idempotency_key: str(f.idempotencyKey),
    group: null,
    created: toDate(f.created === null ? undefined : getPath(obj, f.created)),
  };
}

/** Unix seconds, milliseconds or an ISO string: providers use all three. */
function toDate(v: unknown): Date | null {
  if (typeof v === 'number' && Number.isFinite(v)) return new Date(v < 1e12 ? v * 1000 : v);
  if (typeof v === 'string') {
    const d = new Date(/^\d+$/.test(v) ? Number(v) * (v.length <= 10 ? 1000 : 1) : v);
    return Number.isNaN(d.getTime()) ? null : d;
  }
  return null;
}

/**
 * Whether a provider object carries this operation's identity, by the most specific field both
 * sides have: the idempotency key, else the operation id, else the client reference. A shipment
 * with the same client reference but another key is another action, not this one.
 * Returns undefined when neither side has a comparable field.
 */
export function carriesIdentity(txn: ProviderTxn, q: LookupQuery, f: HttpFieldMapping): boolean | undefined {
  if (q.idempotency_key && f.idempotencyKey && txn.idempotency_key) return txn.idempotency_key === q.idempotency_key;
  if (q.operation_id && f.operationId && txn.operation_id) return txn.operation_id === q.operation_id;
  if (q.client_reference && f.clientReference && txn.client_reference)
    return txn.client_reference === q.client_reference;
  return undefined;
}
