/**
 * The `http` provider mapping (SPEC §6's `warehouse` example) that talks to this sandbox, for the
 * demo, the tests and anyone trying recon against `recon sandbox warehouse`.
 */
export function warehouseProviderConfig(
  baseUrl: string,
  token: string,
  overrides: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    type: 'http',
    baseUrl,
    headers: { Authorization: `Bearer ${token}` },
    idempotencyHeader: 'Idempotency-Key',
    submit: { method: 'POST', path: '/v1/shipments' },
    lookup: { method: 'GET', path: '/v1/shipments?client_reference={client_reference}', list: 'data' },
    get: { path: '/v1/shipments/{id}' },
    fields: { id: 'id', status: 'status', idempotencyKey: 'idempotency_key', clientReference: 'client_reference' },
    status: { confirmed: ['created', 'shipped'], pending: ['processing'], failed: ['rejected'] },
    lookupAuthoritative: false,
    keyRetention: '7d',
    ...overrides,
  };
}
