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
  const parts: string[] = [];
  write(value, '$', parts, new Set());
  return parts.join('');
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** sha256 of the canonical JSON: `operations.payload_hash`. */
export function payloadHash(payload: unknown): string {
  return sha256Hex(canonicalJson(payload));
}

function write(value: unknown, path: string, out: string[], ancestors: Set<object>): void {
  switch (typeof value) {
    case 'string':
      out.push(JSON.stringify(value));
      return;
    case 'boolean':
      out.push(value ? 'true' : 'false');
      return;
    case 'number':
      if (!Number.isFinite(value)) {
        throw new UsageError(`${path}: ${value} is not a JSON number; use a finite number`);
      }
      // JSON.stringify prints the shortest round-tripping form, the same as RFC 8785, and -0 as 0.
      out.push(JSON.stringify(value));
      return;
    case 'object':
      break;
    default:
      throw new UsageError(`${path}: a ${typeof value} is not JSON; use a string, number, boolean, object or array`);
  }
  if (value === null) {
    out.push('null');
    return;
  }
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new UsageError(`${path}: invalid Date; use a valid date`);
    out.push(JSON.stringify(value.toISOString()));
    return;
  }
  if (ancestors.has(value)) throw new UsageError(`${path}: circular reference; JSON cannot contain cycles`);
  ancestors.add(value);
  if (Array.isArray(value)) {
    out.push('[');
    value.forEach((item, i) => {
      if (i > 0) out.push(',');
      write(item === undefined ? null : item, `${path}[${i}]`, out, ancestors);
    });
    out.push(']');
  } else {
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      const kind = value.constructor?.name ?? 'object';
      throw new UsageError(`${path}: a ${kind} is not JSON; use a plain object or array`);
    }
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record)
      .filter((k) => record[k] !== undefined)
      .sort();
    out.push('{');
    keys.forEach((key, i) => {
      if (i > 0) out.push(',');
      out.push(JSON.stringify(key), ':');
      write(record[key], `${path}.${key}`, out, ancestors);
    });
    out.push('}');
  }
  ancestors.delete(value);
}
