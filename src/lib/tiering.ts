import { setV8Flags } from './bundled.js';

/**
 * V8 optimizes a function (TurboFan, on a background thread) once it has run a budget of bytecode;
 * eight times V8's default budget (67,584) here. For `recon run`, a pass that starts, decides a batch
 * and exits: with V8's default, TurboFan compiled ~100 functions in a pass over 3,000 operations
 * (node --trace-opt), on background threads that take the cores from the pass, PostgreSQL and the
 * provider, for code the process ends soon after. With this budget only the hottest code is
 * optimized: a pass over 3,000 operations used ~15% less CPU in all (8 interleaved pairs, twice:
 * median ratio 0.84 and 0.85; the same budget set back to the default: 1.03) in the same wall time;
 * over 12,000 operations in one process, 5% less CPU and 5% more wall time. Servers (`recon
 * mcp`, `webhook serve`) run for hours and keep V8's default: there the optimized code pays back
 * (webhook serve with this budget: ~20% more CPU per delivery over a 22,000-event storm).
 */
export const LATE_TIERING_FLAGS = '--interrupt-budget=540672';

/** Process-wide; call it before the bundles load (their code caches are made under these flags too, scripts/vendor.mjs). */
export function useLateTiering(): void {
  setV8Flags(LATE_TIERING_FLAGS);
}
