/**
 * Canonical JSON and hashing. The payload hash is what makes "same id, same payload" a no-op and
 * "same id, other payload" a refusal (SPEC §1.3), and the audit chain hashes events the same way,
 * so one value must always give one string: across key orders, processes and versions.
 */
import { createHash } from 'node:crypto';
import { UsageError } from '../errors.js';

/**
 * JSON with object keys sorted recursively (by UTF-16 code units, as RFC 8785 does), no whitespace,
 * arrays in order, members whose value is `undefined` dropped, Dates as ISO strings.
 *
 * Stricter than JSON.stringify where it would silently lose information: NaN/Infinity (which it
 * turns into null), bigint, functions, symbols, cycles and non-plain objects (a Map serialises as
 * `{}`) are refused, so two different payloads can never share a hash. `undefined` inside an array
 * becomes `null`, as it does once stored in a jsonb column.
 *
 * @throws UsageError naming the path of the offending value.
 */
export function canonicalJson(value: unknown): string {
  return write(value, [], new Set());
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** sha256 of the canonical JSON: `operations.payload_hash`. */
export function payloadHash(payload: unknown): string {
  return sha256Hex(canonicalJson(payload));
}

/**
 * The canonical text of `value`. Every audit event is hashed through here (recon run: several per
 * operation), so it builds one string and keeps the path as a stack of keys, spelled out
 * (`$.a[1]`) only in an error.
 */
function write(value: unknown, path: (string | number)[], ancestors: Set<object>): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) {
        throw new UsageError(`${where(path)}: ${value} is not a JSON number; use a finite number`);
      }
      // JSON.stringify prints the shortest round-tripping form, the same as RFC 8785, and -0 as 0.
      return JSON.stringify(value);
    case 'object':
      break;
    default:
      throw new UsageError(
        `${where(path)}: a ${typeof value} is not JSON; use a string, number, boolean, object or array`,
      );
  }
  if (value === null) return 'null';
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new UsageError(`${where(path)}: invalid Date; use a valid date`);
    return JSON.stringify(value.toISOString());
  }
  if (ancestors.has(value)) throw new UsageError(`${where(path)}: circular reference; JSON cannot contain cycles`);
  ancestors.add(value);
  let out: string;
  if (Array.isArray(value)) {
    out = '[';
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ',';
      const item: unknown = value[i];
      path.push(i);
      out += write(item === undefined ? null : item, path, ancestors);
      path.pop();
    }
    out += ']';
  } else {
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      const kind = value.constructor?.name ?? 'object';
      throw new UsageError(`${where(path)}: a ${kind} is not JSON; use a plain object or array`);
    }
    const record = value as Record<string, unknown>;
    out = '{';
    let first = true;
    for (const key of Object.keys(record).sort()) {
      const item = record[key];
      if (item === undefined) continue;
      if (!first) out += ',';
      first = false;
      path.push(key);
      out += JSON.stringify(key) + ':' + write(item, path, ancestors);
      path.pop();
    }
    out += '}';
  }
  ancestors.delete(value);
  return out;
}

/** `$`, `$.a`, `$.a[1]`: where in the value an error is. */
function where(path: (string | number)[]): string {
  let text = '$';
  for (const step of path) text += typeof step === 'number' ? `[${step}]` : `.${step}`;
  return text;
}
