/**
 * The stripe-node client and the one door every request goes through: the client-side token
 * bucket (stay under `rateLimit`) and bounded 429 retries honouring `Retry-After`.
 */
import type Stripe from 'stripe';
import { StripeSdk } from './sdk.js';
import { UsageError } from '../../errors.js';
import { backoffDelay, realSleep, retryAfterMs, TokenBucket, withRetries, type Sleep } from '../../lib/ratelimit.js';
import type { StripeProviderConfig } from '../../config/types.js';
import { headerOf } from './classify.js';

/** Retries after the first request: enough to ride out a burst of throttling, bounded so a run never hangs. */
const MAX_RETRIES = 3;
/** A `Retry-After` longer than this is not waited for: the operation stays unresolved and `run` comes back. */
const MAX_RETRY_AFTER_MS = 60_000;

export interface StripeClient {
  stripe: Stripe;
  /** Runs one API call under the rate limit; `read` calls are also retried on connection errors and 5xx. */
  call<T>(fn: () => Promise<T>, kind: 'read' | 'write'): Promise<T>;
}

export interface ClientDeps {
  sleep?: Sleep;
  random?: () => number;
  /**
   * Seconds stripe-node waits before it sends a request again after its connection closed (its one
   * retry of a closed connection, made even with maxNetworkRetries 0): 0.5 s unless given, which its
   * options cannot change. The demo gives 0: it moves its clock on rather than waiting (src/demo/world.ts).
   */
  networkRetryDelayS?: number;
}

export function createClient(config: StripeProviderConfig, deps: ClientDeps = {}): StripeClient {
  const sleep = deps.sleep ?? realSleep;
  const random = deps.random ?? Math.random;
  const stripe = new StripeSdk(config.apiKey, {
    ...endpointOf(config),
    // Zero: recon owns retry permission (SPEC §1.4). A 409 or 5xx on a submit is an unknown outcome
    // that `recon run` resolves by lookup; stripe-node still retries a closed connection once, with
    // our key, which is harmless because the key is the operation's.
    maxNetworkRetries: 0,
    timeout: config.capabilities.timeoutMs,
    telemetry: false,
  });
  const retryDelayS = deps.networkRetryDelayS;
  if (retryDelayS !== undefined) stripe.getInitialNetworkRetryDelay = () => retryDelayS;
  const bucket = new TokenBucket({ ratePerSec: config.capabilities.rateLimit, sleep });

  const call = <T>(fn: () => Promise<T>, kind: 'read' | 'write'): Promise<T> =>
    withRetries(
      async () => {
        await bucket.take();
        return withoutCallSiteStack(fn);
      },
      {
        retries: MAX_RETRIES,
        isRetryable: (err) =>
          isRateLimited(err) ? retryAfterOf(err) <= MAX_RETRY_AFTER_MS : kind === 'read' && isTransient(err),
        // Retry-After is a floor; the jitter on top keeps several throttled workers from returning together.
        delayFor: (err, attempt) => {
          const floor = isRateLimited(err) ? retryAfterOf(err) : 0;
          // Retry-After concerns the whole client: every request waits, not only the one that was refused.
          bucket.pause(floor);
          return floor + backoffDelay(attempt, { baseMs: 250, maxMs: 5_000, random });
        },
        sleep,
      },
    );
  return { stripe, call };
}

/**
 * stripe-node captures `new Error().stack` at every request, to append the call site to an error
 * that may follow: V8 formats the stack each time, ~0.1 ms per lookup, a tenth of recon's CPU per
 * operation (npm run bench, claims, node --cpu-prof). While the request is built the limit is 0:
 * an error keeps its type, message and status, and loses only that call-site stack.
 */
function withoutCallSiteStack<T>(fn: () => Promise<T>): Promise<T> {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return fn();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

function endpointOf(config: StripeProviderConfig): { host?: string; port?: number; protocol?: 'http' | 'https' } {
  if (config.apiBase === null) return {};
  let url: URL;
  try {
    url = new URL(config.apiBase);
  } catch {
    throw new UsageError(`providers.${config.name}.apiBase: not a URL; write it like https://api.stripe.com`);
  }
  const protocol = url.protocol === 'http:' ? 'http' : 'https';
  return { host: url.hostname, port: url.port ? Number(url.port) : protocol === 'http' ? 80 : 443, protocol };
}

export function isRateLimited(err: unknown): boolean {
  return (
    err instanceof StripeSdk.errors.StripeError &&
    (err.statusCode === 429 || err instanceof StripeSdk.errors.StripeRateLimitError)
  );
}

/** Milliseconds the provider asked us to wait; 0 when it did not say. */
export function retryAfterOf(err: unknown): number {
  const headers = err instanceof StripeSdk.errors.StripeError ? err.headers : undefined;
  return retryAfterMs(headerOf(headers, 'retry-after')) ?? 0;
}

function isTransient(err: unknown): boolean {
  if (!(err instanceof StripeSdk.errors.StripeError)) return false;
  return err instanceof StripeSdk.errors.StripeConnectionError || (err.statusCode ?? 0) >= 500;
}
