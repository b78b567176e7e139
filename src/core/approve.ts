import type { CoreContext } from './context.js';
import { transition } from './transition.js';
import type { Operation } from '../types.js';

/** proposed → approved, recording the approval reference. */
export async function approveOperation(ctx: CoreContext, id: string, ref: string): Promise<Operation> {
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const { op } = await transition(tx, id, 'approved', {
      actor: ctx.actor,
      now,
      kind: 'approved',
      rule: 'human.approval',
      detail: { approval: ref },
    });
    await tx.query('UPDATE recon.operations SET approval = $2 WHERE id = $1', [id, ref]);
    return { ...op, approval: ref };
  });
}
