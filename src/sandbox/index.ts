/** The sandbox providers recon's tests, benchmarks, `recon demo` and `recon sandbox` start. */
export { startStripeSandbox, stripeSandboxSummary } from './stripe/server.js';
export type { StripeSandbox, StripeSandboxOptions, Refund, StripeEvent } from './stripe/server.js';
export { startWarehouseSandbox, warehouseSandboxSummary } from './warehouse/server.js';
export type { WarehouseSandbox, WarehouseSandboxOptions, Shipment } from './warehouse/server.js';
export type { Fault, FaultQueue, InjectOptions } from './faults.js';
