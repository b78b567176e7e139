/**
 * A tool call that changes nothing (check_action on a settled operation, get_action, a second
 * execute_action) records its `mcp.call` in one statement after its read (noteOnHead: the row lock
 * and the event chained after the head the read saw), where it took a transaction of four (BEGIN,
 * the lock, the head, the insert, COMMIT: six statements a check_action). An event appended between
 * the read and the note takes the seq the note needed: the note is then written the long way,
 * chained after it, and the chain stays one.
 */
import { expect, it } from 'vitest';
import { check, execute, status } from '../../src/agent/actions.js';
import { toolCall, type Agent } from '../../src/agent/context.js';
import { verifyChains } from '../../src/core/audit/verify.js';
import { eventsOf } from '../../src/core/journal/chain.js';
import { note } from '../../src/core/journal/note.js';
import type { Db } from '../../src/store/db.js';
import { describeWorld } from '../support/describe-world.js';
import type { StripeWorld } from '../support/stripe-world.js';

function agentCall(w: StripeWorld, db: Db) {
  const agent: Agent = { db, config: w.config, now: () => new Date(), provider: async () => w.stripe, log: () => {} };
  return toolCall(agent, 'note-test');
}

/** `w.db`, with each statement's first two words (a transaction as BEGIN) in `sent`, and `after` run after each statement. */
function watched(w: StripeWorld, sent: string[], after: (n: number) => Promise<void> = async () => {}): Db {
  return {
    ...w.db,
    async query<T>(sql: string, params?: unknown[]) {
      sent.push(sql.trim().split(/\s+/).slice(0, 2).join(' '));
      const r = await w.db.query<T>(sql, params);
      await after(sent.length);
      return r;
    },
    transaction(fn) {
      sent.push('BEGIN');
      return w.db.transaction(fn);
    },
  };
}

describeWorld('a call that changes nothing notes itself in one statement', (suite) => {
  it('check_action on a confirmed refund: its read and one statement, no transaction', async () => {
    const w = await suite.stripeWorld();
    const id = 'refund:noh_check';
    const [pi] = await w.recordRefunds([{ id, amount: 1500 }]);
    expect((await execute(agentCall(w, w.db), id)).result.state).toBe('confirmed');

    const sent: string[] = [];
    const answer = await check(agentCall(w, watched(w, sent)), id);
    expect(answer.result).toMatchObject({ state: 'confirmed', checked: false });
    expect(sent).toEqual(['SELECT o.id,', 'WITH l']);
    const events = await eventsOf(w.db, id);
    expect(events.at(-1)).toMatchObject({
      kind: 'mcp.call',
      actor: 'mcp:note-test',
      from_state: 'confirmed',
      to_state: 'confirmed',
      detail: { tool: 'check_action', checked: false },
    });
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect((await verifyChains(w.db)).ok).toBe(true);
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
  });

  it('an event appended between the read and the note: the note is chained after it, the long way', async () => {
    const w = await suite.stripeWorld();
    const id = 'refund:noh_race';
    const [pi] = await w.recordRefunds([{ id, amount: 1500 }]);
    expect((await execute(agentCall(w, w.db), id)).result.state).toBe('confirmed');
    const before = (await eventsOf(w.db, id)).length;

    const sent: string[] = [];
    // Another writer appends to the chain right after get_action has read it.
    const db = watched(w, sent, async (n) => {
      if (n === 1)
        await w.db.transaction((tx) => note(tx, id, { actor: 'test:other', now: new Date(), kind: 'test.between' }));
    });
    const answer = await status(agentCall(w, db), id);
    expect(answer.result).toMatchObject({ state: 'confirmed' });
    // The read, the one statement (refused on the chain's key: nothing written), then the long way.
    expect(sent.slice(0, 3)).toEqual(['SELECT o.id,', 'WITH l', 'BEGIN']);
    const events = await eventsOf(w.db, id);
    expect(events.slice(before).map((e) => [e.seq, e.kind, e.detail.tool ?? null])).toEqual([
      [before + 1, 'test.between', null],
      [before + 2, 'mcp.call', 'get_action'],
    ]);
    expect((await verifyChains(w.db)).ok).toBe(true);
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
  });
});
