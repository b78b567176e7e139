/**
 * Issue 10, Faults: PostgreSQL goes away in the middle of `recon run` (`pg_ctl stop -m immediate`).
 * The pass must end with exit 6, the `--json` error document and the metrics file, never an
 * unhandled 'error' event (exit 1, raw stack). A dedicated server: the run's shared one stays up.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { submitOperation } from '../../src/core/submit.js';
import { createProvider } from '../../src/providers/index.js';
import { openStore } from '../../src/store/open.js';
import type { Backend } from '../support/backends.js';
import { collect } from '../support/cli.js';
import { createDatabase, startPostgres, type PostgresServer } from '../support/postgres.js';
import { startWorld, type World } from '../support/world.js';
import { expectExit, refundOp, sleep } from './incidents-support.js';

let server: PostgresServer | undefined;
let world: World | undefined;

beforeAll(async () => {
  server = await startPostgres();
});
afterAll(async () => {
  await world?.close();
  await server?.stop().catch(() => undefined);
});

describe('PostgreSQL lost mid-run', () => {
  it('pg_ctl stop -m immediate during `recon run`: exit 6, the --json error document, and the metrics file still written', async () => {
    const dedicated: Backend = {
      name: 'postgres',
      url: () => createDatabase(server!.url),
      migratedUrl: () => createDatabase(server!.url),
      emptyUrl: () => createDatabase(server!.url),
      open: async () => openStore(await createDatabase(server!.url)),
    };
    // Slow lookups and one in flight at a time, so the pass is still running when the server dies.
    world = await startWorld({ backend: dedicated, stripe: { refundStatus: 'pending', latencyMs: 150 } });
    const w = world;
    const ops = Array.from({ length: 40 }, (_, i) => {
      const pi = w.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
      return refundOp(`refund:lost_${i}`, pi.payment_intent, 100 + i);
    });
    expectExit(await world.record(ops), 0);
    // Submitted in process (a CLI process per submit is slow on a shared machine): each ends `pending`.
    const env = { STRIPE_API_KEY: w.stripe.apiKey, STRIPE_WEBHOOK_SECRET: w.stripe.webhookSecret };
    const provider = await createProvider('stripe', await loadConfig({ flag: w.configPath, env, cwd: w.dir }));
    const db = await openStore(w.storeUrl);
    try {
      const ctx = { db, actor: 'test-arrange', now: () => new Date() };
      for (const op of ops) expect((await submitOperation(ctx, provider, op.id)).operation.state).toBe('pending');
    } finally {
      await db.close();
    }

    const metrics = path.join(world.dir, 'recon.prom');
    const child = world.spawn(['run', '--json', '--concurrency', '1', '--metrics-file', metrics]);
    const done = collect(child, { timeoutMs: 90_000 });
    await sleep(1500);
    await server!.stop();
    server = undefined;
    const r = await done;

    expect(r.stderr).not.toMatch(/^\s+at /m);
    expect(r.code, `stdout: ${r.stdout}\nstderr: ${r.stderr}`).toBe(6);
    expect(r.json).toEqual({ error: expect.objectContaining({ exit_code: 6, type: 'StoreLockedError' }) });
    expect(r.json.error.message).toMatch(/store unreachable|lost/);
    const text = fs.readFileSync(metrics, 'utf8');
    expect(text).toMatch(/^recon_run_store_up 0$/m);
    expect(text).toMatch(/^recon_run_last_timestamp_seconds \d+$/m);
  });
});
