/** `propose_action`: records what the agent wants done, before anything is sent (`recon ops record`). */
import { z } from 'zod';
import { approvalByPolicy } from '../core/approve.js';
import { recordOperations } from '../core/record.js';
import { ID_PATTERN, validateOperation } from '../core/validate.js';
import { RefusedError, UsageError } from '../errors.js';
import { validatePayloads } from '../providers/validate.js';
import { auditCall } from './audit.js';
import { currentOperation } from './context.js';
import { actionShape, describeState, refusal, toolResult } from './result.js';
import { guarded, type Register } from './tool.js';

const input = {
  provider: z.string().describe('A provider configured in recon, e.g. "stripe"'),
  action: z.string().describe('What the provider is asked to do, e.g. "refund"'),
  operation_id: z
    .string()
    .regex(ID_PATTERN)
    .describe(
      'One id per business action, chosen by you and kept for every later call about it, e.g. "refund:ord_1042". 1-200 of A-Z a-z 0-9 . _ : -',
    ),
  payload: z
    .record(z.string(), z.unknown())
    .describe(
      'Exactly what the provider is asked to do. Stripe refund: {payment_intent or charge, amount (minor units), currency, reason?}',
    ),
  client_reference: z.string().optional().describe('Your business reference, e.g. the order id'),
  subject: z.record(z.string(), z.unknown()).optional().describe('Who or what it concerns, e.g. {"customer": "cus_9"}'),
  reason: z.string().max(2000).optional().describe('Why you propose it, in a sentence; kept in the audit trail'),
};

const output = {
  ...actionShape,
  created: z.boolean().optional().describe('false when this operation_id was already recorded with this payload'),
  approval: z.string().nullable().optional().describe('policy:autoApprove, a person’s reference, or null (waiting)'),
  amount: z.number().nullable().optional(),
  currency: z.string().nullable().optional(),
};

export const registerProposeAction: Register = (server, call) => {
  server.registerTool(
    'propose_action',
    {
      title: 'Propose a consequential action (refund, shipment)',
      description:
        'Records an action before anything is sent, with a fixed operation_id and a frozen payload. ' +
        'Small actions within the provider’s autoApprove policy are approved at once (next: execute_action); ' +
        'anything else waits for a person, and you should tell the user so. Calling it again with the same ' +
        'operation_id and payload returns the same operation; a changed amount or payload under the same ' +
        'operation_id is refused. Never invent a new operation_id to get around a refusal or an unknown outcome.',
      inputSchema: input,
      outputSchema: output,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async (args) => {
      const c = call();
      return guarded(c, 'propose_action', args.operation_id, async () => {
        const providers = [...Object.keys(c.agent.config.providers), ...Object.keys(c.agent.config.unavailable ?? {})];
        let op;
        try {
          op = validateOperation(
            {
              id: args.operation_id,
              provider: args.provider,
              action: args.action,
              payload: args.payload,
              client_reference: args.client_reference,
              subject: args.subject,
            },
            providers,
          );
          // What the provider could never send is refused now, as `recon ops record` does.
          await validatePayloads(c.agent.config, [op]);
        } catch (err) {
          if (!(err instanceof UsageError)) throw err;
          const existing = await currentOperation(c.ctx.db, args.operation_id);
          if (existing)
            await auditCall(c.ctx, [args.operation_id], {
              tool: 'propose_action',
              refused: 'invalid_input',
              reason: args.reason ?? null,
            });
          return toolResult(
            refusal(
              args.operation_id,
              existing?.op ?? null,
              existing?.txnIds ?? [],
              'invalid_input',
              `Refused: ${err.message}. Nothing was recorded or sent; fix the input and propose again.`,
              'propose_action',
            ),
            true,
          );
        }
        op.approval = approvalByPolicy(c.agent.config.providers[op.provider]?.autoApprove, op);
        try {
          const [recorded] = await recordOperations(c.ctx, [op]);
          await auditCall(c.ctx, [op.id], {
            tool: 'propose_action',
            created: recorded.created,
            reason: args.reason ?? null,
          });
          const now = (await currentOperation(c.ctx.db, op.id))!;
          return toolResult({
            ...describeState(now.op, now.txnIds),
            created: recorded.created,
            approval: now.op.approval,
            amount: now.op.amount,
            currency: now.op.currency,
          });
        } catch (err) {
          if (!(err instanceof RefusedError) || err.rule !== 'payload_frozen') throw err;
          const existing = await currentOperation(c.ctx.db, op.id);
          const e = existing?.op;
          await auditCall(c.ctx, [op.id], {
            tool: 'propose_action',
            refused: 'payload_frozen',
            reason: args.reason ?? null,
            proposed: { provider: op.provider, action: op.action, amount: op.amount, currency: op.currency },
          });
          const what = e
            ? `${e.provider} ${e.action}${e.amount !== null ? ` of ${e.amount} ${e.currency ?? ''}`.trimEnd() : ''} (state ${e.state})`
            : 'another action';
          return toolResult(
            {
              ...refusal(
                op.id,
                e ?? null,
                existing?.txnIds ?? [],
                'payload_frozen',
                `Refused: ${op.id} is already recorded as ${what}; the same operation_id cannot carry a changed amount or payload. ` +
                  'Nothing was recorded or sent. If the user really wants a different action, propose it with a new operation_id; ' +
                  `to follow the recorded one, call get_action ${op.id}.`,
                'get_action',
              ),
              amount: e?.amount ?? null,
              currency: e?.currency ?? null,
            },
            true,
          );
        }
      });
    },
  );
};
