/**
 * Secrets are never printed, logged or stored (SPEC §6). The config loader registers every secret
 * value it sees; the CLI passes every error message and log line through `redact()`.
 */
import { dict } from '../lib/dict.js';

/** The one marker that stands for a secret in everything recon prints or stores. */
export const REDACTED = '[redacted]';

/** Shorter values are not registered: redacting every "abc" in a message would hide more than it protects. */
const MIN_SECRET_LENGTH = 4;

const secrets = new Set<string>();
/** Longest first, so `Bearer tok_123` is replaced whole rather than leaving `Bearer ` plus a fragment. */
let ordered: string[] = [];

/** Environment variables whose values are secrets wherever they are substituted. */
export const SECRET_ENV_NAME = /KEY|TOKEN|SECRET|PASSWORD/i;

const PATTERNS: Array<[RegExp, string | ((...groups: string[]) => string)]> = [
  // Stripe secret and restricted keys, webhook signing secrets.
  [/\b(?:sk|rk)_(?:test|live)_[A-Za-z0-9_]+/g, REDACTED],
  [/\bwhsec_[A-Za-z0-9+/=_-]+/g, REDACTED],
  // The password of postgres://user:password@host/db, as libpq reads it (it may hold a '/').
  [/\b(postgres(?:ql)?:\/\/[^:/@\s]*:)[^@\s]+@/gi, `$1${REDACTED}@`],
  // Any URL's user-info (scheme://user:password@host): the password goes, the user name stays (a
  // store URL's role helps debugging); a user-info without a password is replaced whole (it may be
  // a token, https://TOKEN@host) unless it is a store URL's role. Up to the last '@' before the
  // path, as URL parsers read it, so a password holding '@' is hidden whole.
  [/\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#"'<>\\]*)@/gi, userInfo],
  // libpq also takes it as a parameter: postgres://user@host/db?password=… (and sslpassword for a key).
  [/([?&](?:ssl)?password=)[^&\s"']+/gi, `$1${REDACTED}`],
];

function userInfo(_match: string, scheme: string, info: string): string {
  const colon = info.indexOf(':');
  if (colon !== -1) return `${scheme}${info.slice(0, colon)}:${REDACTED}@`;
  if (info === REDACTED || /^postgres(?:ql)?:/i.test(scheme)) return `${scheme}${info}@`;
  return `${scheme}${REDACTED}@`;
}

/** Cheap test that every PATTERNS match needs; most strings (ids, statuses, amounts) fail it. */
const MAY_MATCH_PATTERN = /(?:sk|rk)_(?:test|live)_|whsec_|:\/\/[^\s]*@|password=/i;

export function registerSecret(value: string | null | undefined): void {
  if (typeof value !== 'string' || value.length < MIN_SECRET_LENGTH || secrets.has(value)) return;
  secrets.add(value);
  // A header value `Bearer X` is registered whole; X alone may appear too (e.g. echoed by a server).
  const bearer = /^(?:Bearer|Basic|Token)\s+(\S{4,})$/i.exec(value);
  if (bearer?.[1]) secrets.add(bearer[1]);
  ordered = [...secrets].sort((a, b) => b.length - a.length);
}

/**
 * Replaces every registered secret and anything that looks like a key, a URL's password or token
 * (`scheme://user:pw@host`, `?password=`) with `[redacted]`: the one redaction of recon, for every
 * line it prints and everything it stores from a provider (store URLs included: `Db.displayUrl`).
 */
export function redact(text: string): string {
  let out = String(text);
  for (const secret of ordered) {
    if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  }
  if (!MAY_MATCH_PATTERN.test(out)) return out;
  for (const [pattern, replacement] of PATTERNS) out = out.replace(pattern, replacement as (m: string) => string);
  return out;
}

/**
 * `redact()` applied to every string inside a value (object keys included), for what a provider
 * hands back: its messages, request ids and objects are stored (attempts, observations, the
 * append-only audit trail, where nothing can be removed later) and printed. Dates and other
 * non-plain objects are kept as they are. What holds nothing to redact is returned as it is, not
 * copied: a webhook event or a page of refunds is walked once and handed on unchanged (copying each
 * object into a new one was most of the cost: ~40 µs of a webhook delivery's ~600 µs of CPU).
 * With `copy`, every plain object and array is a new one whatever it holds: for what code recon
 * does not own hands over (a module provider may change an object after yielding it).
 */
export function redactDeep<T>(value: T, o: { copy?: boolean } = {}): T {
  const copy = o.copy === true;
  if (!copy && ordered.length === 0 && typeof value !== 'string' && (value === null || typeof value !== 'object'))
    return value;
  return deep(value, 0, copy) as T;
}

/** `value` redacted: a copy with `copy`, else `value` itself when nothing in it changes. */
function deep(value: unknown, depth: number, copy: boolean): unknown {
  if (typeof value === 'string') return redact(value);
  if (value === null || typeof value !== 'object' || depth > 50) return value;
  if (Array.isArray(value)) {
    const list = value as unknown[];
    let out: unknown[] | undefined = copy ? [] : undefined;
    for (let i = 0; i < list.length; i++) {
      const v = list[i];
      const r = deep(v, depth + 1, copy);
      if (out) out.push(r);
      else if (r !== v) out = [...list.slice(0, i), r];
    }
    return out ?? value;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  const o = value as Record<string, unknown>;
  const keys = Object.keys(o);
  const values: unknown[] = [];
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    const v = o[k];
    values.push(v);
    const r = deep(v, depth + 1, copy);
    if (!copy && r === v && redact(k) === k) continue;
    // Something changes (or a copy is asked for): a new object (keys from outside: a dictionary),
    // of the values read above.
    const out = dict<unknown>();
    for (let j = 0; j < i; j++) out[keys[j]] = values[j];
    out[redact(k)] = r;
    for (let j = i + 1; j < keys.length; j++) out[redact(keys[j])] = deep(o[keys[j]], depth + 1, copy);
    return out;
  }
  return copy ? dict<unknown>() : value;
}

/**
 * For tests: the registered secrets, to register again after a command run in the test process
 * (which starts with none, as a new process does: test/support/in-process.ts).
 */
export function registeredSecrets(): string[] {
  return [...secrets];
}

/** For tests: forget the registered secrets. */
export function clearSecrets(): void {
  secrets.clear();
  ordered = [];
}
