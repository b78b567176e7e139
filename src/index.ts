/**
 * recon as a library, for applications that record operations before calling the provider.
 * In one call (the MCP tools' answers and refusals):
 *
 *   const recon = await openRecon();
 *   const r = await recon.act({ id, provider: 'stripe', action: 'refund', payload, approval, client_reference });
 *   await recon.close();
 *
 * And the same functions the CLI uses:
 *
 *   const db = await openStore('postgres://recon@db/ops');
 *   const ctx = { db, actor: 'checkout-service', now: () => new Date() };
 *   const config = await loadConfig({ env: process.env, cwd: process.cwd() });
 *   await recordOperations(ctx, [validateOperation(input, Object.keys(config.providers))]);
 *   const stripe = await createProvider('stripe', config);
 *   const { operation } = await submitOperation(ctx, stripe, input.id);
 */
export { openRecon, type Recon, type ReconAnswer, type ActInput, type OpenReconOptions } from './agent/recon.js';
export type { StripeRefundPayload } from './agent/payloads.js';
export { openStore, resolveStoreUrl } from './store/open.js';
export type { Db, Queryable } from './store/db.js';
export { migrate, schemaStatus } from './store/migrate.js';
export { loadConfig, parseConfig } from './config/load.js';
export type { LoadedConfig } from './config/types.js';
export { createProvider } from './providers/index.js';
export { validateOperation, parseOperationsText, type OperationInput } from './core/intake/validate.js';
export { recordOperations, type RecordedOperation } from './core/intake/record.js';
export { approveOperation } from './core/intake/approve.js';
export { submitOperation } from './core/attempt/submit.js';
export { runPass, type RunOptions, type RunSummary } from './core/reconcile/run.js';
export { decide, type RuleInput } from './core/reconcile/rule.js';
export { showOperation, operationsJson } from './core/journal/views.js';
export { listOperations, getOperation } from './core/journal/operations.js';
export { verifyChains } from './core/audit/verify.js';
export { resolveAuditKey } from './config/audit-key.js';
export type { AuditKey } from './lib/keyed-hash.js';
export type { CoreContext } from './core/journal/context.js';
export * from './types.js';
export * from './errors.js';
