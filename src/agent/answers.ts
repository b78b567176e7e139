/**
 * The words recon answers with, for the MCP tools and for `openRecon().act()` alike (SPEC §9): one
 * source, so an agent and an application are told the same truth. Amounts in major units with the
 * currency ("25.00 USD"); JSON fields stay in minor units. An answer about an operation that already
 * happened, or may have, says what happened and "do not do it again", and never suggests a new
 * operation_id: a model that follows that advice makes the second refund recon exists to prevent.
 */
import type { Holder } from '../core/intake/replan.js';
import { formatAmount } from '../lib/money.js';
import type { Operation, State } from '../types.js';

type Described = Pick<Operation, 'id' | 'provider' | 'action' | 'amount' | 'currency' | 'state'>;

/** "a refund of 25.00 USD", "a stripe refund", "a warehouse shipment.create". */
function whatOf(op: Described): string {
  const amount = formatAmount(op.amount, op.currency);
  const action = op.action === 'refund' ? 'refund' : `${op.provider} ${op.action}`;
  return `a ${action}${amount ? ` of ${amount}` : ''}`;
}

function verbOf(op: Described): string {
  return op.action === 'refund' ? 'refund' : 'do it';
}

/** The provider's transaction ids in parentheses after the state: "(confirmed, re_123)". */
function stateAndTxns(state: State, txnIds: string[]): string {
  return `(${[state, ...txnIds].join(', ')})`;
}

/** States in which the action happened or may have: nothing under any id may repeat it. */
const ALREADY: readonly State[] = ['submitting', 'pending', 'outcome_unknown', 'confirmed'];

/**
 * What already happened to an operation, for a refusal about it (a changed amount under its id, a
 * re-plan held by it). null when nothing was sent or it conclusively did not happen.
 */
export function alreadyHappened(op: Described, txnIds: string[]): string | null {
  if (!ALREADY.includes(op.state)) return null;
  const amount = formatAmount(op.amount, op.currency);
  const verb = verbOf(op);
  const where = stateAndTxns(op.state, txnIds);
  switch (op.state) {
    case 'confirmed':
      return op.action === 'refund'
        ? `Already refunded${amount ? ` ${amount}` : ''} to this customer ${where} under ${op.id}. Do not refund again.`
        : `Already done: ${whatOf(op)} ${where} under ${op.id}. Do not ${verb} again.`;
    case 'pending':
      return `${cap(whatOf(op))} was already accepted by the provider ${where} under ${op.id} and is completing. Do not ${verb} again.`;
    case 'submitting':
      return `${cap(whatOf(op))} is being sent to the provider right now under ${op.id} ${where}. Do not ${verb} again; ask with check_action ${op.id}.`;
    default:
      return `${cap(whatOf(op))} was already sent under ${op.id} and the provider may have done it ${where}. Do not ${verb} again; ask with check_action ${op.id}.`;
  }
}

function cap(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** The refusal of a changed payload, provider, action, client_reference or subject under a recorded id. */
export function frozenText(existing: Described, txnIds: string[], changed: string): string {
  const done = alreadyHappened(existing, txnIds);
  if (done) return `Refused: ${done} Nothing was recorded or sent by this call.`;
  const recorded = `${existing.id} is already recorded as ${whatOf(existing)} (state ${existing.state})`;
  if (existing.state === 'needs_review')
    return (
      `Refused: ${recorded}; a person is deciding what happened to it. Nothing was recorded or sent. ` +
      'Do not propose it again under any operation_id; tell the user it is under review.'
    );
  if (existing.state === 'failed' || existing.state === 'cancelled')
    return (
      `Refused: ${recorded}; it did not happen, but an operation_id keeps the action it was recorded with (${changed}). ` +
      'Nothing was recorded or sent. If the user still wants the action, propose it with a new operation_id.'
    );
  return (
    `Refused: ${recorded}, not sent yet; the same operation_id cannot carry a changed ${changed}. Nothing was recorded or sent. ` +
    `Follow the recorded one with get_action ${existing.id}; to change it, tell the user a person must cancel it first.`
  );
}

/** A proposal the re-plan guard held: it waits for a person, and says what holds it. */
export function heldMessage(proposed: Described, holder: Holder, holderOp: Described | null, txnIds: string[]): string {
  const done = holderOp ? alreadyHappened(holderOp, txnIds) : null;
  return (
    `Recorded, not approved, not sent: ${holder.id} (${holder.state}) acts on the same target. ` +
    (done ? `${done} ` : '') +
    `${proposed.id} waits for a person to decide whether a second ${proposed.action === 'refund' ? 'refund' : 'action'} is intended. ` +
    'Do not propose it again under another operation_id; tell the user it waits for a person.'
  );
}

/** "in 19s" as the CLI prints it, for a result that must wait: the time and the seconds until it. */
export function retryAfter(at: Date, now: Date): { at: string; seconds: number } {
  return { at: at.toISOString(), seconds: Math.max(0, Math.ceil((at.getTime() - now.getTime()) / 1000)) };
}

/** The outcome_unknown answer when check_action found nothing yet and must wait. */
export function waitText(id: string, after: { at: string; seconds: number }): string {
  return (
    `The provider may have done it: nothing is found yet, and recon cannot decide before ${after.at} (in ${after.seconds}s). ` +
    `Do not try again; ask again with check_action ${id} after that time.`
  );
}
