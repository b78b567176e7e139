import type { CoreContext } from '../journal/context.js';
import type { Applied } from '../journal/decision-json.js';
import type { PlannedDecision } from './plan.js';
import { applyDecisions } from './write-decisions.js';

export interface DecisionWriterOptions {
  /** Decisions per group (one statement, one commit). Default 500. */
  maxGroup?: number;
  /** How long the oldest waiting decision waits for its group to fill. Default 50 ms. */
  fillMs?: number;
  /** Groups being written at once. Default 2. */
  inFlight?: number;
}

/**
 * Group commit for `recon run`: decisions handed in while groups are being written wait and go
 * together in the next one. A group is written when it is full or `fillMs` after its oldest
 * decision arrived: against a slow provider decisions trickle in, and writing each alone made one
 * statement and one commit (its WAL flush) per decision. At 100 lookups/s, 5 ms of waiting still
 * wrote one decision per group, and those statements were a third of recon's own CPU per operation
 * (npm run bench, reconcile); 50 ms fills groups of five there, and costs a pass nothing (the
 * decisions wait under their leases; lookups go on meanwhile: runPass starts the next batch's when
 * this batch's lookups, not its writes, are nearly done).
 *
 * Up to `inFlight` groups are written at once (each on its own pooled connection; their
 * operations are distinct, so they never wait on each other's row locks): with one, every decision
 * made during a commit's WAL flush waited for it, and a pass against a fast provider spent most of
 * its time waiting for the store (npm run bench, claims).
 */
export function decisionWriter(
  ctx: CoreContext,
  owner: string,
  o: DecisionWriterOptions = {},
): (item: PlannedDecision) => Promise<Applied> {
  const maxGroup = o.maxGroup ?? 500;
  const fillMs = o.fillMs ?? 50;
  const maxInFlight = o.inFlight ?? 2;
  const queue: { item: PlannedDecision; at: number; resolve: (a: Applied) => void }[] = [];
  let writing = 0;
  let filling = false;
  let full: (() => void) | null = null;

  const pump = async (): Promise<void> => {
    if (filling || writing >= maxInFlight || queue.length === 0) return;
    const wait = fillMs - (performance.now() - queue[0].at);
    if (queue.length < maxGroup && wait > 0) {
      // Let the group fill: until it is full, or its oldest decision has waited fillMs.
      filling = true;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          full = null;
          resolve();
        }, wait);
        full = () => {
          clearTimeout(timer);
          full = null;
          resolve();
        };
      });
      filling = false;
    }
    const group = queue.splice(0, maxGroup);
    writing++;
    void applyDecisions(
      ctx,
      group.map((g) => g.item),
      owner,
    )
      // applyDecisions answers each item and never throws; should it all the same, each caller hears of it.
      .catch((err: unknown) => group.map(() => ({ ok: false as const, error: err as Error })))
      .then((results) => group.forEach((g, k) => g.resolve(results[k])))
      .finally(() => {
        writing--;
        void pump();
      });
    if (queue.length) void pump();
  };

  return (item) =>
    new Promise<Applied>((resolve) => {
      queue.push({ item, at: performance.now(), resolve });
      if (full && queue.length >= maxGroup) full();
      else void pump();
    });
}
