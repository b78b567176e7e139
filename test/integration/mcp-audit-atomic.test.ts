/**
 * SPEC §9: "the `mcp.call` event is written in the same transaction as the change it describes".
 * The store goes away (every later statement fails, as after a crash or a lost connection) the
 * moment the change an agent's call made is in it: the record of that call must be there with it.
 * check_action's decision was written as one statement and its `mcp.call` in a transaction after
 * it: a store lost between the two kept a decision no call accounted for.
 */
import { expect, it } from 'vitest';
import { check, execute } from '../../src/agent/actions.js';
import { toolCall, type Agent } from '../../src/agent/context.js';
import { verifyChains } from '../../src/core/audit/verify.js';
import { eventsOf } from '../../src/core/journal/chain.js';
import type { Db } from '../../src/store/db.js';
import type { AuditEvent } from '../../src/types.js';
import { describeWorld } from '../support/describe-world.js';
import type { StripeWorld } from '../support/stripe-world.js';

/**
 * `db` until `changed()` first holds after a statement or a transaction of the call ended; from
 * then on every statement fails, as when the store went away right after that write.
 */
function lostAfter(db: Db, changed: () => Promise<boolean>): Db {
  let gone = false;
  const lost = () => new Error('connection terminated unexpectedly (test: the store went away)');
  const then = async <T>(v: T): Promise<T> => {
    if (!gone && (await changed())) gone = true;
    return v;
  };
  return {
    kind: db.kind,
    displayUrl: db.displayUrl,
    async query(sql, params) {
      if (gone) throw lost();
      return then(await db.query(sql, params));
    },
    async transaction(fn) {
      if (gone) throw lost();
      return then(await db.transaction(fn));
    },
    close: async () => undefined,
  };
}

function agentCall(w: StripeWorld, db: Db) {
  const agent: Agent = {
    db,
    config: w.config,
    now: () => new Date(),
    provider: async () => w.stripe,
    log: () => undefined,
  };
  return toolCall(agent, 'crash-test');
}

const callsOf = (events: AuditEvent[], tool: string) =>
  events.filter((ev) => ev.kind === 'mcp.call' && ev.detail.tool === tool);

describeWorld('an agent call and the change it made are stored together', (suite) => {
  it('check_action: the store lost right after the decision still holds the check_action call that made it', async () => {
    const w = await suite.stripeWorld();
    const id = 'refund:atomic_check';
    const [pi] = await w.recordRefunds([{ id, amount: 1500 }]);
    // Stripe commits the refund and the connection drops (twice: stripe-node's own retry): outcome_unknown.
    w.sandbox.faults.inject({ kind: 'commit_then_drop' }, { times: 2 });
    expect((await execute(agentCall(w, w.db), id)).result.state).toBe('outcome_unknown');

    const decided = async () =>
      (await eventsOf(w.db, id)).some((ev) => ev.kind.startsWith('reconcile.') && ev.to_state === 'confirmed');
    await expect(check(agentCall(w, lostAfter(w.db, decided)), id)).rejects.toThrow(/store went away/);

    const events = await eventsOf(w.db, id);
    const decision = events.findIndex((ev) => ev.kind.startsWith('reconcile.'));
    expect(decision, 'the decision was written before the store went away').toBeGreaterThan(-1);
    expect(events[decision]).toMatchObject({ to_state: 'confirmed', rule: 'found.confirmed' });
    // Both or neither: here both, the call's event chained right after the decision it made.
    expect(callsOf(events, 'check_action')).toHaveLength(1);
    expect(events[decision + 1]).toMatchObject({
      kind: 'mcp.call',
      actor: 'mcp:crash-test',
      from_state: 'confirmed',
      to_state: 'confirmed',
      detail: { tool: 'check_action', in_change: true },
    });
    expect((await verifyChains(w.db)).ok).toBe(true);
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
  });

  it('execute_action: the store lost right after the claim still holds the execute_action call that made it', async () => {
    const w = await suite.stripeWorld();
    const id = 'refund:atomic_execute';
    const [pi] = await w.recordRefunds([{ id, amount: 1500 }]);
    const claimed = async () => (await eventsOf(w.db, id)).some((ev) => ev.kind === 'attempt.started');
    await expect(execute(agentCall(w, lostAfter(w.db, claimed)), id)).rejects.toThrow(/store went away/);

    const events = await eventsOf(w.db, id);
    const started = events.findIndex((ev) => ev.kind === 'attempt.started');
    expect(started).toBeGreaterThan(-1);
    expect(callsOf(events, 'execute_action')).toHaveLength(1);
    expect(events[started + 1]).toMatchObject({
      kind: 'mcp.call',
      detail: { tool: 'execute_action', in_change: true },
    });
    expect((await verifyChains(w.db)).ok).toBe(true);
    // The request went out after the claim: the refund is at Stripe, recon's record says submitting.
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
  });
});
