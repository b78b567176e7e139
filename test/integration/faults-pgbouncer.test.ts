/**
 * Issue 10, Faults: `recon run` behind PgBouncer in transaction pooling mode, the way large
 * PostgreSQL deployments run. Four worker processes share four server sessions; consecutive
 * transactions of one worker land on different sessions. Nothing may depend on a session (advisory
 * locks, named prepared statements, `SET`), and migrations — which want one — refuse the pooler
 * with a message asking for a direct connection. Asserts on the Stripe sandbox ledger.
 *
 * Needs the Debian package `pgbouncer` (not on npm): without it these tests are skipped and the
 * run's summary says so; with RECON_TEST_REQUIRE_PGBOUNCER=1 (`.ci/run`) they fail, naming it.
 */
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { submitOperation } from '../../src/core/attempt/submit.js';
import { createProvider } from '../../src/providers/index.js';
import { openStore } from '../../src/store/open.js';
import type { Backend } from '../support/backends.js';
import { recon, type CliResult } from '../support/cli.js';
import { skipWithout } from '../support/optional.js';
import { startPgBouncer, type PgBouncer } from '../support/pgbouncer.js';
import { createDatabase } from '../support/postgres.js';
import { startWorld, type World } from '../support/world.js';
import { expectExit, refundOp, sleep, type RunJson } from './incidents-support.js';

const WORKERS = 4;
const N = 200;

let bouncers: PgBouncer[] = [];
let world: World | undefined;

function serverUrl(): string {
  const base = inject('pgUrl') || process.env.RECON_TEST_PG_URL;
  if (!base) throw new Error('these tests need the run’s PostgreSQL server (test/support/global-setup.ts)');
  return base;
}

async function bouncerFor(directUrl: string): Promise<PgBouncer> {
  const b = await startPgBouncer(directUrl, { poolSize: WORKERS });
  bouncers.push(b);
  return b;
}

afterAll(async () => {
  await world?.close();
  for (const b of bouncers) await b.stop();
  bouncers = [];
});

describe.skipIf(skipWithout('pgbouncer'))('behind PgBouncer (pool_mode = transaction)', () => {
  beforeAll(() => {
    // Fail early and by name: the package is what is missing, not the test.
    serverUrl();
  });

  it('migrations through the pooler are refused with a message asking for a direct connection; nothing is applied', async () => {
    const direct = await createDatabase(serverUrl());
    const bouncer = await bouncerFor(direct);
    const r = await recon(['db', 'migrate', '--db', bouncer.url, '--json']);
    expectExit(r, 2);
    expect(r.json.error.message).toMatch(/PgBouncer|pooler/);
    expect(r.json.error.message).toMatch(/direct connection/);
    const db = await openStore(direct, { autoMigrate: false, requireCurrent: false });
    try {
      const t = await db.query<{ present: boolean }>(
        `SELECT to_regclass('recon.schema_migrations') IS NOT NULL AS present`,
      );
      expect(t.rows[0].present).toBe(false);
    } finally {
      await db.close();
    }
    // Directly, the same command works; afterwards the pooler serves everything else.
    expectExit(await recon(['db', 'migrate', '--db', direct]), 0);
    expectExit(await recon(['ops', 'list', '--db', bouncer.url, '--json']), 0);
  });

  it(`${WORKERS} \`recon run\` workers through PgBouncer over ${N} unknown outcomes: ${N} refunds on the ledger, 0 duplicates, no session state left behind`, async () => {
    // A copy of the run's migrated template database (the migrations through the pooler are the
    // test above): no child process to migrate it.
    const template = inject('pgTemplate');
    const direct = await createDatabase(serverUrl(), undefined, template || undefined);
    if (!template) expectExit(await recon(['db', 'migrate', '--db', direct]), 0);
    const bouncer = await bouncerFor(direct);
    const viaBouncer: Backend = {
      name: 'postgres',
      url: async () => bouncer.url,
      migratedUrl: async () => bouncer.url,
      emptyUrl: async () => bouncer.url,
      open: () => openStore(bouncer.url),
    };
    // The first pass must find the unknowns that never arrived still inside the uncertainty window
    // (wait, not retry) however long the set-up and the four process starts take: a 1 h window
    // for it, then 0 s for the second pass. No pass depends on how fast this machine is.
    world = await startWorld({ backend: viaBouncer, stripeConfig: { uncertaintyWindow: '1h' } });
    const w = world;
    const ops = Array.from({ length: N }, (_, i) => {
      const pi = w.stripe.seedPaymentIntent({ amount: 10_000, currency: 'usd' });
      return refundOp(`refund:pgb_${String(i).padStart(3, '0')}`, pi.payment_intent, 100 + i);
    });
    expectExit(await world.record(ops), 0);

    // Every first attempt ends unknown: half committed then dropped, half never arrived.
    for (const [i, op] of ops.entries()) {
      world.stripe.faults.inject(
        { kind: i % 2 === 0 ? 'commit_then_drop' : 'drop_before_commit' },
        { idempotencyKey: op.id },
      );
    }
    const env = { STRIPE_API_KEY: w.stripe.apiKey, STRIPE_WEBHOOK_SECRET: w.stripe.webhookSecret };
    const configured = await createProvider('stripe', await loadConfig({ flag: w.configPath, env, cwd: w.dir }));
    const provider = { ...configured, capabilities: { ...configured.capabilities, leaseMs: 120_000 } };
    const db = await openStore(bouncer.url);
    try {
      const ctx = { db, actor: 'test-arrange', now: () => new Date() };
      const states = await Promise.all(
        ops.map(async (op) => (await submitOperation(ctx, provider, op.id)).operation.state),
      );
      expect(new Set(states)).toEqual(new Set(['outcome_unknown']));
    } finally {
      await db.close();
    }
    world.stripe.faults.clear();
    expect(world.stripe.refunds()).toHaveLength(N / 2);

    // Each worker takes at most a quarter (--limit), so all four share the pass; and they start at
    // once: a share lock on recon.operations (held on a direct connection) keeps each at its first
    // claim until all four wait on it (as incident 7 does), so none starts after another has finished.
    const pass = async (): Promise<RunJson[]> => {
      const gate = await openStore(direct);
      let workers!: Promise<CliResult[]>;
      try {
        await gate.transaction(async (tx) => {
          await tx.query('LOCK TABLE recon.operations IN SHARE MODE');
          // Processes: workers of several hosts (in-process commands run one at a time).
          workers = Promise.all(
            Array.from({ length: WORKERS }, () =>
              w.reconProcess(['run', '--json', '--limit', String(N / WORKERS)], { timeoutMs: 120_000 }),
            ),
          );
          // Asked on another connection: pg_stat_activity is a snapshot for the rest of a transaction.
          for (let i = 0; i < 2400; i++) {
            const r = await gate.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%recon.operations%'`,
            );
            if (Number(r.rows[0].n) >= WORKERS) return;
            await sleep(25);
          }
          throw new Error('the workers never reached their first claim');
        });
      } finally {
        await gate.close();
      }
      return (await workers).map((r) => expectExit(r, 0).json as RunJson);
    };
    const first = await pass();
    const firstIds = first.flatMap((s) => s.decisions.map((d) => d.id));
    expect(first.flatMap((s) => s.errors)).toEqual([]);
    expect(new Set(firstIds).size).toBe(firstIds.length);
    expect(firstIds).toHaveLength(N);
    for (const worker of first) expect(worker.decisions.length).toBeGreaterThan(0);
    const kinds = (runs: RunJson[]) => {
      const n: Record<string, number> = {};
      for (const d of runs.flatMap((x) => x.decisions)) n[d.decision] = (n[d.decision] ?? 0) + 1;
      return n;
    };
    expect(kinds(first)).toEqual({ confirm: N / 2, wait: N / 2 });
    expect(world.stripe.refunds()).toHaveLength(N / 2);

    // The second pass retries what never arrived: a window of 0 s is past as soon as it starts, with
    // no sleep (a 1 s window and a sleep made the pass depend on the clock and the scheduler).
    const config = JSON.parse(fs.readFileSync(w.configPath, 'utf8'));
    config.providers.stripe.uncertaintyWindow = '0s';
    fs.writeFileSync(w.configPath, JSON.stringify(config, null, 2));
    const second = await pass();
    expect(second.flatMap((s) => s.errors)).toEqual([]);
    const retriedIds = second.flatMap((s) => s.decisions.filter((d) => d.decision === 'retry').map((d) => d.id));
    expect(new Set(retriedIds).size).toBe(retriedIds.length);
    expect(retriedIds).toHaveLength(N / 2);

    const listed = expectExit(await w.recon(['ops', 'list', '--limit', String(N + 10), '--json']), 0).json
      .operations as { state: string }[];
    expect(listed).toHaveLength(N);
    expect(new Set(listed.map((o) => o.state))).toEqual(new Set(['confirmed']));

    const ledger = world.stripe.refunds();
    const perOperation = new Map<string, number>();
    for (const r of ledger) {
      const id = String(r.metadata?.recon_operation_id);
      perOperation.set(id, (perOperation.get(id) ?? 0) + 1);
    }
    const duplicates = [...perOperation.values()].filter((n) => n > 1).length;
    console.log(
      `pgbouncer run: workers=${WORKERS} operations=${N} refunds=${ledger.length} duplicates=${duplicates} ` +
        `(pass 1: ${firstIds.length} decisions, per worker ${first.map((x) => x.decisions.length).join('/')}; ` +
        `pass 2: ${retriedIds.length} retries, per worker ${second.map((x) => x.decisions.length).join('/')})`,
    );
    expect(ledger).toHaveLength(N);
    expect(perOperation.size).toBe(N);
    expect(duplicates).toBe(0);

    // Every server session the pooler holds (pool size = WORKERS), each pinned by an open transaction
    // so each client gets a different one: no advisory lock, prepared statement or setting left over.
    const pg = (await import('pg')).default;
    const clients = Array.from({ length: WORKERS }, () => new pg.Client({ connectionString: bouncer.url }));
    try {
      for (const c of clients) {
        await c.connect();
        await c.query('BEGIN');
      }
      const pids = new Set<number>();
      for (const c of clients) {
        const r = await c.query(
          `SELECT pg_backend_pid() AS pid,
                  (SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()) AS advisory,
                  (SELECT count(*)::int FROM pg_prepared_statements) AS prepared,
                  current_setting('lock_timeout') AS lock_timeout,
                  current_setting('statement_timeout') AS statement_timeout,
                  current_setting('search_path') AS search_path`,
        );
        pids.add(r.rows[0].pid);
        expect(r.rows[0]).toMatchObject({
          advisory: 0,
          prepared: 0,
          lock_timeout: '0',
          statement_timeout: '0',
          search_path: '"$user", public',
        });
      }
      expect(pids.size).toBe(WORKERS);
    } finally {
      for (const c of clients) await c.end().catch(() => undefined);
    }
  });
});
