/**
 * What every recon tool answers (SPEC §9): `{operation_id, state, provider_txn_ids, message, next}`,
 * as `structuredContent` and the same JSON as text. `message` is one fixed sentence per state, so an
 * agent is told the same truth every time; `next` names the one tool to call next, or `none`.
 * No message says "failed" unless the operation is `failed`: a model that reads "failed" clicks again.
 */
import { z } from 'zod';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { STATES, type Operation, type State } from '../types.js';

const NEXT_TOOLS = ['propose_action', 'execute_action', 'check_action', 'get_action', 'none'] as const;
export type NextTool = (typeof NEXT_TOOLS)[number];

/** The README lists these; change them there too. */
export const STATE_MESSAGES: Record<State, string> = {
  proposed:
    'Recorded, not sent. A person must approve it first (recon ops approve); until then execute_action is refused. Tell the user it waits for approval; ask again with get_action.',
  approved: 'Approved, not sent yet. Call execute_action once to send it.',
  submitting: 'The request is with the provider right now. Do not try again; ask with check_action in a moment.',
  pending: 'The provider accepted it and has not finished it yet. Do not try again; ask with check_action later.',
  outcome_unknown:
    'The provider may have done it: the request ended without an answer, and recon has not found out yet. Do not try again; ask with check_action.',
  needs_review:
    'A person must decide what happened before anything more is done (see review_reason). Do not try again or propose it anew; tell the user it is under review.',
  confirmed: 'Done: the provider confirms it happened (see provider_txn_ids). Do not do it again.',
  failed:
    'Failed: the provider conclusively did not do it, so nothing happened. Doing it after all is a new action with a new operation_id.',
  cancelled: 'Cancelled: it will not happen. Nothing more to do.',
};

export const NEXT: Record<State, NextTool> = {
  proposed: 'get_action',
  approved: 'execute_action',
  submitting: 'check_action',
  pending: 'check_action',
  outcome_unknown: 'check_action',
  needs_review: 'none',
  confirmed: 'none',
  failed: 'none',
  cancelled: 'none',
};

/** The fields every single-operation result carries; tools add their own, all optional (a refusal has only these). */
export const actionShape = {
  operation_id: z.string().describe('The operation this result is about'),
  state: z.enum(STATES).nullable().describe('The operation state in recon; null when no such operation is recorded'),
  provider_txn_ids: z
    .array(z.string())
    .describe("The provider's transaction ids linked to it (e.g. Stripe refund ids)"),
  message: z.string().describe('What this means and what to do, one fixed sentence per state'),
  next: z.enum(NEXT_TOOLS).describe('The tool to call next, or none'),
  review_reason: z.string().nullable().optional(),
  refused: z
    .object({ rule: z.string(), reason: z.string(), field: z.string().optional() })
    .optional()
    .describe('Present when the call was refused (isError): the rule and why; nothing was sent'),
};

export type ActionResult = z.infer<z.ZodObject<typeof actionShape>>;

/** The common fields for an operation as it is now. */
export function describeState(op: Operation, txnIds: string[]): ActionResult {
  return {
    operation_id: op.id,
    state: op.state,
    provider_txn_ids: txnIds,
    message: STATE_MESSAGES[op.state],
    next: NEXT[op.state],
    review_reason: op.review_reason,
  };
}

/** A refusal: the operation as it is (or null), why, and what to do instead. */
export function refusal(
  operationId: string,
  op: Operation | null,
  txnIds: string[],
  rule: string,
  reason: string,
  next: NextTool,
): ActionResult {
  return {
    operation_id: operationId,
    state: op?.state ?? null,
    provider_txn_ids: txnIds,
    message: reason,
    next,
    review_reason: op?.review_reason ?? null,
    refused: { rule, reason },
  };
}

/** `structuredContent` plus the same JSON as text, for clients that read only text. */
export function toolResult<T extends Record<string, unknown>>(structured: T, isError = false): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(structured, null, 2) }],
    structuredContent: structured,
    ...(isError ? { isError: true } : {}),
  };
}

/**
 * Provider and rule explanations are written for operators ("the lookup failed: ECONNRESET"); an
 * agent told "failed" about an operation that is not `failed` may act on the word. Such a text is
 * left out; the state message says what the agent needs.
 */
export function forAgent(text: string | undefined, state: State | null): string | undefined {
  if (text === undefined) return undefined;
  return state !== 'failed' && /fail/i.test(text) ? undefined : text;
}

/** The refusal for an operation id nothing is recorded under: the agent proposes it first. */
export function notRecorded(operationId: string, reason: string): ActionResult {
  return refusal(operationId, null, [], 'not_found', reason, 'propose_action');
}
