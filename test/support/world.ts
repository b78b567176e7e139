/**
 * A test world: the provider sandboxes on loopback, a config file with short windows, a fresh
 * store on the chosen backend, and `recon(...)` running recon against them.
 *
 * `world.recon` runs the command in this process (test/support/in-process.ts) with the world's
 * config, environment, clock and one open store shared by every in-process command of the world
 * (an embedded store boots once per world, not once per command). `world.reconProcess` and
 * `world.spawn` run the built binary as a child process, for what needs a real process (signals,
 * several workers at once). PGlite is single-process: before a child process or a test's own
 * `openStore` uses an embedded world store, `await world.release()` (reconProcess does it itself);
 * the next `world.recon` opens it again.
 *
 * A world closed with its store still open hands that store, emptied (`resetStore`), to the next
 * world the same file starts on the same backend: opening a PGlite store costs ~0.5–1 s of CPU,
 * emptying one milliseconds, and every world still starts from empty tables at the latest schema.
 * Only the run's own backends (backends.ts) pool, each for itself; a test's own Backend (a pooler,
 * a dedicated server) never gets a pooled store, nor leaves one. A worker that runs file after file
 * in one module graph hands a file's last pooled stores on to the next file.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStripeSandbox, type StripeSandbox, type StripeSandboxOptions } from '../../src/sandbox/stripe/server.js';
import { warehouseProviderConfig } from '../../src/sandbox/warehouse/provider-config.js';
import { startWarehouseSandbox, type WarehouseSandbox } from '../../src/sandbox/warehouse/server.js';
import type { Db } from '../../src/store/db.js';
import { openStore } from '../../src/store/open.js';
import { holdTempStore, isRunBackend, resetStore, type Backend } from './backends.js';
import { recon, spawnRecon, type CliOptions, type CliResult } from './cli.js';
import { atFileEnd } from './file-end.js';
import { runInProcess } from './in-process.js';

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
  /** `recon ARGS` in this process, on the world's store and clock. */
  recon(args: string[], opts?: CliOptions): Promise<CliResult>;
  /** `recon ARGS` as a child process (the built binary, the real clock); releases the store first. */
  reconProcess(args: string[], opts?: CliOptions): Promise<CliResult>;
  /** The built binary as a child process; on an embedded store, `await world.release()` first. */
  spawn(args: string[], opts?: CliOptions): ReturnType<typeof spawnRecon>;
  /** Records operations (objects) through `recon ops record -`. */
  record(ops: unknown[]): Promise<CliResult>;
  /** The store the in-process commands share, opened on first use. Do not close it: `release()`. */
  db(): Promise<Db>;
  /** Closes the shared store (if open), so that another process or `openStore` may take it. */
  release(): Promise<void>;
  /**
   * Moves the clock that in-process commands see forward by `ms`: "after the uncertainty window"
   * or "after the lease" without sleeping. Child processes keep the real clock.
   */
  advance(ms: number): void;
  /** The clock in-process commands see. */
  now(): Date;
  close(): Promise<void>;
}

/** Open, emptied stores that closed worlds of this file left, by backend (the run's own only), with their URLs. */
const pool = new Map<Backend, { url: string; db: Db; unhold: () => void }>();

// The pooled stores outlive the file that left them when the worker runs file after file in one
// module graph (vitest.config.ts: `isolate: false`): the next file's first world takes one instead of
// starting a store (PGlite: ~0.45 s of CPU; ~40 files start one). They go with the worker, which
// removes their folders when it exits (backends.ts). Isolated (RECON_TEST_ISOLATE=1), this module
// is evaluated again for the next file: the file's pooled stores are closed after its tests (then
// backends.ts removes their folders).
const keepAcrossFiles = process.env.RECON_TEST_ISOLATE !== '1';
atFileEnd(async () => {
  if (keepAcrossFiles) return;
  const stores = [...pool.values()];
  pool.clear();
  await Promise.all(
    stores.map(async (s) => {
      await s.db.close();
      s.unhold();
    }),
  );
});

export async function startWorld(o: WorldOptions): Promise<World> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-world-'));
  const stripe = await startStripeSandbox({ webhookSecret: 'whsec_test_world', ...o.stripe });
  const warehouse = o.warehouse ? await startWarehouseSandbox({ token: 'wh_token_test' }) : null;
  // A store at the latest schema (a copy of one migrated once per file, on PGlite): creating and
  // migrating an embedded store costs seconds, and every world needs a fresh one.
  const pooled = pool.get(o.backend);
  pool.delete(o.backend);
  // Held from removeTempStores while pooled only: in this world's hands it is a store like any other.
  pooled?.unhold();
  const storeUrl = pooled?.url ?? (await o.backend.migratedUrl());
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
  let offsetMs = 0;
  const now = () => new Date(Date.now() + offsetMs);
  let db: Promise<Db> | undefined = pooled && Promise.resolve(pooled.db);
  const world: World = {
    dir,
    configPath,
    storeUrl,
    stripe,
    warehouse,
    async recon(args, opts) {
      // `--db` names another store than the world's: let the command open that one itself.
      const store = args.includes('--db') ? undefined : await world.db();
      return runInProcess(args, { ...withEnv(opts), now, store });
    },
    async reconProcess(args, opts) {
      await world.release();
      return recon(args, withEnv(opts));
    },
    spawn(args, opts) {
      if (db && o.backend.name === 'pglite') {
        throw new Error('world.spawn on an embedded store that this process holds open: `await world.release()` first');
      }
      return spawnRecon(args, withEnv(opts));
    },
    record: (ops) =>
      world.recon(['ops', 'record', '-', '--json'], { input: ops.map((x) => JSON.stringify(x)).join('\n') }),
    db() {
      db ??= openStore(storeUrl).catch((err: unknown) => {
        db = undefined;
        throw err;
      });
      return db;
    },
    async release() {
      const open = db;
      db = undefined;
      if (open) await (await open.catch(() => null))?.close();
    },
    advance(ms) {
      offsetMs += ms;
    },
    now,
    async close() {
      const open = db && (await db.catch(() => null));
      db = undefined;
      if (open && isRunBackend(o.backend) && !pool.has(o.backend)) {
        try {
          await resetStore(open);
          pool.set(o.backend, { url: storeUrl, db: open, unhold: holdTempStore(storeUrl) });
        } catch {
          await open.close();
        }
      } else {
        await open?.close();
      }
      await stripe.close();
      await warehouse?.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  return world;
}
