/**
 * execute_action right after this server's propose_action claims on the proposal's write (the row's
 * version and chain head the insert returned: src/agent/just-recorded.ts) instead of reading the row
 * back: one statement fewer before the provider is called. Whatever happened to the row since (a
 * person escalated it, its payload changed behind recon's back, another server executed it) makes the
 * claim write nothing, and the call is decided on a read as before: asserted on the sandbox's ledger.
 */
import { expect, it, vi } from 'vitest';
import { execute, propose } from '../../src/agent/actions.js';
import { toolCall, type Agent } from '../../src/agent/context.js';
import { justRecordedCount, keepJustRecorded, takeJustRecorded } from '../../src/agent/just-recorded.js';
import { verifyChains } from '../../src/core/audit/verify.js';
import { eventsOf } from '../../src/core/journal/chain.js';
import { getOperation } from '../../src/core/journal/operations.js';
import { escalate } from '../../src/core/review/escalate.js';
import type { Db } from '../../src/store/db.js';
import { describeWorld } from '../support/describe-world.js';
import type { StripeWorld } from '../support/stripe-world.js';

const AUTO_APPROVE = { autoApprove: { maxAmount: 5000, currencies: ['usd'] } };

function agentOf(w: StripeWorld, db: Db = w.db): Agent {
  return { db, config: w.config, now: () => new Date(), provider: async () => w.stripe, log: () => {} };
}

/** `db`, with each statement's first two words (a transaction as BEGIN) in `sent`. */
function watched(db: Db, sent: string[]): Db {
  return {
    ...db,
    async query<T>(sql: string, params?: unknown[]) {
      sent.push(sql.trim().split(/\s+/).slice(0, 2).join(' '));
      return db.query<T>(sql, params);
    },
    transaction(fn) {
      sent.push('BEGIN');
      return db.transaction(fn);
    },
  };
}

async function proposeRefund(agent: Agent, w: StripeWorld, id: string, amount = 1500) {
  const pi = w.sandbox.seedPaymentIntent({ amount: 10_000, currency: 'usd' }).payment_intent;
  const r = await propose(toolCall(agent, 'jr-test'), {
    provider: 'stripe',
    action: 'refund',
    operation_id: id,
    payload: { payment_intent: pi, amount, currency: 'usd' },
  });
  return { pi, state: r.result.state };
}

describeWorld('execute_action after propose_action claims on the proposal’s write', (suite) => {
  it('claims without reading the row back: two statements (claim, result), one refund', async () => {
    const w = await suite.stripeWorld(AUTO_APPROVE);
    const sent: string[] = [];
    const agent = agentOf(w, watched(w.db, sent));
    const id = 'refund:jr_1';
    const { pi, state } = await proposeRefund(agent, w, id);
    expect(state).toBe('approved');
    sent.length = 0;
    expect((await execute(toolCall(agent, 'jr-test'), id)).result).toMatchObject({
      state: 'confirmed',
      sent: true,
      attempt: 1,
    });
    expect(sent).toEqual(['WITH u', 'WITH u']);
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
    const events = await eventsOf(w.db, id);
    expect(events.map((e) => e.kind)).toEqual([
      'recorded',
      'mcp.call',
      'attempt.started',
      'mcp.call',
      'attempt.finished',
    ]);
    expect((await verifyChains(w.db)).ok).toBe(true);
    // Taken once: a second execute_action reads, sends nothing.
    expect((await execute(toolCall(agent, 'jr-test'), id)).result).toMatchObject({ sent: false });
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
  });

  it('a payload changed behind recon’s back after the proposal is not sent: needs_review, payload_tampered', async () => {
    const w = await suite.stripeWorld(AUTO_APPROVE);
    const agent = agentOf(w);
    const id = 'refund:jr_2';
    const { pi } = await proposeRefund(agent, w, id);
    await w.db.query(`UPDATE recon.operations SET payload = jsonb_set(payload, '{amount}', '4999') WHERE id = $1`, [
      id,
    ]);
    const answer = await execute(toolCall(agent, 'jr-test'), id);
    expect(answer.result).toMatchObject({ state: 'needs_review', sent: false });
    expect(w.sandbox.refunds({ payment_intent: pi })).toEqual([]);
    expect(await getOperation(w.db, id)).toMatchObject({ state: 'needs_review', review_reason: 'payload_tampered' });
    expect((await verifyChains(w.db)).ok).toBe(true);
  });

  it('escalated by a person after the proposal: nothing sent, the answer is the state now', async () => {
    const w = await suite.stripeWorld(AUTO_APPROVE);
    const agent = agentOf(w);
    const id = 'refund:jr_3';
    const { pi } = await proposeRefund(agent, w, id);
    await escalate({ ...w.ctx, actor: 'test:oncall' }, id, { reason: 'customer disputes the order' });
    const answer = await execute(toolCall(agent, 'jr-test'), id);
    expect(answer.result).toMatchObject({ state: 'needs_review', sent: false, next: 'none' });
    expect(w.sandbox.refunds({ payment_intent: pi })).toEqual([]);
    const events = await eventsOf(w.db, id);
    expect(events.filter((e) => e.kind === 'mcp.call' && e.detail.tool === 'execute_action')).toHaveLength(1);
    expect((await verifyChains(w.db)).ok).toBe(true);
  });

  it('executed first by another server: this one sends nothing, one refund in the ledger', async () => {
    const w = await suite.stripeWorld(AUTO_APPROVE);
    const here = agentOf(w);
    const elsewhere = agentOf(w);
    const id = 'refund:jr_4';
    const { pi } = await proposeRefund(here, w, id);
    expect((await execute(toolCall(elsewhere, 'other-server'), id)).result).toMatchObject({ sent: true });
    expect((await execute(toolCall(here, 'jr-test'), id)).result).toMatchObject({
      state: 'confirmed',
      sent: false,
      attempt_count: 1,
    });
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
    const events = await eventsOf(w.db, id);
    expect(events.filter((e) => e.kind === 'mcp.call' && e.detail.tool === 'execute_action')).toHaveLength(2);
    expect((await verifyChains(w.db)).ok).toBe(true);
  });

  it('gone from the store since the proposal: the answer is "not recorded", nothing sent', async () => {
    const w = await suite.stripeWorld(AUTO_APPROVE);
    const agent = agentOf(w);
    const id = 'refund:jr_6';
    const { pi } = await proposeRefund(agent, w, id);
    // A store restored from a backup taken before it (as the row's own deletion does here).
    await w.db.query('ALTER TABLE recon.audit_events DISABLE TRIGGER USER');
    await w.db.query('DELETE FROM recon.audit_events WHERE operation_id = $1', [id]);
    await w.db.query('ALTER TABLE recon.audit_events ENABLE TRIGGER USER');
    await w.db.query('DELETE FROM recon.operations WHERE id = $1', [id]);
    const answer = await execute(toolCall(agent, 'jr-test'), id);
    expect(answer.isError).toBe(true);
    expect(answer.result).toMatchObject({ state: null, refused: { rule: 'not_found' } });
    expect(w.sandbox.refunds({ payment_intent: pi })).toEqual([]);
  });

  it('a view whose chain is not the store’s (the same row version, another history) claims the long way', async () => {
    const w = await suite.stripeWorld(AUTO_APPROVE);
    const agent = agentOf(w);
    const id = 'refund:jr_7';
    const { pi } = await proposeRefund(agent, w, id);
    // The row version matches; the head does not (a failover to a replica behind can give a row the
    // version another history gave it): the fast claim would chain its events after a head the store
    // never had.
    const view = takeJustRecorded(agent, id)!;
    keepJustRecorded(agent, { ...view, head: { ...view.head, hash: 'f'.repeat(64) } });
    expect((await execute(toolCall(agent, 'jr-test'), id)).result).toMatchObject({ state: 'confirmed', sent: true });
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
    const events = await eventsOf(w.db, id);
    for (let i = 1; i < events.length; i++) expect(events[i].prev_hash).toBe(events[i - 1].hash);
    expect((await verifyChains(w.db)).ok).toBe(true);
  });

  it('keeps no view of a proposal that waits for a person', async () => {
    const w = await suite.stripeWorld(AUTO_APPROVE);
    const agent = agentOf(w);
    const { state } = await proposeRefund(agent, w, 'refund:jr_5', 9000);
    expect(state).toBe('proposed');
    expect(justRecordedCount(agent)).toBe(0);
  });
});

it('keeps at most 256 views, the newest, each taken once, none past a minute', () => {
  const agent = { log: () => {} } as unknown as Agent;
  const view = (i: number) =>
    ({ op: { id: `op_${i}` }, recorded: null, head: { seq: 2, hash: 'h' }, transactions: [], version: '1' }) as never;
  for (let i = 0; i < 300; i++) keepJustRecorded(agent, view(i));
  expect(justRecordedCount(agent)).toBe(256);
  expect(takeJustRecorded(agent, 'op_43')).toBeUndefined();
  expect(takeJustRecorded(agent, 'op_44')).toMatchObject({ op: { id: 'op_44' } });
  expect(takeJustRecorded(agent, 'op_44')).toBeUndefined();
  expect(justRecordedCount(agent)).toBe(255);
  // A minute later, the next proposal lets go of every view older than that.
  const now = performance.now();
  const later = vi.spyOn(performance, 'now').mockReturnValue(now + 61_000);
  try {
    keepJustRecorded(agent, view(1000));
    expect(justRecordedCount(agent)).toBe(1);
  } finally {
    later.mockRestore();
  }
});
