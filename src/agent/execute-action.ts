/**
 * `execute_action`: the first attempt of an approved operation (`recon ops submit`). For an
 * operation that already has an attempt it sends nothing and answers with the current state: the
 * second click is a status question (SPEC §9).
 */
import { z } from 'zod';
import { submitOperation } from '../core/submit.js';
import { ID_PATTERN } from '../core/validate.js';
import { RefusedError, UsageError } from '../errors.js';
import { auditCall } from './audit.js';
import { currentOperation } from './context.js';
import { actionShape, describeState, refusal, toolResult, notRecorded } from './result.js';
import { guarded, type Register } from './tool.js';

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
      return guarded(c, 'execute_action', id, async () => {
        const found = await currentOperation(c.ctx.db, id);
        if (!found)
          return toolResult(
            notRecorded(
              id,
              `Refused: no operation ${id} is recorded, so nothing was sent. Record it first with propose_action.`,
            ),
            true,
          );
        const { op, txnIds } = found;
        if (op.state === 'proposed') {
          await auditCall(c.ctx, [id], { tool: 'execute_action', sent: false, refused: 'approval_required' });
          return toolResult(
            refusal(
              id,
              op,
              txnIds,
              'approval_required',
              `Refused: ${id} waits for a person to approve it (recon ops approve ${id} --ref REF); nothing was sent. ` +
                'Tell the user it needs approval, and ask again with get_action later.',
              'get_action',
            ),
            true,
          );
        }
        if (op.state !== 'approved' || op.attempt_count > 0) return status(c, id, found);
        let provider;
        try {
          provider = await c.agent.provider(op.provider);
        } catch (err) {
          if (!(err instanceof UsageError)) throw err;
          await auditCall(c.ctx, [id], { tool: 'execute_action', sent: false, refused: 'provider_not_configured' });
          return toolResult(
            refusal(
              id,
              op,
              txnIds,
              'provider_not_configured',
              `Refused: provider ${op.provider} is not usable by this recon server (${err.message}); nothing was sent. ` +
                'Tell the user; an operator must fix the configuration.',
              'none',
            ),
            true,
          );
        }
        let submitted;
        try {
          submitted = await submitOperation(c.ctx, provider, id);
        } catch (err) {
          if (err instanceof UsageError) {
            // The adapter refused the payload before sending anything; the claim was rolled back.
            await auditCall(c.ctx, [id], { tool: 'execute_action', sent: false, refused: 'invalid_payload' });
            const now = (await currentOperation(c.ctx.db, id))!;
            return toolResult(
              refusal(
                id,
                now.op,
                now.txnIds,
                'invalid_payload',
                `Refused: ${err.message}. Nothing was sent. This action cannot be sent as recorded; tell the user.`,
                'none',
              ),
              true,
            );
          }
          // Another call claimed it first (two clients, one click each): theirs is the attempt.
          // (Or the payload no longer matches its hash: then it is needs_review, and the state says so.)
          if (!(err instanceof RefusedError)) throw err;
          return status(c, id, (await currentOperation(c.ctx.db, id))!);
        }
        const after = (await currentOperation(c.ctx.db, id))!;
        await auditCall(c.ctx, [id], { tool: 'execute_action', sent: true, attempt: submitted.attempt });
        return toolResult({
          ...describeState(after.op, after.txnIds),
          sent: true,
          attempt: submitted.attempt,
          attempt_count: after.op.attempt_count,
        });
      });
    },
  );
};

/** The second click: nothing is sent; the answer is the state. */
async function status(
  c: Parameters<typeof guarded>[0],
  id: string,
  found: NonNullable<Awaited<ReturnType<typeof currentOperation>>>,
) {
  await auditCall(c.ctx, [id], { tool: 'execute_action', sent: false, already_attempted: found.op.attempt_count > 0 });
  const now = (await currentOperation(c.ctx.db, id)) ?? found;
  return toolResult({ ...describeState(now.op, now.txnIds), sent: false, attempt_count: now.op.attempt_count });
}
