/**
 * Every tool call is an audit event (SPEC §9), actor `mcp:<client name>`. A call that changes the
 * operation is already audited by the core under that actor (recorded, attempt.started, …); the
 * `mcp.call` event adds what the agent asked and what it was told. It changes no state: from_state
 * and to_state are where the operation's chain stands (note), never the row's state, so a read-only
 * call after a change made behind recon's back leaves `audit verify` reporting it. A call about an operation that does not exist has
 * no chain to go on and is not recorded (as `ops record` writes nothing for bad input).
 */
import { NotFoundError } from '../errors.js';
import { appendEvent } from '../core/journal/chain.js';
import { note } from '../core/journal/note.js';
import type { CoreContext } from '../core/journal/context.js';
import type { Queryable } from '../store/db.js';

export const MCP_CALL = 'mcp.call';

export async function auditCall(
  ctx: CoreContext,
  operationIds: string[],
  detail: { tool: string } & Record<string, unknown>,
): Promise<void> {
  if (operationIds.length === 0) return;
  await ctx.db.transaction((tx) => auditCallIn(tx, ctx, operationIds, detail));
}

/**
 * auditCall inside the transaction that makes the change the call describes. `locked`: that
 * transaction already holds the operations' row locks (it changed them: a claim, a decision), so
 * the event is appended without locking again (one round trip less).
 */
export async function auditCallIn(
  tx: Queryable,
  ctx: Pick<CoreContext, 'actor' | 'now' | 'auditKey'>,
  operationIds: string[],
  detail: { tool: string } & Record<string, unknown>,
  o: { locked?: boolean } = {},
): Promise<void> {
  const now = ctx.now();
  // In id order, so two calls over overlapping operations never wait on each other in a cycle.
  for (const id of [...new Set(operationIds)].sort()) {
    try {
      if (o.locked)
        await appendEvent(
          tx,
          { operation_id: id, actor: ctx.actor, at: now, kind: MCP_CALL, rule: null, detail },
          ctx.auditKey,
        );
      else await note(tx, id, { actor: ctx.actor, auditKey: ctx.auditKey, now, kind: MCP_CALL, rule: null, detail });
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
  }
}
