/**
 * Runs PGlite's compiled PostgreSQL on V8's baseline WebAssembly compiler (Liftoff) only, without
 * tiering hot functions up to the optimizing one (TurboFan). For a process that opens the store, does
 * a few queries and exits: tier-up compiles PostgreSQL's hot functions on background threads that
 * compete with the main thread for the cores while the store starts, and Node waits for those
 * compilations to finish before it exits (~0.2 s after the work is done, here). A one-shot command
 * on the embedded store ends ~30% sooner this way (`ops list` on an empty store, `stats` and
 * `ops list` on 100k operations, the demo); optimized code wins only in minutes of heavy querying,
 * so a server (`recon mcp`, `recon webhook serve`) keeps V8's default. Process-wide, worker threads
 * included: set before the first store's WebAssembly is compiled (a module compiled before keeps
 * its tiering). A module of its own so that the demo's store thread (thread.ts), started before the
 * CLI loads, sets it without loading the store's code.
 */
import { setV8Flags } from '../lib/bundled.js';

/** Both, at once: without dynamic tiering, --no-wasm-tier-up alone tiers every function up eagerly. */
export const BASELINE_WASM_FLAGS = '--no-wasm-dynamic-tiering --no-wasm-tier-up';

export function setBaselineWasm(): void {
  setV8Flags(BASELINE_WASM_FLAGS);
}
