/**
 * `check_action`: one reconciliation step for one operation (SPEC §4), the code `recon retry` and
 * `recon run` use: a fresh provider lookup, the rule, and its decision written with the evidence. A
 * retry happens only where the rule allows it, with the original key and payload.
 */
import { z } from 'zod';
import { ID_PATTERN } from '../core/intake/validate.js';
import type { DecisionKind } from '../types.js';
import { check } from './actions.js';
import { actionShape } from './result.js';
import { answer, guarded, type Register } from './tool.js';

const DECISIONS = [
  'confirm',
  'pending',
  'fail',
  'retry',
  'wait',
  'review',
  'unavailable',
] as const satisfies readonly DecisionKind[];

const input = {
  operation_id: z.string().regex(ID_PATTERN).describe('The operation_id you gave propose_action'),
};

const output = {
  ...actionShape,
  checked: z
    .boolean()
    .optional()
    .describe('true when recon asked the provider in this call; false when there was nothing to ask'),
  decision: z
    .object({
      decision: z.enum(DECISIONS),
      rule: z.string(),
      explanation: z.string().optional(),
    })
    .nullable()
    .optional()
    .describe('What the reconciliation rule decided in this call'),
  retry_after: z
    .object({ at: z.string(), seconds: z.number().int() })
    .optional()
    .describe('When asking again can tell more (ISO time, and seconds from now): call check_action after it'),
};

export const registerCheckAction: Register = (server, call) => {
  server.registerTool(
    'check_action',
    {
      title: 'Find out what happened to an action',
      description:
        'Asks the provider what it holds for this operation and applies recon’s reconciliation rule once: a refund ' +
        'the provider did is found and confirmed; if nothing is found, recon waits, and only when its rule allows it ' +
        'repeats the original request with the same idempotency key (never a second action). Call it after ' +
        'execute_action answered outcome_unknown, pending or submitting. Never send the action another way meanwhile.',
      inputSchema: input,
      outputSchema: output,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    },
    async ({ operation_id: id }) => {
      const c = call();
      return guarded(c, 'check_action', id, async () => answer(await check(c, id)));
    },
  );
};
