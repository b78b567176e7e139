/** `get_action`: what recon knows about one operation now (`recon ops show`), without asking the provider. */
import { z } from 'zod';
import { attemptsOf } from '../core/operations.js';
import { ID_PATTERN } from '../core/validate.js';
import { auditCall } from './audit.js';
import { currentOperation } from './context.js';
import { actionShape, describeState, toolResult, notRecorded } from './result.js';
import { guarded, type Register } from './tool.js';

const input = {
  operation_id: z.string().regex(ID_PATTERN).describe('The operation_id you gave propose_action'),
};

const output = {
  ...actionShape,
  provider: z.string().optional(),
  action: z.string().optional(),
  amount: z.number().nullable().optional(),
  currency: z.string().nullable().optional(),
  client_reference: z.string().nullable().optional(),
  approval: z.string().nullable().optional(),
  attempts: z
    .array(
      z.object({
        number: z.number().int(),
        started_at: z.string(),
        ended_at: z.string().nullable(),
        outcome: z.enum(['confirmed', 'failed', 'unknown']).nullable(),
      }),
    )
    .optional()
    .describe('Every request sent to the provider for this operation'),
  created_at: z.string().optional(),
  updated_at: z.string().optional(),
};

export const registerGetAction: Register = (server, call) => {
  server.registerTool(
    'get_action',
    {
      title: 'Show an action’s state',
      description:
        'Returns what recon knows about an operation now: its state, the provider’s transaction ids, the attempts ' +
        'made and the next step. It does not ask the provider (check_action does) and sends nothing.',
      inputSchema: input,
      outputSchema: output,
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async ({ operation_id: id }) => {
      const c = call();
      return guarded(c, 'get_action', id, async () => {
        const found = await currentOperation(c.ctx.db, id);
        if (!found)
          return toolResult(
            notRecorded(id, `No operation ${id} is recorded. If you meant to do it, record it with propose_action.`),
            true,
          );
        await auditCall(c.ctx, [id], { tool: 'get_action' });
        const { op, txnIds } = (await currentOperation(c.ctx.db, id)) ?? found;
        const attempts = await attemptsOf(c.ctx.db, id);
        return toolResult({
          ...describeState(op, txnIds),
          provider: op.provider,
          action: op.action,
          amount: op.amount,
          currency: op.currency,
          client_reference: op.client_reference,
          approval: op.approval,
          attempts: attempts.map((a) => ({
            number: a.number,
            started_at: a.started_at.toISOString(),
            ended_at: a.ended_at?.toISOString() ?? null,
            outcome: a.outcome,
          })),
          created_at: op.created_at.toISOString(),
          updated_at: op.updated_at.toISOString(),
        });
      });
    },
  );
};
