/**
 * What `recon mcp --http` checks before a request reaches a session: the `Host` and `Origin`
 * headers (DNS rebinding, MCP 2025-06-18 Streamable HTTP "Security Warning"), failed
 * authentications per address, and a request body that must arrive whole, small and in time.
 */
import { isIP } from 'node:net';
import type { IncomingMessage } from 'node:http';
import { UsageError } from '../errors.js';

/** `localhost`, `127.0.0.0/8` and `::1` (also IPv4-mapped): the addresses only this machine reaches. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (h === 'localhost' || h === '::1') return true;
  const v4 = h.replace(/^::ffff:/, '');
  return isIP(v4) === 4 && v4.startsWith('127.');
}

/**
 * An `--allow-origin` value as a browser sends it in `Origin` (`https://console.example.com`,
 * `http://localhost:5173`): scheme, host and port, nothing else.
 * @throws UsageError naming `--allow-origin` and the expected form.
 */
export function allowedOrigin(value: string): string {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  const bare =
    url !== undefined &&
    (url.protocol === 'http:' || url.protocol === 'https:') &&
    url.username === '' &&
    url.password === '' &&
    url.search === '' &&
    url.hash === '' &&
    url.pathname === '/';
  if (!url || !bare) {
    throw new UsageError(
      `--allow-origin: ${JSON.stringify(value)} is not an origin; give the scheme, host and port a browser sends, e.g. https://console.example.com or http://localhost:5173`,
    );
  }
  return url.origin;
}

/**
 * Why a request must be refused before anything else (403), or undefined: an `Origin` that is not
 * allowed (a web page, perhaps from a name rebound to this address), or, on loopback, a `Host` that
 * is not a loopback name (the tell of DNS rebinding). Requests without `Origin` are not from a
 * browser page and pass; the port in `Host` is not compared (an SSH or container port forward
 * changes it).
 */
export function rebindingRefusal(
  req: IncomingMessage,
  o: { loopback: boolean; origins: ReadonlySet<string> },
): string | undefined {
  const host = req.headers.host;
  if (o.loopback) {
    let hostname: string | undefined;
    try {
      hostname = host === undefined ? undefined : new URL(`http://${host}`).hostname;
    } catch {
      hostname = undefined;
    }
    if (hostname === undefined || !isLoopback(hostname)) {
      return `Forbidden: Host ${host === undefined ? '(none)' : JSON.stringify(host)} is not a loopback name; this server listens on loopback only, so use http://127.0.0.1:<port>/mcp or http://localhost:<port>/mcp (DNS rebinding protection)`;
    }
  }
  const origin = req.headers.origin;
  if (origin !== undefined && !o.origins.has(origin)) {
    return `Forbidden: Origin ${JSON.stringify(origin)} is not allowed to call this server (DNS rebinding protection); its operator can allow a web page's origin with recon mcp --http --allow-origin <origin>`;
  }
  return undefined;
}

/**
 * Failed authentications per client address in a fixed window: after `limit` of them within
 * `windowMs`, every request from that address is refused (429) until the window ends, so a token
 * cannot be guessed at network speed and a flood of wrong tokens costs nothing. Entries older than
 * the window are dropped by `sweep()`; at most `maxAddresses` are kept (the oldest goes first).
 */
export class AuthFailures {
  private readonly byAddress = new Map<string, { since: number; count: number }>();

  constructor(
    private readonly now: () => number,
    readonly limit = 10,
    readonly windowMs = 60_000,
    private readonly maxAddresses = 10_000,
  ) {}

  /** When requests from `address` are accepted again, or undefined if they are now. */
  blockedUntil(address: string): number | undefined {
    const e = this.byAddress.get(address);
    if (!e) return undefined;
    const until = e.since + this.windowMs;
    if (this.now() >= until) {
      this.byAddress.delete(address);
      return undefined;
    }
    return e.count >= this.limit ? until : undefined;
  }

  /** Counts a failed authentication; true when this one reached the limit (worth one line to the operator). */
  fail(address: string): boolean {
    const now = this.now();
    const e = this.byAddress.get(address);
    if (e && now < e.since + this.windowMs) {
      e.count++;
      return e.count === this.limit;
    }
    this.byAddress.delete(address);
    if (this.byAddress.size >= this.maxAddresses) {
      const oldest = this.byAddress.keys().next().value;
      if (oldest !== undefined) this.byAddress.delete(oldest);
    }
    this.byAddress.set(address, { since: now, count: 1 });
    return this.limit === 1;
  }

  sweep(): void {
    const now = this.now();
    for (const [address, e] of this.byAddress) if (now >= e.since + this.windowMs) this.byAddress.delete(address);
  }
}
