/**
 * Issue 10, Faults: PostgreSQL goes away in the middle of `recon run` (`pg_ctl stop -m immediate`).
 * The pass must end with exit 6, the `--json` error document and the metrics file, never an
 * unhandled 'error' event (exit 1, raw stack). A dedicated server: the run's shared one stays up.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { submitOperation } from '../../src/core/attempt/submit.js';
import { createProvider } from '../../src/providers/index.js';
import { MIN_OPS } from '../../src/providers/stripe/scan.js';
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
    // Slow lookups and one in flight at a time, so the pass is still running when the server dies:
    // 15 operations are 2.25 s of lookups, where the gate below is in place within a lookup or two of
    // the first decision. Fewer than MIN_OPS, so each operation is looked up on its own (a batch of
    // MIN_OPS or more is answered from one listing of the ledger: providers/stripe/scan.ts).
    world = await startWorld({ backend: dedicated, stripe: { refundStatus: 'pending', latencyMs: 150 } });
    const w = world;
    const ops = Array.from({ length: MIN_OPS - 1 }, (_, i) => {
      const pi = w.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
      return refundOp(`refund:lost_${i}`, pi.payment_intent, 100 + i);
    });
    expectExit(await world.record(ops), 0);
    // Submitted in process (a CLI process per submit is slow on a shared machine): each ends `pending`.
    // Eight at a time: one after the other, the sandbox's 150 ms per request alone took 6 s.
    const env = { STRIPE_API_KEY: w.stripe.apiKey, STRIPE_WEBHOOK_SECRET: w.stripe.webhookSecret };
    const provider = await createProvider('stripe', await loadConfig({ flag: w.configPath, env, cwd: w.dir }));
    const db = await openStore(w.storeUrl);
    try {
      const ctx = { db, actor: 'test-arrange', now: () => new Date() };
      const queue = [...ops];
      const states: string[] = [];
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let op = queue.shift(); op; op = queue.shift()) {
            states.push((await submitOperation(ctx, provider, op.id)).operation.state);
          }
        }),
      );
      expect(states).toEqual(ops.map(() => 'pending'));
    } finally {
      await db.close();
    }

    const metrics = path.join(world.dir, 'recon.prom');
    const child = world.spawn(['run', '--json', '--concurrency', '1', '--metrics-file', metrics]);
    const done = collect(child, { timeoutMs: 90_000 });
    // Mid-run for sure: the pass has written its first decisions and has most still to do.
    const watcher = await openStore(w.storeUrl);
    let checked = 0;
    try {
      for (let i = 0; i < 800 && checked === 0; i++) {
        await sleep(25);
        const r = await watcher.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM recon.operations WHERE last_checked_at IS NOT NULL',
        );
        checked = Number(r.rows[0].n);
      }
    } finally {
      await watcher.close();
    }
    expect(checked).toBeGreaterThan(0);
    expect(checked).toBeLessThan(ops.length);
    // And inside a transaction: the run's next write waits on row locks held here, so the server
    // dies under a client that the run has checked out of its pool (the crash of issue 10), not
    // only under idle ones, which the pool itself looks after.
    const gate = await openStore(w.storeUrl);
    let blocked = false;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const gateTx = gate
      .transaction(async (tx) => {
        await tx.query('SELECT id FROM recon.operations FOR UPDATE');
        // Asked on another connection: pg_stat_activity is a snapshot for the rest of a transaction.
        for (let i = 0; i < 800 && !blocked; i++) {
          const r = await gate.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`,
          );
          blocked = Number(r.rows[0].n) > 0;
          if (!blocked) await sleep(25);
        }
        await held;
      })
      .catch(() => undefined);
    for (let i = 0; i < 800 && !blocked; i++) await sleep(25);
    expect(blocked).toBe(true);
    const lookups = () => w.stripe.stats.byRoute['GET /v1/refunds'] ?? 0;
    await server!.stop();
    const lookupsAtStop = lookups();
    release();
    await gateTx;
    await gate.close().catch(() => undefined);
    server = undefined;
    const r = await done;

    expect(r.stderr).not.toMatch(/^\s+at /m);
    expect(r.code, `stdout: ${r.stdout}\nstderr: ${r.stderr}`).toBe(6);
    expect(r.json).toEqual({ error: expect.objectContaining({ exit_code: 6, type: 'StoreLockedError' }) });
    expect(r.json.error.message).toMatch(/store unreachable|lost/);
    // Once a write has failed for the lost store, the pass asks the provider nothing more (each
    // lookup is one of the account's reads): at most the one in flight (--concurrency 1) finishes.
    expect(lookupsAtStop).toBeLessThan(ops.length - 2);
    expect(lookups() - lookupsAtStop).toBeLessThanOrEqual(1);
    const text = fs.readFileSync(metrics, 'utf8');
    expect(text).toMatch(/^recon_run_store_up 0$/m);
    expect(text).toMatch(/^recon_run_last_timestamp_seconds \d+$/m);
  });
});
