import { UsageError } from '../../errors.js';
import { isCurrency } from '../../lib/money.js';
import { isPlainObject } from '../../lib/dict.js';

/**
 * Validation of an operation as it enters recon (a JSON file, stdin, the library API).
 * Every error is one line naming the field and the fix (SPEC §7 "Bad input").
 */
export const ID_PATTERN = /^[A-Za-z0-9._:-]{1,200}$/;
export const MAX_PAYLOAD_BYTES = 64 * 1024;
/**
 * `subject` names who and what the action concerns (customer, order): references, not documents.
 * 16 KiB is far above any real one and keeps a 10 MB blob out of every `ops show` and audit export.
 */
export const MAX_SUBJECT_BYTES = 16 * 1024;

/**
 * C0 controls (NUL included), DEL and C1 controls. In a key or a reference they are never intended:
 * NUL is refused by PostgreSQL's text and jsonb (a raw error, exit 1), and the others become live
 * terminal escapes when the value is printed.
 */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
// eslint-disable-next-line no-control-regex
const CONTROL_ALL = /[\u0000-\u001f\u007f-\u009f]/g;

function refuseControl(v: string, field: string): void {
  if (CONTROL.test(v)) {
    throw new UsageError(`${field}: contains a control character (e.g. NUL, ESC, newline); use printable text only`);
  }
}

/** How deep a payload or subject may nest: far beyond any real request, far below a stack overflow. */
const MAX_DEPTH = 32;

/** A lone UTF-16 surrogate (half of a pair): PostgreSQL's jsonb refuses it, and no provider can read it. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/**
 * JSON documents (payload, subject) may hold newlines in their text, but never NUL (jsonb cannot
 * store it) nor a lone surrogate, and nest at most MAX_DEPTH deep. Walked with a stack of its own,
 * not by recursion, so a document nested 5,000 deep is refused here, before any recursive code
 * (canonical JSON, the payload hash) could overflow on it.
 */
function refuseUnstorable(root: unknown, field: string): void {
  const stack: { v: unknown; path: string; depth: number }[] = [{ v: root, path: field, depth: 1 }];
  while (stack.length) {
    const { v, path, depth } = stack.pop()!;
    if (typeof v === 'string') checkText(v, path, 'contains');
    else if (v !== null && typeof v === 'object') {
      if (depth > MAX_DEPTH)
        throw new UsageError(`${path}: nested more than ${MAX_DEPTH} levels deep; flatten the document`);
      if (Array.isArray(v)) v.forEach((x, i) => stack.push({ v: x, path: `${path}[${i}]`, depth: depth + 1 }));
      else
        for (const [k, x] of Object.entries(v)) {
          checkText(k, path, 'has a key that contains');
          stack.push({ v: x, path: `${path}.${k.replace(CONTROL_ALL, '?')}`, depth: depth + 1 });
        }
    }
  }
}

function checkText(v: string, field: string, what: string): void {
  if (v.includes('\u0000'))
    throw new UsageError(`${field}: ${what} a NUL character (\\u0000), which cannot be stored; remove it`);
  if (LONE_SURROGATE.test(v))
    throw new UsageError(
      `${field}: ${what} a lone UTF-16 surrogate (half of a character pair), which cannot be stored; send well-formed text`,
    );
}

/**
 * `recon_*` keys in `payload.metadata` are recon's own: the adapter writes `recon_operation_id` and
 * `recon_client_reference` there, and a lookup trusts them. A payload that carried its own would
 * reach the provider as recon's word (another order's reference on this refund).
 */
function refuseReconMetadata(payload: Record<string, unknown>, field: string): void {
  const metadata = payload.metadata;
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) return;
  for (const key of Object.keys(metadata))
    if (/^recon_/i.test(key))
      throw new UsageError(
        `${field}.metadata.${key.replace(CONTROL_ALL, '?')}: recon_* metadata keys are recon's own (it writes recon_operation_id and recon_client_reference); remove it and give client_reference instead`,
      );
}

export interface OperationInput {
  id: string;
  provider: string;
  action: string;
  payload: Record<string, unknown>;
  idempotency_key: string;
  client_reference: string | null;
  subject: Record<string, unknown> | null;
  approval: string | null;
  amount: number | null;
  currency: string | null;
}

const KNOWN_FIELDS = new Set([
  'id',
  'provider',
  'action',
  'payload',
  'idempotency_key',
  'client_reference',
  'subject',
  'approval',
  'amount',
  'currency',
]);

export function validateId(id: unknown, field = 'id'): string {
  if (typeof id !== 'string' || !ID_PATTERN.test(id)) {
    throw new UsageError(
      `${field}: ${JSON.stringify(id)} is not a valid operation id; use 1-200 characters of A-Z a-z 0-9 . _ : -`,
    );
  }
  return id;
}

function optionalString(v: unknown, field: string, max = 500): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || v.length === 0 || v.length > max) {
    throw new UsageError(`${field}: must be a non-empty string of at most ${max} characters`);
  }
  refuseControl(v, field);
  return v;
}

function validateAmount(v: unknown, field: string): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw new UsageError(
      `${field}: ${JSON.stringify(v)} is not a valid amount; use a non-negative integer in minor units (e.g. 1999 for 19.99)`,
    );
  }
  return v;
}

function validateCurrency(v: unknown, field: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || !/^[A-Za-z]{3}$/.test(v) || !isCurrency(v)) {
    throw new UsageError(`${field}: ${JSON.stringify(v)} is not a known ISO 4217 currency; use e.g. "usd" or "eur"`);
  }
  return v.toLowerCase();
}

/**
 * Validates one operation. `where` prefixes messages ("line 3: ", "[2]: ") so a batch error
 * points at the offending record. `providers` are the configured provider names.
 */
export function validateOperation(raw: unknown, providers: readonly string[], where = ''): OperationInput {
  const at = (f: string) => `${where}${f}`;
  if (!isPlainObject(raw)) throw new UsageError(`${where || 'input'}: an operation must be a JSON object`);
  for (const key of Object.keys(raw)) {
    if (!KNOWN_FIELDS.has(key)) {
      throw new UsageError(`${at(key)}: unknown field; known fields: ${[...KNOWN_FIELDS].join(', ')}`);
    }
  }
  const id = validateId(raw.id, at('id'));
  if (typeof raw.provider !== 'string' || !raw.provider)
    throw new UsageError(
      `${at('provider')}: required; one of: ${providers.join(', ') || '(none configured: see recon init)'}`,
    );
  if (!providers.includes(raw.provider)) {
    throw new UsageError(
      `${at('provider')}: unknown provider "${raw.provider}"; configured: ${providers.join(', ') || 'none (create recon.config.json or set STRIPE_API_KEY)'}`,
    );
  }
  if (typeof raw.action !== 'string' || !/^[a-z][a-z0-9_.-]{0,63}$/.test(raw.action)) {
    throw new UsageError(`${at('action')}: required, e.g. "refund" or "shipment.create"`);
  }
  if (!isPlainObject(raw.payload))
    throw new UsageError(`${at('payload')}: required, a JSON object with what the provider is asked to do`);
  refuseUnstorable(raw.payload, at('payload'));
  refuseReconMetadata(raw.payload, at('payload'));
  const size = Buffer.byteLength(JSON.stringify(raw.payload));
  if (size > MAX_PAYLOAD_BYTES) {
    throw new UsageError(
      `${at('payload')}: ${size} bytes is over the 64 KiB limit; store large data elsewhere and reference it`,
    );
  }
  const payloadAmount = validateAmount(raw.payload.amount, at('payload.amount'));
  const payloadCurrency = validateCurrency(raw.payload.currency, at('payload.currency'));
  const amount = validateAmount(raw.amount, at('amount'));
  const currency = validateCurrency(raw.currency, at('currency'));
  if (amount !== null && payloadAmount !== null && amount !== payloadAmount) {
    throw new UsageError(`${at('amount')}: ${amount} disagrees with payload.amount ${payloadAmount}; give one of them`);
  }
  if (currency !== null && payloadCurrency !== null && currency !== payloadCurrency) {
    throw new UsageError(
      `${at('currency')}: ${currency} disagrees with payload.currency ${payloadCurrency}; give one of them`,
    );
  }
  if (raw.subject !== undefined && raw.subject !== null && !isPlainObject(raw.subject)) {
    throw new UsageError(`${at('subject')}: must be a JSON object (e.g. {"customer": "cus_1", "order": "o_9"})`);
  }
  if (raw.subject !== undefined && raw.subject !== null) {
    refuseUnstorable(raw.subject, at('subject'));
    const subjectSize = Buffer.byteLength(JSON.stringify(raw.subject));
    if (subjectSize > MAX_SUBJECT_BYTES) {
      throw new UsageError(
        `${at('subject')}: ${subjectSize} bytes is over the 16 KiB limit; keep references (customer, order) in subject and store documents elsewhere`,
      );
    }
  }
  const key = raw.idempotency_key === undefined || raw.idempotency_key === null ? id : raw.idempotency_key;
  if (typeof key !== 'string' || key.length < 1 || key.length > 255) {
    throw new UsageError(`${at('idempotency_key')}: must be a string of 1-255 characters (default: the id)`);
  }
  refuseControl(key, at('idempotency_key'));
  return {
    id,
    provider: raw.provider,
    action: raw.action,
    payload: raw.payload,
    idempotency_key: key,
    client_reference: optionalString(raw.client_reference, at('client_reference'), 200),
    subject: (raw.subject as Record<string, unknown> | undefined) ?? null,
    approval: optionalString(raw.approval, at('approval'), 200),
    amount: amount ?? payloadAmount,
    currency: currency ?? payloadCurrency,
  };
}

/**
 * Parses the text of `ops record`: one JSON object, an array, or NDJSON lines.
 * Malformed JSON is a UsageError naming the line.
 */
export function parseOperationsText(text: string, source: string): unknown[] {
  const trimmed = text.trim();
  if (!trimmed)
    throw new UsageError(`${source}: no operations in input; give a JSON object, an array, or NDJSON lines`);
  if (trimmed.startsWith('[')) {
    return [parseJson(trimmed, source)].flat();
  }
  const lines = trimmed.split('\n');
  if (lines.length > 1) {
    try {
      return [JSON.parse(trimmed)];
    } catch {
      // NDJSON when every line is an object, or when the first line is a whole object on its own
      // (a pretty-printed object's first line is "{", which is not): then a bad line is named.
      if (lines.every((l) => !l.trim() || l.trim().startsWith('{')) || isJsonObject(lines[0])) {
        const out: unknown[] = [];
        lines.forEach((line, i) => {
          if (line.trim()) out.push(parseJson(line, `${source}: line ${i + 1}`));
        });
        return out;
      }
    }
  }
  return [parseJson(trimmed, source)];
}

function isJsonObject(line: string): boolean {
  try {
    return isPlainObject(JSON.parse(line));
  } catch {
    return false;
  }
}

function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    // V8 quotes the input in its message: keep the error on one line and short (SPEC §7).
    let reason = (err as Error).message.replace(/\s+/g, ' ');
    if (reason.length > 160) reason = reason.slice(0, 157) + '...';
    throw new UsageError(`${where}: malformed JSON (${reason}); fix the input and record again`);
  }
}
