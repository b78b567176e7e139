import type { Provider, ProviderTxn } from '../../src/types.js';

/** A succeeded 5.00 USD refund with no recon metadata, created at `created`; `o` overrides any field. */
export function listedRefund(id: string, created: Date, o: Partial<ProviderTxn> = {}): ProviderTxn {
  return {
    provider_id: id,
    status: 'succeeded',
    state: 'confirmed',
    amount: 500,
    currency: 'usd',
    operation_id: null,
    client_reference: null,
    group: null,
    created,
    ...o,
  };
}

/**
 * A provider that only lists (what `audit duplicates` and `stats` read), with the given ledger as
 * one page; every other call fails, so a test that reaches one is told.
 */
export function listingProvider(ledger: ProviderTxn[], name = 'stripe'): Provider {
  return {
    name,
    type: 'fake',
    capabilities: {} as Provider['capabilities'],
    submit: () => Promise.reject(new Error('not used')),
    lookup: () => Promise.reject(new Error('not used')),
    get: () => Promise.reject(new Error('not used')),
    async *list(range) {
      range.onPage?.({ page: 1, items: ledger.length });
      yield* ledger;
    },
  };
}
