/**
 * SPEC §8 incidents 3, 6 and 7, end to end: delayed indexing at the warehouse, the same webhook
 * delivered twice (through `webhook ingest` and `webhook serve`), and two `recon run` workers
 * against one PostgreSQL. Each asserts on the provider's ledger and the CLI's `--json`.
 */
import fs from 'node:fs';
import { expect, it } from 'vitest';
import { openStore } from '../../src/store/open.js';
import { collect, type CliResult } from '../support/cli.js';
import { describeWorld } from '../support/describe-world.js';
import type { World } from '../support/world.js';
import {
  expectExit,
  PAST_WINDOW_MS,
  recordOk,
  refundOp,
  run,
  shipmentOp,
  show,
  sleep,
  submit,
  type RunJson,
  arrangeUnknownOutcomes,
} from './incidents-support.js';

/** Reads one row through the world's store, after every CLI process has exited (PGlite is single-process). */
async function duplicateCount(world: World, eventId: string): Promise<number | undefined> {
  const db = await world.db();
  const r = await db.query<{ duplicate_count: number }>(
    'SELECT duplicate_count FROM recon.webhook_events WHERE provider = $1 AND event_id = $2',
    ['stripe', eventId],
  );
  return r.rows[0] ? Number(r.rows[0].duplicate_count) : undefined;
}

describeWorld('incidents during reconciliation', (suite) => {
  it('3. delayed indexing: run waits through the window, then retries with the original key and the warehouse replays: one shipment', async () => {
    const world = await suite.world({ warehouse: true });
    const warehouse = world.warehouse!;
    await recordOk(world, [shipmentOp('ship:ord_3', 'ord_3')]);
    // Committed, answer lost, and invisible to lookups for much longer than the test runs.
    warehouse.faults.inject({ kind: 'hide', ms: 60_000, drop: true });

    expect((await submit(world, 'ship:ord_3')).state).toBe('outcome_unknown');
    expect(warehouse.shipments()).toHaveLength(1);

    const early = await run(world);
    expect(early.code).toBe(0);
    expect(early.summary.decisions).toEqual([
      expect.objectContaining({ id: 'ship:ord_3', decision: 'wait', rule: 'not_found.window' }),
    ]);
    expect(warehouse.shipments()).toHaveLength(1);

    world.advance(PAST_WINDOW_MS);
    const late = await run(world);
    expect(late.code).toBe(0);
    expect(late.summary.decisions).toEqual([
      expect.objectContaining({ id: 'ship:ord_3', decision: 'retry', rule: 'not_found.retry', state: 'confirmed' }),
    ]);

    const ledger = warehouse.shipments();
    expect(ledger).toHaveLength(1);
    const detail = await show(world, 'ship:ord_3');
    expect(detail.operation.state).toBe('confirmed');
    expect(detail.attempts.map((a) => a.idempotency_key)).toEqual(['ship:ord_3', 'ship:ord_3']);
    expect(detail.provider_transactions).toEqual([
      expect.objectContaining({ provider_id: ledger[0].id, linked_via: 'replay' }),
    ]);
    expect(detail.observations.map((o) => o.result)).toEqual(['not_found', 'not_found']);
  });

  it('6. the same webhook delivered twice through `webhook ingest`: one transition, one duplicate recorded; a bad signature records nothing', async () => {
    const world = await suite.world({ stripe: { refundStatus: 'pending' } });
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:ord_6', pi.payment_intent, 700)]);
    expect((await submit(world, 'refund:ord_6')).state).toBe('pending');
    const [refund] = world.stripe.refunds({ payment_intent: pi.payment_intent });
    const event = world.stripe.eventFor('refund.updated', world.stripe.setRefundStatus(refund.id, 'succeeded'));
    const body = JSON.stringify(event);
    const ingest = (payload: string, signature: string) =>
      world.recon(['webhook', 'ingest', '-', '--provider', 'stripe', '--signature', signature, '--json'], {
        input: payload,
      });

    // A forged delivery first: refused (exit 2) and not recorded, so the genuine one is not a duplicate.
    const forged = await ingest(body, world.stripe.signPayload(body).replace(/v1=[0-9a-f]{4}/, 'v1=0000'));
    expectExit(forged, 2);
    expect(forged.stderr).toMatch(/signature/);
    expect((await show(world, 'refund:ord_6')).operation.state).toBe('pending');

    const first = expectExit(await ingest(body, world.stripe.signPayload(body)), 0).json;
    expect(first).toMatchObject({
      event_id: event.id,
      duplicate: false,
      operation_id: 'refund:ord_6',
      effect: 'transitioned',
      state: 'confirmed',
    });
    const second = expectExit(await ingest(body, world.stripe.signPayload(body)), 0).json;
    expect(second).toMatchObject({ event_id: event.id, duplicate: true, effect: 'duplicate' });

    const detail = await show(world, 'refund:ord_6');
    expect(detail.operation.state).toBe('confirmed');
    expect(detail.events.filter((e) => e.kind === 'webhook.applied')).toHaveLength(1);
    expect(await duplicateCount(world, event.id)).toBe(1);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
  });

  it('6. the same webhook delivered twice to `webhook serve`: 200 twice, one transition, one duplicate; a bad signature gets 400', async () => {
    const world = await suite.world({ stripe: { refundStatus: 'pending' } });
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:ord_6s', pi.payment_intent, 800)]);
    expect((await submit(world, 'refund:ord_6s')).state).toBe('pending');
    const [refund] = world.stripe.refunds({ payment_intent: pi.payment_intent });
    const event = world.stripe.eventFor('refund.updated', world.stripe.setRefundStatus(refund.id, 'succeeded'));

    // A real process: it serves until SIGTERM. Port 0: the server takes a free port and prints it.
    await world.release();
    const server = world.spawn(['webhook', 'serve', '--port', '0', '--provider', 'stripe']);
    const exited = collect(server);
    let stderr = '';
    server.stderr!.on('data', (d) => (stderr += d));
    for (let i = 0; i < 400 && !stderr.includes('listening on'); i++) await sleep(25);
    const port = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr)?.[1];
    expect(port, stderr).toBeDefined();
    const url = `http://127.0.0.1:${port}/webhooks/stripe`;

    const body = JSON.stringify(event);
    const forged = await fetch(url, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', 'stripe-signature': 't=1,v1=00' },
    });
    expect(forged.status).toBe(400);
    expect(await world.stripe.deliverWebhook(url, event, 2)).toEqual([200, 200]);
    server.kill('SIGTERM');
    expect((await exited).code).toBe(0);

    const detail = await show(world, 'refund:ord_6s');
    expect(detail.operation.state).toBe('confirmed');
    expect(detail.events.filter((e) => e.kind === 'webhook.applied')).toHaveLength(1);
    expect(await duplicateCount(world, event.id)).toBe(1);
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
  });
});

describeWorld(
  'incident 7',
  (suite) => {
    it('7. two `recon run` workers at once: every operation handled once, one refund each', async () => {
      // More than a claim batch (200): the second worker's first claim finds what the first left.
      const N = 240;
      // The client's rate limit (200/s in the world's config) is not what this test is about: at 200/s
      // the 240 submits, their reconnects and the two passes' lookups waited seconds on it.
      // The first pass must find what never arrived still inside the uncertainty window (wait, not
      // retry) however long the arrangement and the process starts take: a 1 h window for it, then
      // 0 s for the second pass, no sleep: neither pass depends on the clock or the scheduler.
      const world = await suite.world({ stripeConfig: { rateLimit: 2000, uncertaintyWindow: '1h' } });
      const w = world;
      const ops = Array.from({ length: N }, (_, i) => {
        const pi = w.stripe.seedPaymentIntent({ amount: 10_000, currency: 'usd' });
        return refundOp(`refund:ord_7_${String(i).padStart(3, '0')}`, pi.payment_intent, 100 + i);
      });
      await recordOk(world, ops);

      const committed = await arrangeUnknownOutcomes(world, ops);

      // "At once", made exact: a share lock on recon.operations holds both workers at their first
      // claim (after each pass has begun, before either has handled anything) until both wait on it.
      // Otherwise a worker that starts a second later would rightly re-check what the first one
      // already left waiting.
      const pass = async (): Promise<RunJson[]> => {
        const gate = await openStore(world.storeUrl);
        let workers!: Promise<CliResult[]>;
        try {
          await gate.transaction(async (tx) => {
            await tx.query('LOCK TABLE recon.operations IN SHARE MODE');
            // Two processes, as two cron hosts would be (in-process commands run one at a time).
            workers = Promise.all([world.reconProcess(['run', '--json']), world.reconProcess(['run', '--json'])]);
            for (let i = 0; i < 2400; i++) {
              const r = await gate.query<{ n: number }>(
                `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%recon.operations%'`,
              );
              if (Number(r.rows[0].n) >= 2) return;
              await sleep(25);
            }
            throw new Error('the two workers never reached their first claim');
          });
        } finally {
          await gate.close();
        }
        const results = await workers;
        for (const r of results) expectExit(r, 0);
        return results.map((r) => r.json as RunJson);
      };

      const [a, b] = await pass();
      const idsA = a.decisions.map((d) => d.id);
      const idsB = b.decisions.map((d) => d.id);
      expect(a.errors.concat(b.errors)).toEqual([]);
      expect(idsA.filter((id) => idsB.includes(id))).toEqual([]);
      expect(new Set([...idsA, ...idsB]).size).toBe(N);
      expect(idsA.length + idsB.length).toBe(N);
      // Both workers took part (claims are shared, not serialised behind one worker).
      expect(idsA.length).toBeGreaterThan(0);
      expect(idsB.length).toBeGreaterThan(0);
      for (const d of [...a.decisions, ...b.decisions]) {
        if (committed.has(d.id)) expect(d).toMatchObject({ decision: 'confirm', state: 'confirmed' });
        else expect(d).toMatchObject({ decision: 'wait', state: 'outcome_unknown' });
      }
      expect(world.stripe.refunds()).toHaveLength(N / 2);

      const config = JSON.parse(fs.readFileSync(world.configPath, 'utf8'));
      config.providers.stripe.uncertaintyWindow = '0s';
      fs.writeFileSync(world.configPath, JSON.stringify(config, null, 2));
      const [c, e] = await pass();
      const retried = [...c.decisions, ...e.decisions];
      expect(retried.map((x) => x.id).sort()).toEqual(ops.filter((o) => !committed.has(o.id)).map((o) => o.id));
      for (const x of retried) expect(x).toMatchObject({ decision: 'retry', state: 'confirmed' });

      const listed: { state: string }[] = expectExit(
        await world.recon(['ops', 'list', '--limit', String(N + 10), '--json']),
        0,
      ).json.operations;
      expect(listed).toHaveLength(N);
      expect(new Set(listed.map((o) => o.state))).toEqual(new Set(['confirmed']));
      const ledger = world.stripe.refunds();
      expect(ledger).toHaveLength(N);
      const perOperation = new Map<string, number>();
      for (const r of ledger) {
        const id = String(r.metadata?.recon_operation_id);
        perOperation.set(id, (perOperation.get(id) ?? 0) + 1);
      }
      expect(perOperation.size).toBe(N);
      expect([...perOperation.values()].every((n) => n === 1)).toBe(true);
    });
  },
  { only: 'postgres' },
);
