/**
 * What the provider answers, read as the answer it is (issues 23 and 26): the retry guard counts a
 * key's age on the provider's clock too; a refused key is a configuration error (exit 2), not an
 * outage; a payment intent that does not exist is "nothing can exist" (not found, with the reason);
 * `run --dry-run` backs off after an unavailable lookup as `run` does. The CLI in process against
 * the Stripe sandbox; the sandbox's ledger is what counts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { describeWorld } from '../support/describe-world.js';
import { expectExit, PAST_WINDOW_MS, recordOk, refundOp, run, show, submit } from './incidents-support.js';

const HOUR = 3600_000;

describeWorld('the provider read as it answers', (suite) => {
  it("the provider's clock 25 h ahead: no retry on a key it has forgotten, key_retention naming both clocks; one refund", async () => {
    let offsetMs = 0;
    const world = await suite.world({ stripe: { now: () => Date.now() + offsetMs } });
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:clock_1', pi.payment_intent, 700)]);
    // The first attempt commits, its answer is lost, and the refund stays invisible to lists for 30 h.
    world.stripe.faults.inject({ kind: 'hide', ms: 30 * HOUR, drop: true }, { idempotencyKey: 'refund:clock_1' });
    expect((await submit(world, 'refund:clock_1')).state).toBe('outcome_unknown');
    world.stripe.faults.clear();
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);

    // The provider's clock runs 25 h ahead of recon's: it has forgotten the key (24 h).
    offsetMs = 25 * HOUR;
    world.advance(PAST_WINDOW_MS);
    expect((await run(world)).summary.decisions[0]).toMatchObject({ decision: 'wait' });
    world.advance(PAST_WINDOW_MS);
    const { code, summary } = await run(world);
    expect(code).toBe(8);
    expect(summary.decisions[0]).toMatchObject({
      decision: 'review',
      rule: 'not_found.key_retention',
      review_reason: 'key_retention',
    });
    const explanation = (summary.decisions[0] as { explanation?: string }).explanation ?? '';
    expect(explanation).toContain(new Date(world.now().getTime()).toISOString().slice(0, 13));
    expect(explanation).toContain(new Date(Date.now() + offsetMs).toISOString().slice(0, 13));
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
    expect((await show(world, 'refund:clock_1')).operation.state).toBe('needs_review');
  });

  it('a refused key is exit 2 in run, lookup and doctor, naming the key to check, not exit 5', async () => {
    const world = await suite.world();
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:key_1', pi.payment_intent, 700)]);
    world.stripe.faults.inject({ kind: 'drop_before_commit' }, { times: 2 });
    expect((await submit(world, 'refund:key_1')).state).toBe('outcome_unknown');
    const wrong = { env: { STRIPE_API_KEY: 'sk_test_not_the_key' } };
    const message = 'the provider refused the key for stripe (401): check STRIPE_API_KEY';

    const ran = expectExit(await world.recon(['run', '--json'], wrong), 2);
    expect(ran.json.error.message).toContain(message);
    const looked = expectExit(await world.recon(['lookup', 'refund:key_1', '--json'], wrong), 2);
    expect(looked.json.error.message).toContain(message);
    // doctor opens the store itself: as a process of its own, once the world's handle is given back.
    const doctor = expectExit(await world.reconProcess(['doctor', '--json'], wrong), 2);
    expect(JSON.stringify(doctor.json)).toContain('the provider refused the key for stripe (401)');
    // Nothing was observed as "unavailable", and nothing sent.
    expect((await show(world, 'refund:key_1')).observations).toEqual([]);
    expect(world.stripe.refunds()).toHaveLength(0);
  });

  it('a payment intent that does not exist is an answer: not found, with the reason recorded, exit 0', async () => {
    const world = await suite.world();
    await recordOk(world, [refundOp('refund:nopi_1', 'pi_does_not_exist_1', 700)]);
    world.stripe.faults.inject({ kind: 'drop_before_commit' }, { times: 2 });
    expect((await submit(world, 'refund:nopi_1')).state).toBe('outcome_unknown');

    const looked = expectExit(await world.recon(['lookup', 'refund:nopi_1', '--json']), 0);
    expect(JSON.stringify(looked.json)).toContain('pi_does_not_exist_1 does not exist in this account');
    const detail = await show(world, 'refund:nopi_1');
    expect(detail.observations.map((o) => o.result)).toEqual(['not_found']);
    expect(JSON.stringify(detail.observations)).toMatch(/404 resource_missing/);
    const { code, summary } = await run(world);
    expect(code).toBe(0);
    expect(summary.decisions[0]).toMatchObject({ decision: 'wait', rule: 'not_found.window' });
    expect((summary.decisions[0] as { explanation?: string }).explanation).toContain('does not exist');
  });

  it('run --dry-run backs off after an unavailable lookup as run does, and both say what waits until when', async () => {
    const world = await suite.world();
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:down_1', pi.payment_intent, 700)]);
    world.stripe.faults.inject({ kind: 'drop_before_commit' }, { times: 2 });
    expect((await submit(world, 'refund:down_1')).state).toBe('outcome_unknown');
    // The provider is down: the same config with an apiBase nothing listens on.
    const config = JSON.parse(fs.readFileSync(world.configPath, 'utf8')) as {
      providers: { stripe: { apiBase: string } };
    };
    config.providers.stripe.apiBase = 'http://127.0.0.1:9';
    const down = path.join(world.dir, 'down.config.json');
    fs.writeFileSync(down, JSON.stringify(config), { mode: 0o600 });

    const first = await world.recon(['--config', down, 'run', '--json']);
    expect(first.code).toBe(5);
    expect(first.json).toMatchObject({ claimed: 1, unavailable: 1 });
    // The back-off after one failed lookup is a random part of a second (full jitter): as after a longer
    // outage, it is made an hour here, so that no test timing decides what follows.
    const db = await world.db();
    const { rows } = await db.query<{ next_check_at: Date | null }>(
      `SELECT next_check_at FROM recon.operations WHERE id = 'refund:down_1'`,
    );
    expect(rows[0].next_check_at).not.toBeNull();
    await db.query(`UPDATE recon.operations SET next_check_at = $1::timestamptz WHERE id = 'refund:down_1'`, [
      new Date(world.now().getTime() + HOUR).toISOString(),
    ]);

    const dry = expectExit(await world.recon(['--config', down, 'run', '--dry-run', '--json']), 0);
    const real = expectExit(await world.recon(['--config', down, 'run', '--json']), 0);
    for (const r of [dry, real]) {
      expect(r.json).toMatchObject({ claimed: 0, unavailable: 0 });
      expect(r.json.backing_off).toEqual([{ id: 'refund:down_1', until: expect.any(String) }]);
    }
    expect(dry.json.backing_off).toEqual(real.json.backing_off);
    expect(Date.parse(dry.json.backing_off[0].until)).toBeGreaterThan(world.now().getTime());
    const human = expectExit(await world.recon(['--config', down, 'run', '--dry-run']), 0);
    expect(human.stderr).toMatch(/backing off after the provider was unavailable, until refund:down_1/);
  });

  it('more than 100 operations backing off: the dry run claims none of them either, and both count them all', async () => {
    const world = await suite.world();
    const n = 105;
    const ids = Array.from({ length: n }, (_, i) => `refund:many_${String(i).padStart(3, '0')}`);
    const pis = ids.map(() => world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' }).payment_intent);
    await recordOk(
      world,
      ids.map((id, i) => refundOp(id, pis[i], 700)),
    );
    // Every first attempt is answered 500, nothing committed: outcome unknown.
    world.stripe.faults.inject({ kind: 'status', status: 500 }, { times: 2 * n });
    for (let i = 0; i < n; i += 35) {
      const states = await Promise.all(ids.slice(i, i + 35).map(async (id) => (await submit(world, id)).state));
      expect(states.every((state) => state === 'outcome_unknown')).toBe(true);
    }
    world.stripe.faults.clear();
    // As after a long outage: their lookups found the provider unavailable, and they back off for an hour.
    const db = await world.db();
    await db.query(`UPDATE recon.operations SET next_check_at = $1::timestamptz WHERE id = ANY($2::text[])`, [
      new Date(world.now().getTime() + HOUR).toISOString(),
      ids,
    ]);

    const dry = expectExit(await world.recon(['run', '--dry-run', '--json']), 0);
    const real = expectExit(await world.recon(['run', '--json']), 0);
    for (const r of [dry, real]) {
      expect(r.json).toMatchObject({ claimed: 0, backing_off_total: n });
      expect(r.json.backing_off).toHaveLength(100);
    }
    const human = expectExit(await world.recon(['run', '--dry-run']), 0);
    expect(human.stderr).toContain(`${n} operation(s) not looked up`);
    expect(human.stderr).toContain(`and ${n - 5} more (recon ops list --unresolved)`);
    // Nothing was sent: the provider holds no refund for any of them.
    for (const pi of pis) expect(world.stripe.refunds({ payment_intent: pi })).toHaveLength(0);
  });
});
