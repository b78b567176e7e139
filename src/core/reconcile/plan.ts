import type { Decision, LookupResult, Operation, Provider } from '../../types.js';
import type { ChainHead } from '../journal/chain.js';
import { payloadHash } from '../../lib/canonical.js';
import type { CoreContext } from '../journal/context.js';
import type { History } from '../journal/history.js';
import type { Move } from '../journal/transition.js';
import { backoffDelay } from '../../lib/ratelimit.js';
import { decide } from './rule.js';
import { judgedState } from '../journal/states.js';

/** What the rule decided for one claimed operation, ready to be written. */
export interface PlannedDecision {
  /** The operation as the rule saw it (its state is re-checked under the row lock). */
  op: Operation;
  provider: string;
  lookup: LookupResult;
  /** The rule's decision (`ruling.decision` is its kind: confirm, fail, wait, …). */
  ruling: Decision;
  /** `unavailable`: when to look again (the provider is backed off until then). */
  nextCheckAt: Date | null;
  /** The chain head read with the history, when it was (see History.head). */
  head?: ChainHead;
  /**
   * When the rule judged (the lookup had answered): the observation's time, so that a window the
   * rule counts from this lookup (`retry_at`) starts where the stored observation says. Default:
   * when written.
   */
  at?: Date;
  /** An event written with the decision, in its statement (Move.note): the `mcp.call` of the check that made it. */
  note?: Move['note'];
}

/** Runs the rule (a pure function of what it is given and the clock) and plans the write. */
export function planDecision(
  ctx: CoreContext,
  provider: Provider,
  op: Operation,
  lookup: LookupResult,
  history: History,
): PlannedDecision {
  const now = ctx.now();
  // A `submitting` whose lease expired is judged as the outcome_unknown it is (SPEC §3).
  const judged = judgedState(op.state);
  const ruling = decide({
    operation: judged === op.state ? op : { ...op, state: judged },
    // Read by the rule only on the way to a retry: hashed only then.
    get retryPayloadHash() {
      return payloadHash(op.payload);
    },
    history: history.observations,
    lookup,
    capabilities: provider.capabilities,
    now,
    lastAttemptAt: history.lastAttemptAt,
    linked: history.linked,
    providerNow: lookup.provider_date ?? null,
  });
  let nextCheckAt: Date | null = null;
  if (ruling.decision === 'unavailable') {
    let streak = 0;
    for (let i = history.observations.length - 1; i >= 0 && history.observations[i].result === 'unavailable'; i--)
      streak++;
    // Back off a provider that is down, bounded by its uncertainty window so short test windows stay short.
    const delay = backoffDelay(streak, {
      baseMs: Math.min(5_000, provider.capabilities.uncertaintyWindowMs / 2),
      maxMs: 15 * 60_000,
    });
    nextCheckAt = new Date(now.getTime() + delay);
  }
  return { op, provider: provider.name, lookup, ruling, nextCheckAt, head: history.head, at: now };
}
