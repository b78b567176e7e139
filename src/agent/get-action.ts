/** `get_action`: what recon knows about one operation now (`recon ops show`), without asking the provider. */
import { z } from 'zod';
import { ID_PATTERN } from '../core/intake/validate.js';
import { status } from './actions.js';
import { actionShape } from './result.js';
import { answer, guarded, type Register } from './tool.js';

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
      return guarded(c, 'get_action', id, async () => answer(await status(c, id)));
    },
  );
};
