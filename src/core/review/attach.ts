import { NotFoundError, RefusedError } from '../../errors.js';
import type { Operation, Provider, ProviderTxn, State } from '../../types.js';
import type { CoreContext } from '../journal/context.js';
import { refuseUnlessForced, type Force } from './force.js';
import { txnMismatches } from '../found/match.js';
import { getOperation } from '../journal/operations.js';
import { canTransition } from '../journal/states.js';
import { linkTransaction } from '../journal/links.js';
import { transition } from '../journal/transition.js';

/** What a human may see before attaching: the transaction and how it disagrees with the operation. */
export interface AttachCheck {
  operation: Operation;
  txn: ProviderTxn;
  problems: string[];
  to: State;
}

/**
 * Fetches TXN from the provider and checks amount, currency and `recon_operation_id` (SPEC §7):
 * a transaction that disagrees is refused (exit 4) unless forced, before anyone is asked to confirm.
 */
export async function checkAttach(
  ctx: CoreContext,
  provider: Provider,
  id: string,
  txnId: string,
  o: Force = {},
): Promise<AttachCheck> {
  const operation = await getOperation(ctx.db, id);
  const txn = await provider.get(txnId);
  if (!txn) throw new NotFoundError(`transaction ${txnId} not found at provider ${provider.name}`);
  const problems = txnMismatches(operation, txn);
  const to: State = txn.state;
  if (!canTransition(operation.state, to, { by: 'person' })) {
    throw new RefusedError(
      `operation ${id} is ${operation.state}; attaching a ${txn.status} transaction would make it ${to}, which is not allowed`,
      'state_machine',
    );
  }
  refuseAttachUnlessForced(problems, txn, operation, o);
  return { operation, txn, problems, to };
}

function refuseAttachUnlessForced(problems: string[], txn: ProviderTxn, op: Operation, o: Force): void {
  refuseUnlessForced(problems, o, `${txn.provider_id} does not match ${op.id}`, 'attach', 'attach.mismatch');
}

export async function attach(ctx: CoreContext, provider: Provider, check: AttachCheck, o: Force): Promise<Operation> {
  refuseAttachUnlessForced(check.problems, check.txn, check.operation, o);
  const now = ctx.now();
  return ctx.db.transaction(async (tx) => {
    const r = await linkTransaction(tx, provider.name, check.operation.id, check.txn, {
      via: 'attach',
      by: ctx.actor,
      at: now,
    });
    if (!r.linked)
      throw new RefusedError(
        `${check.txn.provider_id} is already linked to operation ${r.existingOperation}`,
        'attach.linked_elsewhere',
      );
    const { op } = await transition(tx, check.operation.id, check.to, {
      actor: ctx.actor,
      auditKey: ctx.auditKey,
      now,
      by: 'person',
      kind: 'attached',
      rule: check.problems.length ? 'human.attach.forced' : 'human.attach',
      detail: {
        provider_id: check.txn.provider_id,
        provider_status: check.txn.status,
        problems: check.problems,
        reason: o.reason ?? null,
      },
    });
    return op;
  });
}
