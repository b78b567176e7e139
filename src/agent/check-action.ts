/**
 * `check_action`: one reconciliation step for one operation (SPEC §4), the code `recon retry` and
 * `recon run` use: a fresh provider lookup, the rule, and its decision written with the evidence. A
 * retry happens only where the rule allows it, with the original key and payload.
 */
import { z } from 'zod';
import { reconcileById } from '../core/reconcile.js';
import { isInFlight, isReconcilable } from '../core/states.js';
import { ID_PATTERN } from '../core/validate.js';
import { UsageError } from '../errors.js';
import type { DecisionKind } from '../types.js';
import { auditCall } from './audit.js';
import { currentOperation } from './context.js';
import { actionShape, describeState, forAgent, refusal, toolResult, notRecorded } from './result.js';
import { guarded, type Register } from './tool.js';

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
      return guarded(c, 'check_action', id, async () => {
        const found = await currentOperation(c.ctx.db, id);
        if (!found) return toolResult(notRecorded(id, `No operation ${id} is recorded; nothing to check.`), true);
        const inFlight = isInFlight(found.op, c.ctx.now());
        let decision = null;
        if (isReconcilable(found.op.state) && !inFlight) {
          let provider;
          try {
            provider = await c.agent.provider(found.op.provider);
          } catch (err) {
            if (!(err instanceof UsageError)) throw err;
            await auditCall(c.ctx, [id], { tool: 'check_action', checked: false, refused: 'provider_not_configured' });
            return toolResult(
              refusal(
                id,
                found.op,
                found.txnIds,
                'provider_not_configured',
                `Refused: provider ${found.op.provider} is not usable by this recon server (${err.message}). ` +
                  'Do not try the action again; tell the user an operator must fix the configuration.',
                'none',
              ),
              true,
            );
          }
          // null: another worker (recon run, another agent) holds it right now; its answer is the one to wait for.
          const d = await reconcileById(c.ctx, provider, id);
          if (d) decision = { decision: d.decision, rule: d.rule, explanation: d.explanation };
        }
        const now = (await currentOperation(c.ctx.db, id))!;
        await auditCall(c.ctx, [id], {
          tool: 'check_action',
          checked: decision !== null,
          rule: decision?.rule ?? null,
        });
        const explanation = forAgent(decision?.explanation, now.op.state);
        return toolResult({
          ...describeState(now.op, now.txnIds),
          checked: decision !== null,
          decision: decision && {
            decision: decision.decision,
            rule: decision.rule,
            ...(explanation ? { explanation } : {}),
          },
        });
      });
    },
  );
};
