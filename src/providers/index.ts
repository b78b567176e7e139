/**
 * Builds a Provider from its configuration. Each adapter is imported only when a provider of its
 * type is used: the Stripe SDK alone costs a noticeable part of `recon`'s start-up, and most
 * commands (`ops list`, `audit verify`) never talk to a provider.
 */
import { UsageError } from '../errors.js';
import type { Provider } from '../types.js';
import type { LoadedConfig } from '../config/types.js';

export interface ProviderDeps {
  /** Injected for tests of rate limiting and 429 back-off; default real timers. */
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
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
      return createStripeProvider(config, deps);
    }
    case 'http': {
      const { createHttpProvider } = await import('./http/index.js');
      return createHttpProvider(config, deps);
    }
    case 'module': {
      const { loadModuleProvider } = await import('./module/index.js');
      return loadModuleProvider(config);
    }
  }
}
