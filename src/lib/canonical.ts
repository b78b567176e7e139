/**
 * Canonical JSON and hashing. The payload hash is what makes "same id, same payload" a no-op and
 * "same id, other payload" a refusal (SPEC §1.3), and the audit chain hashes events the same way,
 * so one value must always give one string: across key orders, processes and versions.
 */
import { hash } from 'node:crypto';
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
  let ready: unknown;
  try {
    ready = sortedForStringify(value, 0);
  } catch {
    // Not JSON (or nested deeper than the fast path goes): the careful writer, which names the path.
    return write(value, [], new Set());
  }
  return JSON.stringify(ready);
}

/** How deep the fast path goes; a value nested deeper (or a cycle) is written by `write`. */
const FAST_DEPTH = 64;

/**
 * `value` as JSON.stringify writes canonically: the value itself where every object's keys are in
 * order already (the audit events and lookups recon hashes are built so), else a copy with each
 * unsorted object's keys sorted and its `undefined` members dropped, an `undefined` array item
 * (or hole) as null. One native JSON.stringify then writes the text: `recon run` hashes several
 * events per operation, and building the text here key by key took twice as long. Throws (a
 * plain Error, for canonicalJson to hand the value to `write`) on anything `write` refuses.
 */
function sortedForStringify(value: unknown, depth: number): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value)) throw new Error('not finite');
      return value;
    case 'object':
      break;
    default:
      throw new Error('not JSON');
  }
  if (value === null) return null;
  if (depth > FAST_DEPTH) throw new Error('too deep');
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new Error('invalid Date');
    return value.toISOString();
  }
  // JSON.stringify would call a toJSON (an array's own, a subclass's, a non-enumerable one): `write` never does.
  if ('toJSON' in value) throw new Error('toJSON');
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) throw new Error('not a plain array');
    let out: unknown[] | null = null;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const ready = item === undefined ? null : sortedForStringify(item, depth + 1);
      if (out === null && ready !== item) out = value.slice(0, i) as unknown[];
      if (out !== null) out.push(ready);
    }
    return out ?? value;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) throw new Error('not a plain object');
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  let sorted = true;
  for (let k = 1; k < keys.length && sorted; k++) sorted = keys[k - 1] < keys[k];
  if (!sorted) {
    // An object lists its integer keys ("9", "10") first, in numeric order, whatever order they are
    // set in: a copy cannot hold them in code-unit order ("10" before "9"). `write` writes those.
    if (keys.some((key) => /^\d/.test(key))) throw new Error('integer key');
    keys.sort();
  }
  // A copy where anything changes; its prototype null, so that a key `__proto__` stays a key.
  let out: Record<string, unknown> | null = sorted ? null : (Object.create(null) as Record<string, unknown>);
  for (let k = 0; k < keys.length; k++) {
    const item = record[keys[k]];
    const ready = item === undefined ? undefined : sortedForStringify(item, depth + 1);
    if (out === null && ready !== item) {
      out = Object.create(null) as Record<string, unknown>;
      for (let j = 0; j < k; j++) out[keys[j]] = record[keys[j]];
    }
    if (out !== null && ready !== undefined) out[keys[k]] = ready;
  }
  return out ?? value;
}

/** One-shot `crypto.hash` (Node ≥ 20.12): half the time of a Hash object per event hashed. */
export function sha256Hex(text: string): string {
  return hash('sha256', text, 'hex');
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
