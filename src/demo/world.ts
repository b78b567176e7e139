/**
 * The demo's world: the sandbox providers in this process, a configuration that points at them
 * with short windows, and a throw-away in-memory store. Nothing is written to disk, so the demo
 * can never touch a `.recon/` folder or a config file in the caller's directory.
 */
import os from 'node:os';
import path from 'node:path';
import { parseConfig } from '../config/load.js';
import type { LoadedConfig } from '../config/types.js';
import type { CoreContext } from '../core/journal/context.js';
import { createProvider } from '../providers/index.js';
import { startStripeSandbox, type StripeSandbox } from '../sandbox/stripe/server.js';
import { startWarehouseSandbox, type WarehouseSandbox } from '../sandbox/warehouse/server.js';
import type { Db } from '../store/db.js';
import { openStore } from '../store/open.js';
import type { Provider } from '../types.js';
import { warehouseProviderConfig } from '../sandbox/warehouse/provider-config.js';

/**
 * The uncertainty window every demo provider uses: long enough to show a wait, short enough to sit
 * through. The demo waits it out once (play.ts), so it is a fourth of the demo's wall time at 1 s;
 * what the demo shows (a wait inside the window, a retry past it) is the same at 500 ms.
 */
export const DEMO_WINDOW_MS = 500;
/** How long the legacy warehouse keeps an idempotency key: past it by the second run (incident 5). */
export const LEGACY_KEY_RETENTION_MS = 500;
export const DEMO_STORE_URL = 'memory:';
const DEMO_ACTOR = 'recon-demo';

export interface DemoWorld {
  ctx: CoreContext;
  config: LoadedConfig;
  stripe: StripeSandbox;
  /** The warehouse of SPEC §6 (http provider, keys kept 7 days, lookup not authoritative). */
  warehouse: WarehouseSandbox;
  /** An older warehouse that forgets idempotency keys after one second. */
  legacyWarehouse: WarehouseSandbox;
  provider(name: string): Promise<Provider>;
  close(): Promise<void>;
}

const WAREHOUSE_TOKEN = 'wh_demo_token';

function warehouseConfig(baseUrl: string, keyRetention: string): Record<string, unknown> {
  return warehouseProviderConfig(baseUrl, WAREHOUSE_TOKEN, {
    keyRetention,
    uncertaintyWindow: `${DEMO_WINDOW_MS}ms`,
    timeout: '2s',
    lease: '4s',
  });
}

export async function startDemoWorld(o: { now?: () => Date } = {}): Promise<DemoWorld> {
  const opened: { close(): Promise<void> }[] = [];
  const providers = new Map<string, Promise<Provider>>();
  const close = async () => {
    for (const p of providers.values()) await (await p.catch(() => null))?.close?.();
    // In reverse order of opening: the store before the sandboxes it was filled from.
    for (const c of opened.reverse()) await c.close().catch(() => undefined);
  };
  try {
    const stripe = await startStripeSandbox({ apiKey: 'sk_test_demo', webhookSecret: 'whsec_demo' });
    opened.push(stripe);
    const warehouse = await startWarehouseSandbox({ token: WAREHOUSE_TOKEN });
    opened.push(warehouse);
    const legacyWarehouse = await startWarehouseSandbox({
      token: WAREHOUSE_TOKEN,
      keyRetentionMs: LEGACY_KEY_RETENTION_MS,
    });
    opened.push(legacyWarehouse);
    const text = JSON.stringify({
      providers: {
        stripe: {
          type: 'stripe',
          apiKey: stripe.apiKey,
          apiBase: stripe.url,
          webhookSecret: stripe.webhookSecret,
          keyRetention: '24h',
          uncertaintyWindow: `${DEMO_WINDOW_MS}ms`,
          rateLimit: 200,
          timeout: '2s',
          lease: '4s',
          // The agent's afternoon: small refunds an agent proposes are approved by policy.
          autoApprove: { maxAmount: 5000, currencies: ['usd'] },
        },
        warehouse: warehouseConfig(warehouse.url, '7d'),
        'warehouse-legacy': warehouseConfig(legacyWarehouse.url, `${LEGACY_KEY_RETENTION_MS}ms`),
      },
    });
    // The path only anchors module providers, which the demo has none of; the file is never written.
    const config = parseConfig(text, { path: path.join(os.tmpdir(), 'recon-demo.config.json'), env: {} });
    const db: Db = await openStore(DEMO_STORE_URL);
    opened.push(db);
    return {
      ctx: { db, actor: DEMO_ACTOR, now: o.now ?? (() => new Date()) },
      config,
      stripe,
      warehouse,
      legacyWarehouse,
      provider(name) {
        let p = providers.get(name);
        if (!p) providers.set(name, (p = createProvider(name, config)));
        return p;
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
