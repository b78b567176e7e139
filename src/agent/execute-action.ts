/**
 * `execute_action`: the first attempt of an approved operation (`recon ops submit`). For an
 * operation that already has an attempt it sends nothing and answers with the current state: the
 * second click is a status question (SPEC §9).
 */
import { z } from 'zod';
import { ID_PATTERN } from '../core/intake/validate.js';
import { execute } from './actions.js';
import { actionShape } from './result.js';
import { answer, guarded, type Register } from './tool.js';

const input = {
  operation_id: z.string().regex(ID_PATTERN).describe('The operation_id you gave propose_action'),
};

const output = {
  ...actionShape,
  sent: z.boolean().optional().describe('true only when this call sent a request to the provider'),
  attempt: z.number().int().optional().describe('The attempt this call made (1), when it sent one'),
  attempt_count: z.number().int().optional(),
};

export const registerExecuteAction: Register = (server, call) => {
  server.registerTool(
    'execute_action',
    {
      title: 'Execute an approved action, once',
      description:
        'Sends an approved action to the provider: its first and only attempt from you, with the operation’s own ' +
        'idempotency key. If the operation already has an attempt, nothing is sent and you get its current state: ' +
        'calling it twice is safe and never does the action twice. If the result is outcome_unknown, the provider ' +
        'may have done it: do not try again and do not propose it anew; call check_action. Refused while the ' +
        'operation waits for a person’s approval.',
      inputSchema: input,
      outputSchema: output,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
    },
    async ({ operation_id: id }) => {
      const c = call();
      return guarded(c, 'execute_action', id, async () => answer(await execute(c, id)));
    },
  );
};
