/**
 * What `recon audit duplicates` should report, computed straight from the sandbox's ledger (the
 * provider's truth) with the definitions of SPEC §7 and the README: several refunds carrying one
 * `recon_operation_id`; several carrying one client reference (unless they are distinct
 * operations' own refunds: two refunds of one order are legitimate); and refunds on the same charge
 * with the same amount created within the window, where a pair that both carry an operation id is
 * not one (distinct ids: legitimate; the same id: already reported by operation id).
 */
import type { Refund } from '../../src/sandbox/stripe/server.js';

export interface DuplicateGroup {
  kind: 'operation_id' | 'client_reference' | 'same_charge_amount';
  ids: string[];
}

/** A stable name for a group, to compare the oracle with recon's report. */
export function groupKey(g: DuplicateGroup): string {
  return `${g.kind}|${[...g.ids].sort().join(',')}`;
}

const DAY_S = 24 * 3600;

export function duplicatesOracle(refunds: Refund[], windowS = DAY_S): DuplicateGroup[] {
  const groups: DuplicateGroup[] = [];
  const opOf = (r: Refund) => r.metadata.recon_operation_id ?? null;
  const by = (key: (r: Refund) => string | null) => {
    const m = new Map<string, Refund[]>();
    for (const r of refunds) {
      const k = key(r);
      if (k !== null) m.set(k, [...(m.get(k) ?? []), r]);
    }
    return [...m.values()].filter((list) => list.length > 1);
  };
  for (const list of by(opOf)) groups.push({ kind: 'operation_id', ids: list.map((r) => r.id) });
  for (const list of by((r) => r.metadata.recon_client_reference ?? null)) {
    const withOp = list.filter((r) => opOf(r) !== null);
    const distinct = new Set(withOp.map(opOf)).size;
    const oneOperationOnly = distinct === 1 && withOp.length === list.length;
    if (!oneOperationOnly && (distinct <= 1 || list.length > distinct)) {
      groups.push({ kind: 'client_reference', ids: list.map((r) => r.id) });
    }
  }
  const clusters = new Map<string, Set<string>>();
  for (let i = 0; i < refunds.length; i++) {
    for (let j = i + 1; j < refunds.length; j++) {
      const [a, b] = [refunds[i], refunds[j]];
      const sameGroup = (a.charge ?? a.payment_intent) === (b.charge ?? b.payment_intent);
      if (!sameGroup || a.amount !== b.amount || Math.abs(a.created - b.created) > windowS) continue;
      if (opOf(a) !== null && opOf(b) !== null) continue;
      const key = `${a.charge ?? a.payment_intent}:${a.amount}`;
      const ids = clusters.get(key) ?? new Set<string>();
      clusters.set(key, ids.add(a.id).add(b.id));
    }
  }
  for (const ids of clusters.values()) groups.push({ kind: 'same_charge_amount', ids: [...ids] });
  return groups;
}
