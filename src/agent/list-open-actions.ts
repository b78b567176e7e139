/** `list_open_actions`: the unresolved operations (`recon ops list --unresolved`). */
import { z } from 'zod';
import { countOperations, listOperations, txnIdsByOperation } from '../core/operations.js';
import { UNRESOLVED_STATES } from '../types.js';
import { auditCall } from './audit.js';
import { actionShape, describeState, toolResult } from './result.js';
import { guarded, type Register } from './tool.js';

const input = {
  client_reference: z
    .string()
    .max(200)
    .optional()
    .describe('Only operations with this client reference (e.g. an order id)'),
  limit: z.number().int().min(1).max(200).optional().describe('At most this many, newest first (default 20)'),
};

const output = {
  actions: z.array(z.object(actionShape)).describe('Each unresolved operation, with its state message and next tool'),
  total: z.number().int().describe('How many unresolved operations match, beyond those shown too'),
  message: z.string(),
  next: z.enum(['check_action', 'none']),
};

export const registerListOpenActions: Register = (server, call) => {
  server.registerTool(
    'list_open_actions',
    {
      title: 'List unfinished actions',
      description:
        'Lists operations whose outcome is not settled yet (submitting, pending, outcome_unknown, needs_review), ' +
        'newest first, optionally for one client_reference. Use it before proposing an action for an order, to see ' +
        'whether one is already under way. Actions waiting for approval are not listed: ask get_action.',
      inputSchema: input,
      outputSchema: output,
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async ({ client_reference, limit }) => {
      const c = call();
      return guarded(c, 'list_open_actions', undefined, async () => {
        const filter = { states: [...UNRESOLVED_STATES], clientReference: client_reference };
        const ops = await listOperations(c.ctx.db, { ...filter, limit: limit ?? 20 });
        const total = await countOperations(c.ctx.db, filter);
        // The call is recorded on each operation it showed: the agent was told about these.
        await auditCall(
          c.ctx,
          ops.map((o) => o.id),
          { tool: 'list_open_actions', client_reference: client_reference ?? null },
        );
        const txns = await txnIdsByOperation(
          c.ctx.db,
          ops.map((o) => o.id),
        );
        const actions = ops.map((o) => describeState(o, txns.get(o.id) ?? []));
        return toolResult({
          actions,
          total,
          message:
            ops.length === 0
              ? 'No unfinished actions.'
              : `${total} unfinished action(s)${total > ops.length ? `, showing ${ops.length}` : ''}. Do not repeat any of them; ask about each with check_action.`,
          next: ops.length === 0 ? 'none' : 'check_action',
        });
      });
    },
  );
};
