/**
 * A loaded config with one `stripe` provider pointed at a sandbox (no file, no environment), for
 * tests that drive the adapter or its ledger scan directly.
 */
import { parseConfig } from '../../src/config/load.js';
import type { LoadedConfig, StripeProviderConfig } from '../../src/config/types.js';
import type { StripeSandbox } from '../../src/sandbox/stripe/server.js';

export function sandboxConfig(sandbox: StripeSandbox): { loaded: LoadedConfig; config: StripeProviderConfig } {
  const loaded = parseConfig(
    JSON.stringify({
      providers: { stripe: { type: 'stripe', apiKey: sandbox.apiKey, apiBase: sandbox.url, rateLimit: 10_000 } },
    }),
    { path: '/nowhere/recon.config.json', env: {} },
  );
  return { loaded, config: loaded.providers.stripe as StripeProviderConfig };
}
