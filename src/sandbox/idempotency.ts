/**
 * The idempotency layer both sandboxes share, modelled on Stripe's (docs.stripe.com/api/idempotent_requests):
 * the first request with a key saves its status and body once the endpoint has begun executing;
 * a later request with the same key and parameters gets that saved answer back and creates nothing;
 * other parameters (or another endpoint) are an error; a request arriving while the first is still
 * running is told so (409). Requests that never reached the endpoint (parameter validation,
 * injected 5xx, dropped before commit) save nothing, so retrying them is safe.
 */

interface StoredResponse {
  status: number;
  body: unknown;
  /** Request-Id of the request that produced it (Stripe returns it as `Original-Request` on replays). */
  requestId: string;
}

interface Entry {
  route: string;
  fingerprint: string;
  createdAt: number;
  response: StoredResponse | null;
}

export type BeginResult =
  | { kind: 'new'; complete(response: StoredResponse): void; abandon(): void }
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'mismatch'; reason: 'params' | 'endpoint'; firstRoute: string }
  | { kind: 'in_progress' };

export class IdempotencyStore {
  private readonly entries = new Map<string, Entry>();
  private begins = 0;

  constructor(
    private readonly retentionMs: number,
    private readonly now: () => number,
  ) {}

  /**
   * Starts a request under `key` (scoped by `scope`, e.g. the API key: Stripe keeps keys per account).
   * A `new` result must end in `complete` (answer saved) or `abandon` (nothing saved).
   */
  begin(scope: string, key: string, route: string, fingerprint: string): BeginResult {
    if (++this.begins % 1000 === 0) this.prune();
    const id = `${scope}\u0000${key}`;
    const existing = this.entries.get(id);
    if (existing && this.now() - existing.createdAt < this.retentionMs) {
      if (existing.route !== route) return { kind: 'mismatch', reason: 'endpoint', firstRoute: existing.route };
      if (existing.fingerprint !== fingerprint) return { kind: 'mismatch', reason: 'params', firstRoute: route };
      if (!existing.response) return { kind: 'in_progress' };
      return { kind: 'replay', response: existing.response };
    }
    // A key past retention is forgotten: the provider treats it as a brand-new request.
    const entry: Entry = { route, fingerprint, createdAt: this.now(), response: null };
    this.entries.set(id, entry);
    let settled = false;
    return {
      kind: 'new',
      complete: (response) => {
        if (settled) return;
        settled = true;
        entry.response = response;
      },
      abandon: () => {
        if (settled) return;
        settled = true;
        if (this.entries.get(id) === entry) this.entries.delete(id);
      },
    };
  }

  size(): number {
    return this.entries.size;
  }

  clear(): void {
    this.entries.clear();
  }

  private prune(): void {
    const t = this.now();
    for (const [id, entry] of this.entries) {
      if (entry.response && t - entry.createdAt >= this.retentionMs) this.entries.delete(id);
    }
  }
}
