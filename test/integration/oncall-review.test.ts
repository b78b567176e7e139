/**
 * Issue 26, the review queue: oldest first, `--limit` keeps the oldest, `--after ID` pages on, the
 * count at the top; every `next` command recon prints works as printed (run here, as printed);
 * `escalate` puts a confirmed operation in front of people (reason `escalated`).
 *
 * On each store backend (describeWorld), in one world (the Stripe sandbox, a config, a store) the
 * tests share, each with operations of its own; the commands run in process on its store.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeWorld } from '../support/describe-world.js';
import { startWorld, type World } from '../support/world.js';
import { PAST_WINDOW_MS } from './incidents-support.js';
import { refund } from './oncall-support.js';

/** The words of a printed command, as a POSIX shell splits them (single and double quotes). */
function words(command: string): string[] {
  const out: string[] = [];
  for (const m of command.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g))
    out.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : (m[2] ?? m[3]));
  return out;
}

describeWorld('on call, the review queue', (suite) => {
  let world: World | undefined;
  let pi: string;
  const run = (args: string[], input?: string) => world!.recon(args, { input });

  beforeAll(async () => {
    world = await startWorld({ backend: suite.backend, stripeConfig: { uncertaintyWindow: '1s' } });
    pi = world.stripe.seedPaymentIntent({ amount: 1_000_000, currency: 'usd' }).payment_intent;
  });
  afterAll(async () => {
    await world?.close();
  });

  describe('the review queue', () => {
    it('is oldest first; --limit keeps the oldest, --after pages on, the count comes first', async () => {
      const ids = [1, 2, 3, 4, 5].map((n) => `refund:queue_${n}`);
      for (const id of ids) {
        expect(
          (
            await run(
              ['ops', 'record', '-'],
              JSON.stringify(refund(id, { payload: { payment_intent: pi, amount: 100, currency: 'usd' } })),
            )
          ).code,
        ).toBe(0);
        expect((await run(['escalate', id, '--reason', 'check it'])).code).toBe(0);
      }
      const first = await run(['review', 'list', '--limit', '2', '--json']);
      expect(first.json.operations.map((o: { id: string }) => o.id)).toEqual(ids.slice(0, 2));
      expect(first.json.total).toBe(5);
      expect(first.json.next_after).toBe(ids[1]);
      const second = await run(['review', 'list', '--limit', '2', '--after', ids[1], '--json']);
      expect(second.json.operations.map((o: { id: string }) => o.id)).toEqual(ids.slice(2, 4));
      const text = await run(['review', 'list', '--limit', '2']);
      expect(text.stderr.split('\n')[0]).toBe(
        `showing 2 of 5, oldest first; --limit N, or the next page with --after ${ids[1]}`,
      );
      expect(text.stdout.indexOf(ids[0])).toBeLessThan(text.stdout.indexOf(ids[1]));
      expect(text.stdout).not.toContain(ids[4]);
      expect((await run(['review', 'list', '--after', ''])).code).toBe(2);
      for (const id of ids)
        expect((await run(['review', 'resolve', id, '--outcome', 'cancelled', '--note', 'test queue'])).code).toBe(0);
    });

    it('every next command it prints works as printed: a mismatch is resolved with --force --reason', async () => {
      const mm = 'refund:mismatch_1';
      const amb = 'refund:ambiguous_1';
      const rec = (id: string, amount: number) =>
        run(
          ['ops', 'record', '-'],
          JSON.stringify(refund(id, { payload: { payment_intent: pi, amount, currency: 'usd' } })),
        );
      expect((await rec(mm, 2599)).code).toBe(0);
      expect((await rec(amb, 777)).code).toBe(0);
      world!.stripe.faults.inject({ kind: 'drop_before_commit' }, { times: 6 });
      for (const id of [mm, amb])
        expect((await run(['ops', 'submit', id, '--json'])).json.state).toBe('outcome_unknown');
      world!.stripe.faults.clear();
      // At Stripe: a refund carrying mm's id for another amount; a look-alike of amb without metadata.
      world!.stripe.seedRefund({
        payment_intent: pi,
        amount: 2500,
        currency: 'usd',
        metadata: { recon_operation_id: mm },
      });
      world!.stripe.seedRefund({ payment_intent: pi, amount: 777, currency: 'usd' });
      world!.advance(PAST_WINDOW_MS); // past the 1s uncertainty window, on the commands' clock
      expect((await run(['run'])).code).toBe(8);
      const queue = await run(['review', 'list', '--json']);
      const byId = new Map(
        queue.json.operations.map((o: { id: string; review_reason: string; next: string[] }) => [o.id, o]),
      );
      const mmItem = byId.get(mm) as { review_reason: string; next: string[] };
      expect(mmItem.review_reason).toBe('mismatch');
      expect(mmItem.next.some((n) => n.includes('--force --reason'))).toBe(true);
      // Run what recon printed (a person at a terminal answers the attach prompt: --yes here).
      for (const [id, n] of [
        [mm, mmItem.next],
        [amb, [(byId.get(amb) as { next: string[] }).next[0]]],
      ] as const) {
        for (const command of n) {
          const [bin, ...args] = words(command);
          expect(bin).toBe('recon');
          const r = await run(['--yes', ...args]);
          expect(r.code, `${command}\n${r.stderr}`).toBe(0);
        }
        expect((await run(['ops', 'show', id, '--json'])).json.operation.state).toBe('confirmed');
      }
      // Nothing new at Stripe: two refunds seeded, none made by the commands.
      expect(world!.stripe.refunds({ payment_intent: pi }).filter((r) => [2500, 777].includes(r.amount))).toHaveLength(
        2,
      );
    });
  });

  describe('escalate', () => {
    it('puts a confirmed operation in front of people: needs_review, reason escalated, note and assignee kept', async () => {
      const id = 'refund:escalate_confirmed';
      expect(
        (
          await run(
            ['ops', 'record', '-'],
            JSON.stringify(refund(id, { payload: { payment_intent: pi, amount: 1234, currency: 'usd' } })),
          )
        ).code,
      ).toBe(0);
      expect((await run(['ops', 'submit', id, '--json'])).json.state).toBe('confirmed');
      const r = await run([
        'escalate',
        id,
        '--reason',
        'customer reports two refunds',
        '--assignee',
        'finance-oncall',
        '--json',
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.json).toMatchObject({ id, state: 'needs_review', review_reason: 'escalated' });
      const show = await run(['ops', 'show', id, '--json']);
      expect(show.json.operation.assignee).toBe('finance-oncall');
      expect(show.json.events.at(-1).detail).toMatchObject({
        reason: 'customer reports two refunds',
        assignee: 'finance-oncall',
      });
    });
  });

  describe('audit duplicates for a person', () => {
    it("names which transaction is recon's (its operation) and prints the next command, which works", async () => {
      const id = 'refund:dup_audit';
      const op = refund(id, { payload: { payment_intent: pi, amount: 4321, currency: 'usd' } });
      expect((await run(['ops', 'record', '-'], JSON.stringify(op))).code).toBe(0);
      expect((await run(['ops', 'submit', id, '--json'])).json.state).toBe('confirmed');
      const mine = (await run(['ops', 'show', id, '--json'])).json.operation.provider_txn_ids[0];
      // A second refund carrying the operation's id, made outside recon (a retried script).
      world!.stripe.seedRefund({
        payment_intent: pi,
        amount: 4321,
        currency: 'usd',
        metadata: { recon_operation_id: id },
      });
      const r = await run(['audit', 'duplicates', '--full']);
      expect(r.code, r.stderr).toBe(8);
      const [head, ...rows] = r.stdout.trim().split('\n');
      const col = head.split('\t').indexOf('recon operation');
      expect(col).toBeGreaterThan(0);
      const group = rows.find((row) => row.includes(mine))!;
      expect(group.split('\t')[col]).toContain(id);
      const next = /next:\n {2}(recon .*)/.exec(r.stderr)?.[1];
      expect(next, r.stderr).toMatch(/^recon (escalate|ops show) refund:dup_audit/);
      const [, ...args] = words(next!);
      const ran = await run(args);
      expect(ran.code, ran.stderr).toBe(0);
    });
  });
});
