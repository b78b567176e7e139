/**
 * The `module` provider (SPEC §6): a user's JavaScript module that implements the Provider
 * interface. Its `export default` is either a provider object or a factory
 * `(options, ctx) => Provider | Promise<Provider>`, where `options` is the config entry's
 * `options` object and `ctx` is `{ name, capabilities, configDir }`.
 *
 * The module is checked when it is loaded, so a missing method is a one-line usage error at start
 * rather than a TypeError in the middle of a reconciliation run.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { UsageError } from '../../errors.js';
import type { ModuleProviderConfig } from '../../config/types.js';
import type { Provider, ProviderCapabilities } from '../../types.js';
import { checkLease, DEFAULT_CAPABILITIES } from '../../config/providers.js';
import { redact } from '../../config/redact.js';
import { trustedModulePath } from '../../config/trust.js';
import { checkedGet, checkedLookup, checkedSubmit } from './answers.js';

interface ModuleContext {
  name: string;
  /** Defaults merged with what the config file sets for this provider. */
  capabilities: ProviderCapabilities;
  configDir: string;
}

const REQUIRED = ['submit', 'lookup', 'get'] as const;
const OPTIONAL = ['list', 'parseWebhook', 'close', 'validatePayload'] as const;

export async function loadModuleProvider(config: ModuleProviderConfig): Promise<Provider> {
  const where = `providers.${config.name}.module`;
  // Checked right before the import, and the checked (real) path is the one imported.
  const file = trustedModulePath(config.module, where, config.moduleSpec, config.trust ?? { entries: [], file: null });
  let exported: unknown;
  try {
    const mod = (await import(pathToFileURL(file).href)) as { default?: unknown };
    exported = mod.default;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const reason = code === 'ERR_MODULE_NOT_FOUND' ? 'file not found' : redact((err as Error).message ?? String(err));
    throw new UsageError(
      `${where}: cannot load ${config.moduleSpec} (${reason}); the path is relative to the config file`,
      { cause: err },
    );
  }
  if (exported === undefined) {
    throw new UsageError(
      `${where}: ${config.moduleSpec} has no default export; export default a provider or a factory (options, ctx) => provider`,
    );
  }
  const ctx: ModuleContext = {
    name: config.name,
    capabilities: { ...config.capabilities, ...config.capabilityOverrides },
    configDir: path.dirname(config.module),
  };
  const impl = (
    typeof exported === 'function'
      ? await (exported as (o: unknown, c: ModuleContext) => unknown)(config.options, ctx)
      : exported
  ) as Partial<Provider> | null;

  const missing = [...REQUIRED.filter((m) => typeof impl?.[m] !== 'function').map((m) => `${m}()`)];
  if (impl === null || typeof impl !== 'object' || typeof impl.capabilities !== 'object' || impl.capabilities === null)
    missing.push('capabilities');
  if (missing.length > 0) {
    throw new UsageError(
      `${where}: ${config.moduleSpec} does not export ${missing.join(', ')}; a module provider implements submit, lookup, get and capabilities`,
    );
  }
  const p = impl as Provider;
  // The module declares what it knows about its service; the config file has the last word.
  const capabilities: ProviderCapabilities = {
    ...DEFAULT_CAPABILITIES,
    ...p.capabilities,
    ...config.capabilityOverrides,
  };
  checkLease(`providers.${config.name}`, capabilities);

  const provider: Provider = {
    name: config.name,
    type: 'module',
    capabilities,
    // Its answers are checked here (./answers.ts): a malformed one is an answer recon cannot use.
    submit: async (req) => checkedSubmit(config.name, await p.submit(req)),
    lookup: async (query) => checkedLookup(config.name, await p.lookup(query)),
    get: async (id) => checkedGet(config.name, await p.get(id)),
  };
  for (const m of OPTIONAL) {
    if (typeof p[m] === 'function')
      (provider as unknown as Record<string, unknown>)[m] = (p[m] as (...a: unknown[]) => unknown).bind(p);
  }
  return provider;
}
