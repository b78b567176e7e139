/**
 * Staying polite to providers: a client-side token bucket, exponential backoff with full jitter,
 * `Retry-After` parsing, a retry loop and a concurrency limit. stripe-node retries connection
 * errors, 409 and 5xx itself but not a plain 429 (SPEC §6), so 429 handling lives here.
 * Clock and sleep are injectable so tests run on a fake clock without real waiting.
 */
import { UsageError } from '../errors.js';

export type Sleep = (ms: number) => Promise<void>;

export const realSleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

export interface TokenBucketOptions {
  /** Requests per second, sustained and at most in any 1-second window. `Infinity` disables limiting. */
  ratePerSec: number;
  /** Milliseconds clock. Default `performance.now` (monotonic). */
  now?: () => number;
  /** Default: a `setTimeout` promise. */
  sleep?: Sleep;
}

/**
 * The client-side rate limit. Requests are paced from the very first one, `1000 / ratePerSec` ms
 * apart, and no 1-second window ever holds more than `ratePerSec` of them: a user who sets
 * `rateLimit` to the provider's own limit must not be over it in the first second (a bucket that
 * starts full sends a whole second's worth at once and then keeps refilling, which is up to twice
 * the limit in the first second). Waiters are served in arrival order.
 *
 * Two rules, both needed:
 * - spacing: each request gets the next slot of a regular schedule. A timer that fires late does
 *   not cost throughput (the next slot is not pushed back), but only CATCH_UP_MS of lateness is
 *   made up, so a quiet period never becomes a burst;
 * - a sliding window of the last `floor(ratePerSec)` send times: a late slot followed by an on-time
 *   one must not put `ratePerSec + 1` requests into some 1-second window.
 * `pause(ms)` holds every request back (a 429's `Retry-After` concerns the whole client, not only
 * the request that got it).
 */
/**
 * How late a slot may be taken and still not push the schedule back. On a loaded machine timers
 * fire tens of milliseconds late (2 cores at load 18: a 10 ms pacing reached 65/s when only one
 * slot of lateness was made up).
 */
const CATCH_UP_MS = 250;

export class TokenBucket {
  private readonly ratePerSec: number;
  private readonly intervalMs: number;
  private readonly now: () => number;
  private readonly sleep: Sleep;
  /**
   * Send times of the last `windowSize` requests: appended until it holds that many, then a ring
   * (grown as requests are sent: a bucket of 1,000,000/s must not allocate a million slots up
   * front). `windowSize` is 0 when ratePerSec < 1 (spacing suffices).
   */
  private readonly window: number[] = [];
  private readonly windowSize: number;
  private head = 0;
  private sent = 0;
  private nextAt = -Infinity;
  private pausedUntil = -Infinity;
  private queue: Promise<void> = Promise.resolve();

  constructor(options: TokenBucketOptions) {
    const { ratePerSec } = options;
    if (!(ratePerSec > 0)) {
      throw new UsageError(`rateLimit: ${ratePerSec} is not a rate; use a positive number of requests per second`);
    }
    this.ratePerSec = ratePerSec;
    this.intervalMs = 1000 / ratePerSec;
    this.now = options.now ?? (() => performance.now());
    this.sleep = options.sleep ?? realSleep;
    this.windowSize = Number.isFinite(ratePerSec) && ratePerSec >= 1 ? Math.floor(ratePerSec) : 0;
  }

  /** Resolves when a request may be sent. */
  take(): Promise<void> {
    if (this.ratePerSec === Infinity) return Promise.resolve();
    // Chaining keeps waiters in order; without it, a burst of waiters would all wake at the same
    // moment and race for one slot, and the losers could starve.
    const turn = this.queue.then(() => this.acquire());
    this.queue = turn.catch(() => undefined);
    return turn;
  }

  /** Holds every request back for `ms` from now (the provider's `Retry-After`). */
  pause(ms: number): void {
    if (!(ms > 0)) return;
    this.pausedUntil = Math.max(this.pausedUntil, this.now() + ms);
  }

  private async acquire(): Promise<void> {
    for (;;) {
      const t = this.now();
      const windowFull = this.windowSize > 0 && this.sent >= this.windowSize;
      const ready = Math.max(this.nextAt, this.pausedUntil, windowFull ? this.window[this.head] + 1000 : -Infinity);
      if (t >= ready) {
        // Lateness up to CATCH_UP_MS is made up (the window rule still caps every second); more (a
        // quiet period, a pause) is not.
        this.nextAt = t - this.nextAt <= CATCH_UP_MS ? this.nextAt + this.intervalMs : t + this.intervalMs;
        if (this.windowSize > 0) {
          if (this.window.length < this.windowSize) this.window.push(t);
          else this.window[this.head] = t;
          this.head = (this.head + 1) % this.windowSize;
          this.sent++;
        }
        return;
      }
      await this.sleep(Math.ceil(ready - t));
    }
  }
}

export interface BackoffOptions {
  /** Default 250ms. */
  baseMs?: number;
  /** Default 30s. */
  maxMs?: number;
  /** Default Math.random. */
  random?: () => number;
}

/**
 * Exponential backoff with full jitter: uniform in [0, min(maxMs, baseMs·2^attempt)).
 * Full jitter spreads the workers of several `recon run` hosts that were throttled together,
 * instead of having them come back in lockstep (AWS Architecture Blog, "Exponential Backoff And Jitter").
 *
 * @param attempt retries already made: 0 before the first retry.
 */
export function backoffDelay(attempt: number, options: BackoffOptions = {}): number {
  const { baseMs = 250, maxMs = 30_000, random = Math.random } = options;
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt));
  return Math.floor(random() * ceiling);
}

/**
 * Parses a `Retry-After` header: delay-seconds or an HTTP date (RFC 9110 §10.2.3).
 * Returns undefined when absent or unreadable, so the caller falls back to its own backoff.
 */
export function retryAfterMs(headerValue: string | null | undefined, now: number = Date.now()): number | undefined {
  if (headerValue == null) return undefined;
  const s = headerValue.trim();
  if (/^\d+$/.test(s)) return Number(s) * 1000;
  // Only the HTTP-date form is meant here; Date.parse would also take "5" or "1.5" as a year.
  if (!/[a-z]/i.test(s)) return undefined;
  const at = Date.parse(s);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

export interface RetryOptions {
  /** Retries after the first call; 0 means one call only. */
  retries: number;
  /** Only errors that prove the request was not acted upon (429, a failed read) may be retried. */
  isRetryable: (err: unknown) => boolean;
  /** Delay before retry number `attempt` (0-based). Default: `backoffDelay(attempt)`. */
  delayFor?: (err: unknown, attempt: number) => number;
  sleep?: Sleep;
}

/**
 * Calls `fn` until it succeeds, a non-retryable error occurs, or the retries are spent; then
 * rethrows the last error unchanged, so the caller still classifies it.
 * `fn` must be safe to repeat: a read, or a submit whose idempotency key is fixed.
 */
export async function withRetries<T>(fn: (attempt: number) => Promise<T>, options: RetryOptions): Promise<T> {
  const { retries, isRetryable, delayFor = (_err, attempt) => backoffDelay(attempt), sleep = realSleep } = options;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (err) {
      if (attempt >= retries || !isRetryable(err)) throw err;
      await sleep(delayFor(err, attempt));
    }
  }
}

/**
 * Returns a function that runs at most `n` of the given tasks at a time, the rest queued in order
 * (what `p-limit` does; ten lines are not worth a dependency).
 */
export function limitConcurrency(n: number): <T>(task: () => Promise<T>) => Promise<T> {
  if (!(Number.isInteger(n) && n >= 1)) {
    throw new UsageError(`concurrency: ${n} is not a valid limit; use a whole number of at least 1`);
  }
  let active = 0;
  // A queue read from `head` (shift() moves the whole array: `recon run` queues a batch of up to
  // 5,000 lookups behind its concurrency), compacted once it has been read halfway.
  let waiting: (() => void)[] = [];
  let head = 0;
  // A finishing task hands its slot straight to the next waiter, so a task arriving in between
  // cannot overtake the queue.
  const release = () => {
    if (head < waiting.length) {
      const wake = waiting[head++];
      if (head === waiting.length) [waiting, head] = [[], 0];
      else if (head > 1024 && head * 2 > waiting.length) [waiting, head] = [waiting.slice(head), 0];
      wake();
    } else active--;
  };
  return async <T>(task: () => Promise<T>): Promise<T> => {
    if (active >= n) await new Promise<void>((resolve) => waiting.push(resolve));
    else active++;
    try {
      return await task();
    } finally {
      release();
    }
  };
}
