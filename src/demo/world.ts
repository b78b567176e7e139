/**
 * The demo's world: the sandbox providers in this process, a configuration that points at them
 * with short windows, and a throw-away in-memory store. Nothing is written to disk, so the demo
 * can never touch a `.recon/` folder or a config file in the caller's directory.
 *
 * One clock for all of it: recon's (the core's injected `now`) and the sandboxes' (their objects'
 * `created`, their `Date` header, key retention, delayed indexing) read the demo's clock, the
 * machine's time plus whatever the demo has moved it on. Where the demo only needs time to pass
 * (past the uncertainty window, past the legacy warehouse's key retention) it moves that clock
 * rather than sleeping, and says so; every party sees the same time, as after a real wait.
 */
import os from 'node:os';
import path from 'node:path';
import { parseConfig } from '../config/load.js';
import type { LoadedConfig } from '../config/types.js';
import type { CoreContext } from '../core/journal/context.js';
import { formatAmount } from '../lib/money.js';
import { createProvider } from '../providers/index.js';
import { startStripeSandbox, type StripeSandbox } from '../sandbox/stripe/server.js';
import { startWarehouseSandbox, type WarehouseSandbox } from '../sandbox/warehouse/server.js';
import type { Db } from '../store/db.js';
import { openStore } from '../store/open.js';
import type { Provider } from '../types.js';
import { warehouseProviderConfig } from '../sandbox/warehouse/provider-config.js';

/**
 * The uncertainty window every demo provider uses. The demo moves its clock past it once (play.ts)
 * rather than sleeping through it, so its length costs no wall time; it is short so that the ages
 * and times the demo prints stay those of a run that takes a few seconds.
 */
export const DEMO_WINDOW_MS = 500;
/** How long the legacy warehouse keeps an idempotency key: past it by the second run (incident 5). */
export const LEGACY_KEY_RETENTION_MS = 500;
export const DEMO_STORE_URL = 'memory:';
const DEMO_ACTOR = 'recon-demo';

/** The time recon and the sandboxes read: the machine's, moved on by `advance`. */
interface DemoClock {
  now: () => Date;
  /** Moves the clock on by `ms`, for everyone at once; returns the new time. */
  advance: (ms: number) => Date;
}

export interface DemoWorld {
  ctx: CoreContext;
  clock: DemoClock;
  config: LoadedConfig;
  stripe: StripeSandbox;
  /** The warehouse of SPEC §6 (http provider, keys kept 7 days, lookup not authoritative). */
  warehouse: WarehouseSandbox;
  /** An older warehouse that forgets idempotency keys after one second. */
  legacyWarehouse: WarehouseSandbox;
  /** API requests that reached the Stripe sandbox on `route` (e.g. `POST /v1/refunds`) with this idempotency key. */
  stripeRequests(route: string, idempotencyKey: string): number;
  /** Resolves when the first such request reaches the Stripe sandbox. */
  stripeRequestArrives(route: string, idempotencyKey: string): Promise<void>;
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

/** `store`: the demo's `memory:` store, being opened elsewhere (src/store/thread.ts); else opened here. */
export async function startDemoWorld(store?: Promise<Db>): Promise<DemoWorld> {
  let offsetMs = 0;
  const nowMs = () => Date.now() + offsetMs;
  const clock: DemoClock = {
    now: () => new Date(nowMs()),
    advance(ms) {
      offsetMs += ms;
      return clock.now();
    },
  };
  const requests = new Map<string, number>();
  const arrivals = new Map<string, { promise: Promise<void>; arrived: () => void }>();
  const arrival = (tag: string) => {
    let a = arrivals.get(tag);
    if (!a) {
      let arrived!: () => void;
      const promise = new Promise<void>((resolve) => (arrived = resolve));
      arrivals.set(tag, (a = { promise, arrived }));
    }
    return a;
  };
  const opened: { close(): Promise<void> }[] = [];
  const providers = new Map<string, Promise<Provider>>();
  const close = async () => {
    for (const p of providers.values()) await (await p.catch(() => null))?.close?.();
    // In reverse order of opening: the store before the sandboxes it was filled from.
    for (const c of opened.reverse()) await c.close().catch(() => undefined);
  };
  try {
    const stripe = await startStripeSandbox({
      apiKey: 'sk_test_demo',
      webhookSecret: 'whsec_demo',
      now: nowMs,
      onRequest: (route, key) => {
        if (!key) return;
        const tag = `${route} ${key}`;
        requests.set(tag, (requests.get(tag) ?? 0) + 1);
        arrival(tag).arrived();
      },
    });
    opened.push(stripe);
    const warehouse = await startWarehouseSandbox({ token: WAREHOUSE_TOKEN, now: nowMs });
    opened.push(warehouse);
    const legacyWarehouse = await startWarehouseSandbox({
      token: WAREHOUSE_TOKEN,
      keyRetentionMs: LEGACY_KEY_RETENTION_MS,
      now: nowMs,
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
    const provider = (name: string) => {
      let p = providers.get(name);
      // stripe-node waits 0.5 s of real time before it sends a dropped request again (the refund
      // scenes drop two): on the demo's clock, as every other wait, that wait costs no wall time.
      if (!p) providers.set(name, (p = createProvider(name, config, { networkRetryDelayS: 0 })));
      return p;
    };
    if (store) warmUp(config, provider);
    const db: Db = await (store ?? openStore(DEMO_STORE_URL));
    opened.push(db);
    return {
      ctx: { db, actor: DEMO_ACTOR, now: clock.now },
      clock,
      config,
      stripe,
      warehouse,
      legacyWarehouse,
      stripeRequests: (route, key) => requests.get(`${route} ${key}`) ?? 0,
      stripeRequestArrives: (route, key) => arrival(`${route} ${key}`).promise,
      provider,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * What the scenes would first do on the main thread once the store is open, done while its thread
 * is still opening it (the main thread has loaded the demo's modules by then and waits): from then
 * on the two threads take turns, each statement's wait on the main thread's work, so a cost paid here
 * is wall time saved. The providers' clients (Stripe's SDK bundle), Intl's number data (the first
 * amount formatted, ~30 ms) and Node's fetch, which the warehouse provider's requests and the
 * sandbox's webhook deliveries use (undici, loaded at its first use: ~40 ms).
 */
function warmUp(config: LoadedConfig, provider: (name: string) => Promise<Provider>): void {
  for (const name of Object.keys(config.providers)) void provider(name).catch(() => undefined);
  formatAmount(0, 'usd');
  void new Response('').arrayBuffer();
}
