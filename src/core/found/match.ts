import { formatAmount } from '../../lib/money.js';
import type { Operation, ProviderTxn } from '../../types.js';

/**
 * Fields on which a provider transaction contradicts the operation it is linked to: the one check
 * behind a lookup's match (the rule), a submit response, a webhook, `attach` and `review resolve`.
 * Compared only when both sides know the value: an http provider whose mapping has no amount
 * cannot contradict one. The subject has no provider-side counterpart in ProviderTxn, so it is not
 * compared here.
 */
export function txnMismatches(
  op: Pick<Operation, 'id' | 'amount' | 'currency' | 'client_reference'>,
  txn: ProviderTxn,
): string[] {
  const out: string[] = [];
  if (op.amount !== null && txn.amount !== null && op.amount !== txn.amount) {
    // In major units with the currency, as a person reads them ("80.03 USD vs 79.03 USD").
    out.push(
      `amount (${formatAmount(txn.amount, txn.currency ?? op.currency)} vs ${formatAmount(op.amount, op.currency)})`,
    );
  }
  if (op.currency !== null && txn.currency !== null && op.currency.toLowerCase() !== txn.currency.toLowerCase()) {
    out.push(`currency (${txn.currency} vs ${op.currency})`);
  }
  if (txn.operation_id !== null && txn.operation_id !== op.id) {
    out.push(`operation id (${txn.operation_id} vs ${op.id})`);
  }
  if (op.client_reference !== null && txn.client_reference !== null && op.client_reference !== txn.client_reference) {
    out.push(`client reference (${txn.client_reference} vs ${op.client_reference})`);
  }
  return out;
}

/**
 * A live transaction: one that did or may still do the side effect (succeeded or pending). A
 * failed one did nothing, so it never counts as a second refund.
 */
export function isLive(txn: { state: string }): boolean {
  return txn.state !== 'failed';
}
