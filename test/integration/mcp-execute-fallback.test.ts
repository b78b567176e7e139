/**
 * execute_action claims the operation as it read it in one statement, with its `mcp.call` in that
 * statement (f6f9d38). When that statement writes nothing (an event appended since the read, the row
 * changed, another call's claim first) the long way decides, and the call's event must still be
 * written: with the long way's claim, or on its own when nothing is sent. It was lost: the event
 * counted as written once handed to the statement (found by an adversarial review of f6f9d38).
 */
import { expect, it } from 'vitest';
import { execute } from '../../src/agent/actions.js';
import { toolCall, type Agent } from '../../src/agent/context.js';
import { verifyChains } from '../../src/core/audit/verify.js';
import { eventsOf } from '../../src/core/journal/chain.js';
import { note } from '../../src/core/journal/note.js';
import type { Db } from '../../src/store/db.js';
import type { AuditEvent } from '../../src/types.js';
import { describeWorld } from '../support/describe-world.js';
import type { StripeWorld } from '../support/stripe-world.js';

function agentCall(w: StripeWorld, db: Db) {
  const agent: Agent = { db, config: w.config, now: () => new Date(), provider: async () => w.stripe, log: () => {} };
  return toolCall(agent, 'fallback-test');
}

/** `w.db`, with `after(n)` run once the call's n-th statement (outside a transaction) has returned. */
function after(w: StripeWorld, fn: (n: number) => Promise<void>): Db {
  let n = 0;
  return {
    ...w.db,
    async query<T>(sql: string, params?: unknown[]) {
      const r = await w.db.query<T>(sql, params);
      await fn(++n);
      return r;
    },
  };
}

const executeCalls = (events: AuditEvent[]) =>
  events.filter((e) => e.kind === 'mcp.call' && e.detail.tool === 'execute_action');

describeWorld("execute_action's call is recorded when its one-statement claim writes nothing", (suite) => {
  it('an event appended between the read and the claim: sent the long way, with its mcp.call', async () => {
    const w = await suite.stripeWorld();
    const id = 'refund:fallback_1';
    const [pi] = await w.recordRefunds([{ id, amount: 1500 }]);
    const db = after(w, async (n) => {
      if (n === 1)
        await w.db.transaction((tx) => note(tx, id, { actor: 'test:other', now: new Date(), kind: 'test.between' }));
    });
    expect((await execute(agentCall(w, db), id)).result).toMatchObject({ sent: true });
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
    const events = await eventsOf(w.db, id);
    expect(executeCalls(events)).toHaveLength(1);
    const started = events.findIndex((e) => e.kind === 'attempt.started');
    expect(events[started + 1]).toMatchObject({
      kind: 'mcp.call',
      detail: { tool: 'execute_action', in_change: true },
    });
    expect((await verifyChains(w.db)).ok).toBe(true);
  });

  it('the row changed since the read, no event: sent the long way, with its mcp.call', async () => {
    const w = await suite.stripeWorld();
    const id = 'refund:fallback_2';
    const [pi] = await w.recordRefunds([{ id, amount: 1500 }]);
    const db = after(w, async (n) => {
      if (n === 1) await w.db.query('UPDATE recon.operations SET assignee = assignee WHERE id = $1', [id]);
    });
    expect((await execute(agentCall(w, db), id)).result).toMatchObject({ sent: true });
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
    expect(executeCalls(await eventsOf(w.db, id))).toHaveLength(1);
    expect((await verifyChains(w.db)).ok).toBe(true);
  });

  it('two execute_action calls: the one that lost sends nothing and is recorded too', async () => {
    const w = await suite.stripeWorld();
    const id = 'refund:fallback_3';
    const [pi] = await w.recordRefunds([{ id, amount: 1500 }]);
    const db = after(w, async (n) => {
      if (n === 1) expect((await execute(agentCall(w, w.db), id)).result).toMatchObject({ sent: true });
    });
    expect((await execute(agentCall(w, db), id)).result).toMatchObject({ sent: false });
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
    expect(executeCalls(await eventsOf(w.db, id))).toHaveLength(2);
    expect((await verifyChains(w.db)).ok).toBe(true);
  });
});
