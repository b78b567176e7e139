import type { Operation, ProviderTxn, TxnState } from '../../types.js';
import { isUnresolved } from '../journal/states.js';
import { isLive, txnMismatches } from './match.js';

/** What a set of found transactions says about their operation: `classifyFound`. */
export interface FoundClass {
  /**
   * `duplicate` or `mismatch`: the operation goes to needs_review with that reason (where the state
   * machine lets it: a confirmed operation only for a duplicate). null: the transactions settle it,
   * in `state`.
   */
  review_reason: 'duplicate' | 'mismatch' | null;
  /** The state `txn` shows at the provider; what a clean set moves an unresolved operation to. */
  state: TxnState;
  /** The transaction that decides: the one followed, the first that disagrees, the first live duplicate. */
  txn: ProviderTxn;
  /** What to link: every transaction found, once each (evidence, whatever the verdict; SPEC §4.3 "all linked"). */
  link: ProviderTxn[];
  /** The live transactions found that make a duplicate (more than one, or one with `linkedLive`). */
  liveFound: ProviderTxn[];
  /** Live transactions linked to the operation already, other than those found. */
  linkedLive: string[];
  /** Where `txn` disagrees with the operation (txnMismatches): recorded with a review of either reason. */
  problems: string[];
}

/**
 * Which review reason wins when transactions carrying an operation are found (SPEC §3–§4): the one
 * answer for the rule's lookup (reconcile/rule.ts `decide`), a submit response (attempt/submit.ts
 * `writeResult`, a late one included) and a webhook or a lookup outside the rule (found/apply.ts
 * `decideFound`). Before, each decided on its own and they disagreed: a refund of another amount
 * found while another live refund was linked was `mismatch` for the rule and a submit, `duplicate`
 * for a webhook; and two refunds found by one lookup, one of them failed, were a duplicate for the
 * rule but not when the failed one had been linked by a webhook.
 *
 * In order:
 * 1. Duplicate: more than one live transaction (succeeded or pending; a failed one did nothing)
 *    carries the operation, among those found and those linked already. Duplicate wins over
 *    mismatch: a second side effect has already happened, whatever its amount, and that is what a
 *    person must undo; the disagreement is kept in `problems` (and in the event's detail). It is
 *    also the only reason that may take a `confirmed` operation to review (states.ts), so a
 *    mismatch winning would leave a duplicate refund of a confirmed operation unseen.
 * 2. An operation recon holds as not sent (`approved`) or `failed` while a live transaction
 *    carries it: a side effect it cannot account for. `mismatch` when that transaction disagrees,
 *    else `duplicate` (the word the review queue has used for these since issue 10).
 * 3. Mismatch: a transaction found disagrees with the operation (amount, currency, operation id,
 *    client reference; txnMismatches).
 * 4. Otherwise clean: the state of the one live transaction found, or of a failed one when none is
 *    live (a failed refund next to a succeeded one is one refund, not two).
 *
 * An operation that is not unresolved (approved, or terminal) was judged with what it has linked:
 * for it only a live transaction not linked before counts (a webhook delivered again must not put
 * a person's decision back in review). Transactions are counted once per provider id (an adapter
 * that finds one refund by key and by metadata does not make a duplicate).
 */
export function classifyFound(
  op: Pick<Operation, 'id' | 'state' | 'amount' | 'currency' | 'client_reference'>,
  txns: ProviderTxn[],
  linked: { provider_id: string; state: string }[],
): FoundClass | null {
  const found = uniqueByProviderId(txns);
  if (found.length === 0) return null;
  const linkedIds = new Set(linked.map((t) => t.provider_id));
  const open = isUnresolved(op.state);
  const counted = open ? found : found.filter((t) => isLive(t) && !linkedIds.has(t.provider_id));
  const foundIds = new Set(found.map((t) => t.provider_id));
  const liveFound = counted.filter(isLive);
  const linkedLive = linked.filter((t) => isLive(t) && !foundIds.has(t.provider_id)).map((t) => t.provider_id);
  const base = { link: found, liveFound, linkedLive };
  const disagreeing = counted.find((t) => txnMismatches(op, t).length > 0);

  if (liveFound.length > 1 || (liveFound.length === 1 && linkedLive.length > 0)) {
    const txn = liveFound.find((t) => txnMismatches(op, t).length > 0) ?? liveFound[0];
    return { ...base, review_reason: 'duplicate', state: txn.state, txn, problems: txnMismatches(op, txn) };
  }
  if ((op.state === 'approved' || op.state === 'failed') && liveFound.length === 1) {
    const [txn] = liveFound;
    const problems = txnMismatches(op, txn);
    return { ...base, review_reason: problems.length ? 'mismatch' : 'duplicate', state: txn.state, txn, problems };
  }
  if (disagreeing) {
    return {
      ...base,
      review_reason: 'mismatch',
      state: disagreeing.state,
      txn: disagreeing,
      problems: txnMismatches(op, disagreeing),
    };
  }
  const txn = liveFound[0] ?? counted[0] ?? found[0];
  return { ...base, review_reason: null, state: txn.state, txn, problems: [] };
}

function uniqueByProviderId(txns: ProviderTxn[]): ProviderTxn[] {
  const seen = new Set<string>();
  return txns.filter((t) => !seen.has(t.provider_id) && seen.add(t.provider_id));
}
