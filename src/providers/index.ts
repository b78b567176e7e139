/**
 * Builds a Provider from its configuration. Each adapter is imported only when a provider of its
 * type is used: the Stripe SDK alone costs a noticeable part of `recon`'s start-up, and most
 * commands (`ops list`, `audit verify`) never talk to a provider.
 */
import { UsageError } from '../errors.js';
import type { Provider } from '../types.js';
import { redact, redactDeep } from '../config/redact.js';
import type { LoadedConfig } from '../config/types.js';

export interface ProviderDeps {
  /** Injected for tests of rate limiting and 429 back-off; default real timers. */
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  /** Stripe only: the SDK's wait before it retries a closed connection (providers/stripe/client.ts). */
  networkRetryDelayS?: number;
}

export async function createProvider(name: string, loaded: LoadedConfig, deps: ProviderDeps = {}): Promise<Provider> {
  // Own properties only: a name from outside (a webhook URL, a tool call) such as `__proto__` or
  // `constructor` must be an unknown provider, not a key of Object.prototype.
  const config = Object.hasOwn(loaded.providers, name) ? loaded.providers[name] : undefined;
  const deferred = loaded.unavailable && Object.hasOwn(loaded.unavailable, name) ? loaded.unavailable[name] : undefined;
  if (deferred) throw new UsageError(deferred);
  if (!config) {
    const names = Object.keys(loaded.providers);
    throw new UsageError(
      `unknown provider ${JSON.stringify(name)}; ${names.length > 0 ? `configured: ${names.join(', ')}` : 'none is configured (set STRIPE_API_KEY or write recon.config.json)'}`,
    );
  }
  switch (config.type) {
    case 'stripe': {
      const { createStripeProvider } = await import('./stripe/index.js');
      return redacting(createStripeProvider(config, deps));
    }
    case 'http': {
      const { createHttpProvider } = await import('./http/index.js');
      return redacting(createHttpProvider(config, deps));
    }
    case 'module': {
      const { loadModuleProvider } = await import('./module/index.js');
      // A module's objects are its own: each answer copied, so that a list that yields one object and
      // changes it before the next (or keeps an event it handed over) cannot change what recon holds.
      return redacting(await loadModuleProvider(config), { copy: true });
    }
  }
}

/**
 * The boundary between a provider and recon: what an adapter returns or throws (messages, request
 * ids, transactions, webhook events) is redacted of every known secret before recon stores it in
 * attempts, observations or the append-only audit trail, or prints it. An adapter may echo its
 * own token (a module provider's error, a gateway's `request-id` header); nothing after this sees it.
 * Recon's own adapters never change an answer once handed over: it is passed on as it is when it
 * holds nothing to redact. With `copy` (a module's), every answer is copied (redactDeep).
 */
function redacting(p: Provider, o: { copy?: boolean } = {}): Provider {
  const clean = <T>(value: T): T => redactDeep(value, o);
  const scrub = (err: unknown): unknown => {
    if (err instanceof Error) {
      err.message = redact(err.message);
      if (err.stack) err.stack = redact(err.stack);
      return err;
    }
    return typeof err === 'string' ? redact(err) : clean(err);
  };
  const guard =
    <A extends unknown[], R>(fn: (...a: A) => Promise<R>) =>
    async (...a: A): Promise<R> => {
      try {
        return clean(await fn(...a));
      } catch (err) {
        throw scrub(err);
      }
    };
  const wrapped: Provider = {
    ...p,
    submit: guard((req) => p.submit(req)),
    lookup: guard((q) => p.lookup(q)),
    get: guard((id) => p.get(id)),
  };
  if (p.list) {
    const list = p.list.bind(p);
    wrapped.list = async function* (range) {
      try {
        for await (const txn of list(range)) yield clean(txn);
      } catch (err) {
        throw scrub(err);
      }
    };
  }
  if (p.parseWebhook) {
    const parse = p.parseWebhook.bind(p);
    wrapped.parseWebhook = (body, signature) => {
      try {
        return clean(parse(body, signature));
      } catch (err) {
        throw scrub(err);
      }
    };
  }
  return wrapped;
}
