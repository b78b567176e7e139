/**
 * Small HTTP helpers shared by the sandbox servers (plain `node:http`, no framework), so both
 * sandboxes parse, answer and count requests the same way.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dict } from '../lib/dict.js';
import { canonicalJson, sha256Hex } from '../lib/canonical.js';
import { readBody as readBodyWithin } from '../lib/http-body.js';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * Random bytes drawn from a pool filled 64 KiB at a time: one `randomBytes` call per id cost a
 * system call each (59% of the time seeding a million-refund ledger took: npm run bench,
 * audit-duplicates).
 */
const POOL_SIZE = 64 * 1024;
let pool = Buffer.alloc(0);
let poolAt = 0;

/** A Stripe-looking id: prefix + 24 random base62 characters (`re_3Nx…`). */
export function randomId(prefix: string, length = 24): string {
  if (poolAt + length > pool.length) {
    pool = randomBytes(Math.max(POOL_SIZE, length));
    poolAt = 0;
  }
  let out = '';
  for (let i = poolAt; i < poolAt + length; i++) out += ALPHABET[pool[i] % ALPHABET.length];
  poolAt += length;
  return `${prefix}_${out}`;
}

export function requestId(): string {
  return randomId('req', 14);
}

/**
 * Two requests carry "the same parameters" when their canonical JSON (src/lib/canonical.ts, the
 * one recon hashes payloads with) matches. The parameters are parsed form or JSON, never a value
 * canonicalJson refuses.
 */
export function fingerprint(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}

/**
 * A request body through the one reader (src/lib/http-body.ts): capped, and given 10 s to arrive,
 * so a test client that stalls fails its request instead of holding a sandbox open.
 */
export function readBody(req: IncomingMessage, maxBytes = 1024 * 1024): Promise<string> {
  return readBodyWithin(req, { maxBytes, timeoutMs: 10_000 });
}

export type FormValue = string | FormObject | FormValue[];
export interface FormObject {
  [key: string]: FormValue;
}

/**
 * Decodes `application/x-www-form-urlencoded` the way Stripe reads what stripe-node sends:
 * `metadata[key]=v` → `{metadata: {key: 'v'}}`, `expand[]=a` / `expand[0]=a` → `{expand: ['a']}`.
 */
export function parseForm(text: string): FormObject {
  const root: FormObject = dict<FormValue>();
  if (!text) return root;
  for (const pair of text.split('&')) {
    if (!pair) continue;
    const eq = pair.indexOf('=');
    const rawKey = eq < 0 ? pair : pair.slice(0, eq);
    const rawValue = eq < 0 ? '' : pair.slice(eq + 1);
    const key = decodeURIComponent(rawKey.replace(/\+/g, ' '));
    const value = decodeURIComponent(rawValue.replace(/\+/g, ' '));
    const match = /^([^[]+)((?:\[[^\]]*\])*)$/.exec(key);
    const path = match ? [match[1], ...[...match[2].matchAll(/\[([^\]]*)\]/g)].map((m) => m[1])] : [key];
    assignPath(root, path, value);
  }
  return root;
}

function assignPath(root: FormObject, path: string[], value: string): void {
  let node: FormObject | FormValue[] = root;
  for (let i = 0; i < path.length; i++) {
    const part = path[i];
    const last = i === path.length - 1;
    const nextIsArray = !last && (path[i + 1] === '' || /^\d+$/.test(path[i + 1]));
    if (Array.isArray(node)) {
      const index = part === '' ? node.length : Number(part);
      if (last) node[index] = value;
      else node = (node[index] ??= nextIsArray ? [] : dict<FormValue>()) as FormObject | FormValue[];
    } else {
      if (last) node[part] = value;
      else {
        const existing: FormValue | undefined = node[part];
        node = typeof existing === 'object' ? existing : (node[part] = nextIsArray ? [] : dict<FormValue>());
      }
    }
  }
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.destroyed || res.writableEnded) return;
  const text = JSON.stringify(body, null, 2);
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/** Destroys the connection without an answer: what a dropped connection or crashed proxy looks like. */
export function dropConnection(req: IncomingMessage, res: ServerResponse): void {
  res.socket?.destroy();
  req.socket.destroy();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Token bucket for the provider's rate limit. It runs on the real monotonic clock, not the
 * injected one, so a test that freezes `now` does not freeze the refill.
 */
export class TokenBucket {
  private tokens: number;
  private last = performance.now();
  constructor(private readonly perSecond: number) {
    this.tokens = perSecond;
  }
  /** Takes a token; returns 0 when allowed, else the seconds until one is free (for `Retry-After`). */
  take(): number {
    const t = performance.now();
    this.tokens = Math.min(this.perSecond, this.tokens + ((t - this.last) / 1000) * this.perSecond);
    this.last = t;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - this.tokens) / this.perSecond));
  }
}

export interface SandboxStats {
  requests: number;
  byRoute: Record<string, number>;
  status: Record<number, number>;
  listPages: number;
}

export function newStats(): SandboxStats {
  return { requests: 0, byRoute: {}, status: {}, listPages: 0 };
}

/** Counts the response status once the answer is written (dropped connections count as status 0). */
export function countStatus(stats: SandboxStats, res: ServerResponse): void {
  let counted = false;
  const count = (status: number) => {
    if (counted) return;
    counted = true;
    stats.status[status] = (stats.status[status] ?? 0) + 1;
  };
  res.on('finish', () => count(res.statusCode));
  res.on('close', () => count(res.writableFinished ? res.statusCode : 0));
}

export function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Closes the server and every open connection (held responses and keep-alive sockets included). */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** Parses `?a=1&b[c]=2` with the form rules (stripe-node encodes GET params the same way as bodies). */
export function parseQuery(url: string): { path: string; query: FormObject } {
  const q = url.indexOf('?');
  if (q < 0) return { path: url, query: {} };
  return { path: url.slice(0, q), query: parseForm(url.slice(q + 1)) };
}
