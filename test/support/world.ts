/**
 * A test world: the provider sandboxes on loopback, a config file with short windows, a fresh
 * store on the chosen backend, and `recon(...)` running the built CLI against them.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStripeSandbox, type StripeSandbox, type StripeSandboxOptions } from '../../src/sandbox/stripe/server.js';
import { warehouseProviderConfig } from '../../src/sandbox/warehouse/provider-config.js';
import { startWarehouseSandbox, type WarehouseSandbox } from '../../src/sandbox/warehouse/server.js';
import type { Backend } from './backends.js';
import { recon, spawnRecon, type CliOptions, type CliResult } from './cli.js';

export interface WorldOptions {
  backend: Backend;
  stripe?: StripeSandboxOptions;
  /** Overrides merged into the stripe provider config (e.g. { uncertaintyWindow: '1s' }). */
  stripeConfig?: Record<string, unknown>;
  warehouse?: boolean;
  warehouseConfig?: Record<string, unknown>;
}

export interface World {
  dir: string;
  configPath: string;
  storeUrl: string;
  stripe: StripeSandbox;
  warehouse: WarehouseSandbox | null;
  recon(args: string[], opts?: CliOptions): Promise<CliResult>;
  spawn(args: string[], opts?: CliOptions): ReturnType<typeof spawnRecon>;
  /** Records operations (objects) through `recon ops record -`. */
  record(ops: unknown[]): Promise<CliResult>;
  close(): Promise<void>;
}

export async function startWorld(o: WorldOptions): Promise<World> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-world-'));
  const stripe = await startStripeSandbox({ webhookSecret: 'whsec_test_world', ...o.stripe });
  const warehouse = o.warehouse ? await startWarehouseSandbox({ token: 'wh_token_test' }) : null;
  const storeUrl = await o.backend.url();
  const providers: Record<string, unknown> = {
    stripe: {
      type: 'stripe',
      apiKey: '${STRIPE_API_KEY}',
      apiBase: stripe.url,
      webhookSecret: '${STRIPE_WEBHOOK_SECRET}',
      keyRetention: '24h',
      uncertaintyWindow: '1s',
      maxAttempts: 3,
      escalateAfter: '72h',
      rateLimit: 200,
      concurrency: 8,
      timeout: '2s',
      lease: '4s',
      ...o.stripeConfig,
    },
  };
  if (warehouse) {
    providers.warehouse = warehouseProviderConfig(warehouse.url, '${WAREHOUSE_TOKEN}', {
      uncertaintyWindow: '1s',
      timeout: '2s',
      lease: '4s',
      ...o.warehouseConfig,
    });
  }
  const configPath = path.join(dir, 'recon.config.json');
  fs.writeFileSync(configPath, JSON.stringify({ db: storeUrl, providers }, null, 2));
  const env = {
    STRIPE_API_KEY: stripe.apiKey,
    STRIPE_WEBHOOK_SECRET: stripe.webhookSecret,
    WAREHOUSE_TOKEN: 'wh_token_test',
  };
  const withEnv = (opts: CliOptions = {}): CliOptions => ({ cwd: dir, ...opts, env: { ...env, ...opts.env } });
  return {
    dir,
    configPath,
    storeUrl,
    stripe,
    warehouse,
    recon: (args, opts) => recon(args, withEnv(opts)),
    spawn: (args, opts) => spawnRecon(args, withEnv(opts)),
    record: (ops) =>
      recon(['ops', 'record', '-', '--json'], withEnv({ input: ops.map((x) => JSON.stringify(x)).join('\n') })),
    async close() {
      await stripe.close();
      await warehouse?.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
