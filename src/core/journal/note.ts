import type { Queryable } from '../../store/db.js';
import type { AuditEvent } from '../../types.js';
import type { AuditKey } from '../../lib/keyed-hash.js';
import { appendEvent } from './chain.js';
import { lockOperation } from './operations.js';
import { assertLease } from './transition.js';

/**
 * An audit event that records something without changing state (an observation, a wait, a note).
 * Its state is the chain's, not the row's (appendEvent): a note cannot launder a state change made
 * behind recon's back.
 */
export async function note(
  tx: Queryable,
  id: string,
  o: {
    actor: string;
    /** The audit key (CoreContext.auditKey): the event is keyed with it. */
    auditKey?: AuditKey | null;
    now: Date;
    kind: string;
    rule?: string | null;
    detail?: Record<string, unknown>;
    leaseOwner?: string;
  },
): Promise<AuditEvent> {
  const op = await lockOperation(tx, id);
  if (o.leaseOwner) assertLease(op, o.leaseOwner, o.now);
  return appendEvent(
    tx,
    {
      operation_id: id,
      at: o.now,
      actor: o.actor,
      kind: o.kind,
      rule: o.rule ?? null,
      detail: o.detail ?? {},
    },
    o.auditKey,
  );
}
