/**
 * Issue 11, "the engineer finds the answer inside recon": a refund made by hand in the dashboard
 * (no recon metadata) next to a refund whose request never arrived. lookup works in every state
 * and shows the look-alike with its full id; ops show and review list carry the evidence and the
 * exact next command; escalate reassigns a waiting review; a wait says when a retry is allowed.
 *
 * On each store backend (describeWorld), the tests are one incident, step by step, in one world
 * (the Stripe sandbox, a config, a store) that they share; the commands run in process on its store.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeWorld } from '../support/describe-world.js';
import { startWorld, type World } from '../support/world.js';
import { refund } from './oncall-support.js';

describeWorld('on call, inside recon', (suite) => {
  let world: World | undefined;
  let pi: string;
  let dashboardRefund: string;
  const run = (args: string[], input?: string) => world!.recon(args, { input });

  beforeAll(async () => {
    world = await startWorld({ backend: suite.backend, stripeConfig: { uncertaintyWindow: '20s' } });
    pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' }).payment_intent;
    // Someone refunded 19.99 by hand in the dashboard: same charge, same amount, no recon metadata.
    dashboardRefund = world.stripe.seedRefund({ payment_intent: pi, amount: 1999, currency: 'usd' }).id;
  });
  afterAll(async () => {
    await world?.close();
  });

  describe('an ambiguous refund, worked inside recon', () => {
    const id = 'refund:ord_1048';
    it('lookup applies the rule to an outcome_unknown operation and shows the candidate in full', async () => {
      const op = refund(id, { payload: { payment_intent: pi, amount: 1999, currency: 'usd' } });
      expect((await run(['ops', 'record', '-'], JSON.stringify(op))).code).toBe(0);
      world!.stripe.faults.inject({ kind: 'drop_before_commit' }, { times: 3 });
      expect((await run(['ops', 'submit', id])).stdout).toContain('outcome_unknown');
      const r = await run(['lookup', id]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain('outcome_unknown → needs_review');
      expect(r.stdout).toContain(dashboardRefund);
      expect(r.stdout).toContain('19.99 USD');
      expect(r.stdout).toContain('succeeded');
      expect(r.stdout).toMatch(/\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC/);
      expect(r.stdout).toContain(`recon attach ${id} ${dashboardRefund}`);
    });

    it('lookup works on a needs_review operation: evidence recorded, state unchanged', async () => {
      const r = await run(['lookup', id, '--json']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.json).toMatchObject({ state: 'needs_review', state_before: 'needs_review', wrote: 'evidence' });
      expect(r.json.candidates.map((c: { provider_id: string }) => c.provider_id)).toEqual([dashboardRefund]);
    });

    it('lookup --client-ref shows the dashboard refund as an ambiguous candidate', async () => {
      const r = await run(['lookup', '--client-ref', 'ord_1048', '--provider', 'stripe', '--json']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.json.result).toBe('ambiguous');
      expect(r.json.candidates[0]).toMatchObject({ provider_id: dashboardRefund, amount: 1999, status: 'succeeded' });
    });

    it('ops show has an Observations section with full ids and the next command', async () => {
      const r = await run(['ops', 'show', id]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^Observations/m);
      expect(r.stdout).toContain(`${dashboardRefund} (19.99 USD, succeeded)`);
      expect(r.stdout).not.toMatch(/re_\w+…/);
      expect(r.stdout).toContain(`recon attach ${id} ${dashboardRefund}`);
    });

    it('review list shows candidates, last observations, attempts and the exact next command', async () => {
      const r = await run(['review', 'list']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`candidates +${dashboardRefund} +succeeded +19\\.99 USD +created \\d{4}-`));
      expect(r.stdout).toMatch(/observed +\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC +ambiguous/);
      expect(r.stdout).toMatch(/attempts +#1 .* unknown \(connection\)/);
      expect(r.stdout).toMatch(new RegExp(`next +recon attach ${id} ${dashboardRefund}`));
      const json = await run(['review', 'list', '--json']);
      expect(json.json.total).toBe(1);
      expect(json.json.operations[0].evidence.candidates[0].provider_id).toBe(dashboardRefund);
    });

    it('escalate on a needs_review operation reassigns it and adds the reason; the state stays', async () => {
      const r = await run([
        'escalate',
        id,
        '--reason',
        'customer says refunded twice',
        '--assignee',
        'finance-oncall',
        '--json',
      ]);
      expect(r.code, r.stderr).toBe(0);
      // The rule's reason stays; the person's reason and the new assignee go into the trail.
      expect(r.json).toMatchObject({ state: 'needs_review', assignee: 'finance-oncall', review_reason: 'ambiguous' });
      const show = await run(['ops', 'show', id, '--json']);
      const last = show.json.events[show.json.events.length - 1];
      expect(last).toMatchObject({ kind: 'escalated', from_state: 'needs_review', to_state: 'needs_review' });
      expect(last.detail).toMatchObject({ reason: 'customer says refunded twice', assignee: 'finance-oncall' });
      expect((await run(['audit', 'verify'])).code).toBe(0);
    });

    it('resolving with the candidate ends it; lookup on the confirmed operation then changes no state', async () => {
      const resolve = await run([
        'review',
        'resolve',
        id,
        '--outcome',
        'confirmed',
        '--txn',
        dashboardRefund,
        '--note',
        'FIN-22',
      ]);
      expect(resolve.code, resolve.stderr).toBe(0);
      const before = (await run(['ops', 'show', id, '--json'])).json;
      const r = await run(['lookup', id, '--json']);
      expect(r.code, r.stderr).toBe(0);
      // The lookup is recorded as evidence; the state, the links and the trail's states stay.
      expect(r.json).toMatchObject({ state: 'confirmed', state_before: 'confirmed', conclusion: null });
      expect(r.json.provider_txn_ids).toEqual(before.operation.provider_txn_ids);
      const after = (await run(['ops', 'show', id, '--json'])).json;
      const added = after.events.slice(before.events.length);
      expect(added.every((e: { from_state: string; to_state: string }) => e.from_state === e.to_state)).toBe(true);
    });
  });

  describe('waiting', () => {
    it('says when a retry becomes allowed: a window after the first not_found of the streak', async () => {
      const id = 'refund:ord_2001';
      const op = refund(id, { payload: { payment_intent: pi, amount: 777, currency: 'usd' } });
      expect((await run(['ops', 'record', '-'], JSON.stringify(op))).code).toBe(0);
      world!.stripe.faults.inject({ kind: 'drop_before_commit' }, { times: 3 });
      await run(['ops', 'submit', id]);
      const r = await run(['run', '--json']);
      const d = r.json.decisions.find((x: { id: string }) => x.id === id);
      expect(d).toMatchObject({ decision: 'wait', rule: 'not_found.window' });
      const show = await run(['ops', 'show', id, '--json']);
      const firstNotFound = Date.parse(show.json.observations[0].observed_at);
      // The decision and the observation each read the clock: within a few milliseconds.
      expect(Math.abs(Date.parse(d.retry_at) - (firstNotFound + 20_000))).toBeLessThan(100);
      const human = await run(['lookup', id]);
      expect(human.stdout).toMatch(/a retry may be allowed from \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC \(in 1\ds\)/);
    });
  });
});
