/**
 * The evidence a person needs to decide an operation (issue 11): what the provider holds (linked
 * transactions), the look-alikes the latest lookup saw, the last observations and the attempts.
 * Read from the store only; `review list` and `ops show` render it.
 */
import type { Queryable } from '../../store/db.js';
import type { Attempt, Observation, ProviderTransaction } from '../../types.js';
import { attemptsOf, observationsOf, transactionsOf } from '../journal/operations.js';

/** A provider transaction as an observation recorded it (lookupDetail's shape). */
export interface SeenTxn {
  provider_id: string;
  status: string | null;
  amount: number | null;
  currency: string | null;
  operation_id: string | null;
  created: string | null;
}

export interface Evidence {
  linked: ProviderTransaction[];
  /** Ambiguous candidates of the latest observation that had any (same charge and amount, no recon metadata). */
  candidates: SeenTxn[];
  /** The latest observations, newest first. */
  observations: Observation[];
  attempts: Attempt[];
}

/** The candidates an observation recorded (its detail is lookupDetail's shape). */
export function candidatesOf(o: Observation): SeenTxn[] {
  const list = (o.detail as { candidates?: unknown }).candidates;
  if (!Array.isArray(list)) return [];
  return list.filter(
    (c): c is SeenTxn => typeof c === 'object' && c !== null && typeof (c as SeenTxn).provider_id === 'string',
  );
}

export async function evidenceOf(q: Queryable, id: string, lastObservations = 3): Promise<Evidence> {
  const [linked, observations, attempts] = await Promise.all([
    transactionsOf(q, id),
    observationsOf(q, id),
    attemptsOf(q, id),
  ]);
  const newestFirst = [...observations].sort((a, b) => b.observed_at.getTime() - a.observed_at.getTime());
  const withCandidates = newestFirst.find((o) => candidatesOf(o).length > 0);
  const linkedIds = new Set(linked.map((t) => t.provider_id));
  return {
    linked,
    candidates: withCandidates ? candidatesOf(withCandidates).filter((c) => !linkedIds.has(c.provider_id)) : [],
    observations: newestFirst.slice(0, lastObservations),
    attempts,
  };
}
