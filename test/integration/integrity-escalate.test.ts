/**
 * SPEC §7: `escalate` on an operation already in needs_review reassigns it or adds a reason (an
 * audit event, state unchanged); it was refused by the state machine (exit 4). The reason a rule
 * gave (e.g. duplicate) is kept: the person's reason goes into the trail.
 */
import { beforeEach, expect, it } from 'vitest';
import { eventsOf } from '../../src/core/journal/chain.js';
import { verifyChains } from '../../src/core/audit/verify.js';
import type { CoreContext } from '../../src/core/journal/context.js';
import { escalate } from '../../src/core/review/escalate.js';
import { recordOperations } from '../../src/core/intake/record.js';
import { getOperation } from '../../src/core/journal/operations.js';
import { transition } from '../../src/core/journal/transition.js';
import { validateOperation } from '../../src/core/intake/validate.js';
import type { Db } from '../../src/store/db.js';
import { describeWorld } from '../support/describe-world.js';

describeWorld('escalate an operation already in review', (suite) => {
  let db: Db;
  beforeEach(async () => {
    db = await suite.db();
  });

  it('reassigns it and records the added reason; the state and the rule’s reason stay', async () => {
    const ctx: CoreContext = { db, actor: 'oncall', now: () => new Date('2025-03-01T10:00:00Z') };
    await recordOperations(ctx, [
      validateOperation(
        { id: 'op_e', provider: 'stripe', action: 'refund', payload: { charge: 'ch_1', amount: 1 }, approval: 'T' },
        ['stripe'],
      ),
    ]);
    await db.transaction(async (tx) => {
      for (const to of ['submitting', 'outcome_unknown'] as const)
        await transition(tx, 'op_e', to, { actor: 't', now: ctx.now(), kind: 'k', rule: 'r' });
      await transition(tx, 'op_e', 'needs_review', {
        actor: 't',
        now: ctx.now(),
        kind: 'k',
        rule: 'found.duplicate',
        review_reason: 'duplicate',
      });
    });
    const op = await escalate(ctx, 'op_e', { reason: 'customer reports two refunds', assignee: 'finance-oncall' });
    expect(op).toMatchObject({ state: 'needs_review', review_reason: 'duplicate', assignee: 'finance-oncall' });
    expect(await getOperation(db, 'op_e')).toMatchObject({ state: 'needs_review', assignee: 'finance-oncall' });
    expect((await eventsOf(db, 'op_e')).at(-1)).toMatchObject({
      kind: 'escalated',
      from_state: 'needs_review',
      to_state: 'needs_review',
      detail: expect.objectContaining({ reason: 'customer reports two refunds', assignee: 'finance-oncall' }),
    });
    expect((await verifyChains(db)).ok).toBe(true);
  });
});
