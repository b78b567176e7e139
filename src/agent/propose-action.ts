/** `propose_action`: records what the agent wants done, before anything is sent (`recon ops record`). */
import { z } from 'zod';
import { ID_PATTERN } from '../core/intake/validate.js';
import { propose } from './actions.js';
import { payloadSchema } from './payloads.js';
import { actionShape } from './result.js';
import { answer, guarded, type Register } from './tool.js';

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

const input = {
  provider: z.string().min(1).max(100).describe('A provider configured in recon, e.g. "stripe"'),
  action: z.string().min(1).max(64).describe('What the provider is asked to do, e.g. "refund"'),
  operation_id: z
    .string()
    .regex(ID_PATTERN)
    .describe(
      'One id per business action, chosen by you and kept for every later call about it, e.g. "refund:ord_1042". 1-200 of A-Z a-z 0-9 . _ : -',
    ),
  payload: payloadSchema,
  client_reference: z.string().min(1).max(200).optional().describe('Your business reference, e.g. the order id'),
  subject: z.record(z.string(), z.unknown()).optional().describe('Who or what it concerns, e.g. {"customer": "cus_9"}'),
  reason: z
    .string()
    .max(2000)
    .refine((s) => !CONTROL.test(s), 'contains a control character (e.g. NUL); use printable text')
    .optional()
    .describe('Why you propose it, in a sentence; kept in the audit trail'),
};

const output = {
  ...actionShape,
  created: z.boolean().optional().describe('false when this operation_id was already recorded with this payload'),
  approval: z.string().nullable().optional().describe('policy:autoApprove, a person’s reference, or null (waiting)'),
  amount: z.number().nullable().optional(),
  currency: z.string().nullable().optional(),
  held_by: z
    .object({ operation_id: z.string(), state: z.string() })
    .optional()
    .describe('The operation for the same target that holds this one for a person (the re-plan guard)'),
};

export const registerProposeAction: Register = (server, call) => {
  server.registerTool(
    'propose_action',
    {
      title: 'Propose a consequential action (refund, shipment)',
      description:
        'Records an action before anything is sent, with a fixed operation_id and a frozen payload. ' +
        'Small actions within the provider’s autoApprove policy are approved at once (next: execute_action); ' +
        'anything else waits for a person, and you should tell the user so. A proposal for something another ' +
        'operation already acts on (the same payment) waits for a person too. Calling it again with the same ' +
        'operation_id and payload returns the same operation; a changed amount or payload under the same ' +
        'operation_id is refused. Never invent a new operation_id to get around a refusal or an unknown outcome.',
      inputSchema: input,
      outputSchema: output,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async (args) => {
      const c = call();
      return guarded(c, 'propose_action', args.operation_id, async () => answer(await propose(c, args)));
    },
  );
};
