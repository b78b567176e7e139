/**
 * The operations this server has just recorded approved (propose_action), as their claim checks them
 * (ClaimView): execute_action, the agent's next call, claims on that write instead of reading the row
 * back (one statement fewer on its way to the provider: issue 28, the agents rows).
 *
 * Nothing here is trusted beyond what the claim checks anyway: the claim is written only on the row
 * version the insert returned (Move.attempt.rowVersion, checked under the row lock) and chained after
 * the head the insert wrote (an event appended since takes the seq it needs), so a row changed since
 * (approved by a person, cancelled, its payload changed behind recon's back, claimed by another
 * server) writes nothing, and the long way (lock, read, checks) decides, as after any read. A view is
 * taken once (the execute_action that uses it), lives at most VIEW_TTL_MS, and at most MAX_VIEWS are
 * kept (the oldest go first): a proposal never executed costs nothing for long.
 */
import type { ClaimView } from '../core/attempt/claims.js';
import type { Agent } from './context.js';

const MAX_VIEWS = 256;
const VIEW_TTL_MS = 60_000;

interface Kept {
  view: ClaimView;
  at: number;
}

const byAgent = new WeakMap<Agent, Map<string, Kept>>();

/** Keeps `view` (an operation the caller's transaction created approved, and has committed) for the next execute_action on it. */
export function keepJustRecorded(agent: Agent, view: ClaimView): void {
  let views = byAgent.get(agent);
  if (!views) byAgent.set(agent, (views = new Map<string, Kept>()));
  const at = performance.now();
  views.delete(view.op.id);
  views.set(view.op.id, { view, at });
  // Oldest first (the map's order): the expired, then any beyond the bound. A payload is at most
  // 64 KiB, so what is kept is bounded (~16 MB at worst) and let go a minute after it was proposed.
  for (const [id, kept] of views) {
    if (views.size <= MAX_VIEWS && at - kept.at <= VIEW_TTL_MS) break;
    views.delete(id);
  }
}

/** The view kept for `id`, once; undefined when there is none (or it is too old). */
export function takeJustRecorded(agent: Agent, id: string): ClaimView | undefined {
  const views = byAgent.get(agent);
  const kept = views?.get(id);
  if (!kept) return undefined;
  views!.delete(id);
  return performance.now() - kept.at <= VIEW_TTL_MS ? kept.view : undefined;
}

/** How many views are kept for `agent` (tests). */
export function justRecordedCount(agent: Agent): number {
  return byAgent.get(agent)?.size ?? 0;
}
