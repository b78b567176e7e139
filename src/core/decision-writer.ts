import type { CoreContext } from './context.js';
import type { Applied } from './decision-json.js';
import type { PlannedDecision } from './plan.js';
import { applyDecisions } from './write-decisions.js';

/**
 * Group commit for `recon run`: decisions handed in while a group is being written wait and go
 * together in the next one. A group is written when it is full or `fillMs` after its first
 * decision arrived: against a slow provider decisions trickle in, and writing each alone made one
 * commit (and its WAL flush) per decision; a few milliseconds of waiting fills the group instead.
 */
export function decisionWriter(
  ctx: CoreContext,
  owner: string,
  o: { maxGroup?: number; fillMs?: number } = {},
): (item: PlannedDecision) => Promise<Applied> {
  const maxGroup = o.maxGroup ?? 500;
  const fillMs = o.fillMs ?? 5;
  const queue: { item: PlannedDecision; resolve: (a: Applied) => void }[] = [];
  let writing = false;
  let full: (() => void) | null = null;
  const drain = async () => {
    writing = true;
    try {
      while (queue.length) {
        if (queue.length < maxGroup) {
          // Let the group fill: until it is full, or fillMs have passed.
          await new Promise<void>((resolve) => {
            const timer = setTimeout(() => {
              full = null;
              resolve();
            }, fillMs);
            full = () => {
              clearTimeout(timer);
              full = null;
              resolve();
            };
          });
        }
        const group = queue.splice(0, maxGroup);
        const results = await applyDecisions(
          ctx,
          group.map((g) => g.item),
          owner,
        );
        group.forEach((g, k) => g.resolve(results[k]));
      }
    } finally {
      writing = false;
    }
  };
  return (item) =>
    new Promise<Applied>((resolve) => {
      queue.push({ item, resolve });
      if (!writing) void drain();
      else if (full && queue.length >= maxGroup) full();
    });
}
