/**
 * `list_open_actions`: what is under way or waits for someone (`recon ops list`): unresolved
 * operations, and those proposed or approved; with `client_reference` and `include_resolved`, every
 * operation for that reference in any state, so the second click of the seed incident finds the first refund.
 */
import { z } from 'zod';
import { listOpen } from './actions.js';
import { actionShape } from './result.js';
import { answer, guarded, type Register } from './tool.js';

const input = {
  client_reference: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe('Only operations with this client reference (e.g. an order id); omit it for all'),
  include_resolved: z
    .boolean()
    .optional()
    .describe('With client_reference: every operation for it in any state (confirmed, failed…), not only open ones'),
  limit: z.number().int().min(1).max(200).optional().describe('At most this many, newest first (default 20)'),
};

const output = {
  actions: z
    .array(
      z.object({
        ...actionShape,
        amount: z.number().nullable().optional(),
        currency: z.string().nullable().optional(),
        client_reference: z.string().nullable().optional(),
        waits_for_person: z.boolean().optional().describe('true when a person must act first (approve or review)'),
      }),
    )
    .describe('Each operation, with its state message and next tool'),
  total: z.number().int().describe('How many operations match, beyond those shown too'),
  message: z.string(),
  next: z.enum(['check_action', 'none']),
  refused: actionShape.refused,
};

export const registerListOpenActions: Register = (server, call) => {
  server.registerTool(
    'list_open_actions',
    {
      title: 'List unfinished actions',
      description:
        'Lists operations that are not settled: proposed or approved (not sent yet; waits_for_person says which ' +
        'need a person), submitting, pending, outcome_unknown, needs_review; newest first, optionally for one ' +
        'client_reference. With client_reference and include_resolved: true it lists every operation for that ' +
        'reference in any state, so you can see whether the action already happened. Call it before proposing ' +
        'an action for an order.',
      inputSchema: input,
      outputSchema: output,
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async (args) => {
      const c = call();
      return guarded(c, 'list_open_actions', undefined, async () => answer(await listOpen(c, args)));
    },
  );
};
