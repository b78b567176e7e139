/**
 * The campaign plan, drawn from the seed before anything runs: the operations, the faults each
 * one meets on submit (the sandbox's kinds, queued under its idempotency key) and on lookup (the
 * proxy's), the refunds and shipments planted at the provider, and the worker rounds with their
 * kills. Webhook delivery is drawn as events appear (see webhooks.ts), from its own stream.
 */
import type { Fault } from '../../src/sandbox/faults.js';
import { Prng } from './prng.js';
import { LOOKUP_FAULT_KINDS, type LookupFaultKind } from './proxy.js';

type PlantKind = 'duplicate' | 'lookalike' | 'wrong_amount';
/** early: before the first submit; mid: during the worker rounds; late: after everything settled. */
export type PlantWhen = 'early' | 'mid' | 'late';

interface Plant {
  kind: PlantKind;
  when: PlantWhen;
  /** Status the planted refund starts in (a pending one is later made final like any other). */
  status: 'succeeded' | 'pending';
  /** For wrong_amount: added to the operation's amount. */
  delta: number;
}

export interface PlannedOp {
  id: string;
  provider: 'stripe' | 'warehouse';
  clientReference: string;
  /** Stripe: index into plan.paymentIntents. */
  paymentIntent?: number;
  amount?: number;
  currency?: string;
  /** Queued under the operation's key, applied in order to its create requests. */
  submitFaults: { fault: Fault; times: number }[];
  /** Queued under its payment intent / client reference at the proxy. */
  lookupFaults: { kind: LookupFaultKind; times: number }[];
  /** SIGKILL the `ops submit` process this long after it starts (its first request is held). */
  killSubmitAfterMs: number | null;
  plants: Plant[];
}

interface Round {
  /** One entry per `recon run` worker; null = not killed. */
  killAfterMs: (number | null)[];
}

export interface Plan {
  seed: number;
  ops: PlannedOp[];
  paymentIntents: { currency: string }[];
  rounds: Round[];
}

const CURRENCIES = ['usd', 'usd', 'usd', 'eur', 'jpy'];

/** Every fault kind of src/sandbox/faults.ts, with the shapes a bad day produces. */
function submitFault(r: Prng, provider: PlannedOp['provider']): { fault: Fault; times: number } {
  switch (r.int(0, 10)) {
    case 0:
      // stripe-node retries a closed connection once with the same key: both answers are lost.
      return { fault: { kind: 'commit_then_drop' }, times: 2 };
    case 1:
      return { fault: { kind: 'drop_before_commit' }, times: r.int(1, 3) };
    case 2:
      return { fault: { kind: 'delay', ms: r.pick([50, 200]) }, times: 1 };
    case 3:
      // Past the provider timeout: the client gives up while the provider commits.
      return { fault: { kind: 'delay', ms: 2_500 }, times: 1 };
    case 4:
      return { fault: { kind: 'status', status: r.pick([500, 502, 503]) }, times: 1 };
    case 5:
      return { fault: { kind: 'status', status: 429 }, times: r.int(1, 2) };
    case 6:
      // A 400 invalid_request_error proves nothing was created: the operation fails.
      return { fault: { kind: 'status', status: 400 }, times: 1 };
    case 7:
      return { fault: { kind: 'hide', ms: r.int(1_500, 4_000), drop: r.chance(0.6) }, times: 1 };
    case 8:
      return { fault: { kind: 'hold' }, times: 1 };
    default:
      return {
        fault: { kind: 'initial_status', status: provider === 'stripe' ? 'pending' : 'processing' },
        times: 1,
      };
  }
}

export function makePlan(seed: number, opCount: number, db: 'postgres' | 'pglite'): Plan {
  const root = new Prng(seed);
  const r = root.fork();
  const paymentIntents: Plan['paymentIntents'] = [];
  const ops: PlannedOp[] = [];
  for (let i = 0; i < opCount; i++) {
    const provider = r.chance(0.8) ? 'stripe' : 'warehouse';
    const n = String(i + 1).padStart(4, '0');
    const op: PlannedOp = {
      id: `${provider === 'stripe' ? 'refund' : 'ship'}:s${seed}-${n}`,
      provider,
      clientReference: `ord-s${seed}-${n}`,
      submitFaults: [],
      lookupFaults: [],
      killSubmitAfterMs: null,
      plants: [],
    };
    if (provider === 'stripe') {
      // Two refunds of one payment now and then: each its own operation, both legitimate.
      const share = paymentIntents.length > 0 && r.chance(0.2);
      if (!share) paymentIntents.push({ currency: r.pick(CURRENCIES) });
      op.paymentIntent = share ? r.int(0, paymentIntents.length - 1) : paymentIntents.length - 1;
      op.currency = paymentIntents[op.paymentIntent].currency;
      op.amount = r.int(100, 9_999);
    }
    if (r.chance(0.7)) {
      op.submitFaults.push(submitFault(r, provider));
      if (r.chance(0.15)) op.submitFaults.push(submitFault(r, provider));
    }
    if (op.submitFaults[0]?.fault.kind === 'hold' && r.chance(0.6)) op.killSubmitAfterMs = r.int(300, 1_200);
    if (r.chance(0.35)) op.lookupFaults.push({ kind: r.pick(LOOKUP_FAULT_KINDS), times: r.int(1, 5) });
    const when = (): PlantWhen => r.pick(['early', 'early', 'mid', 'mid', 'late'] as const);
    if (r.chance(0.18)) {
      op.plants.push({ kind: 'duplicate', when: when(), status: r.chance(0.3) ? 'pending' : 'succeeded', delta: 0 });
    }
    if (provider === 'stripe' && r.chance(0.12)) {
      op.plants.push({ kind: 'lookalike', when: r.pick(['early', 'mid'] as const), status: 'succeeded', delta: 0 });
    }
    if (provider === 'stripe' && r.chance(0.1)) {
      const delta = r.pick([-1, 1]) * r.int(1, 50);
      op.plants.push({ kind: 'wrong_amount', when: when(), status: 'succeeded', delta });
    }
    ops.push(op);
  }
  const rounds: Round[] = [];
  const roundCount = opCount > 60 ? 4 : 3;
  for (let i = 0; i < roundCount; i++) {
    const workers = db === 'postgres' ? r.int(2, 4) : r.int(2, 3);
    rounds.push({
      killAfterMs: Array.from({ length: workers }, () => (r.chance(0.35) ? r.int(150, 2_500) : null)),
    });
  }
  return { seed, ops, paymentIntents, rounds };
}
