import type { Queryable } from '../../store/db.js';
import type { LinkedVia, ProviderTxn } from '../../types.js';

/**
 * The one spelling of a link's INSERT (issue 25): linkTransactions and the move statement
 * (transition.ts, WRITE_MOVES) both use it. `rows` is a query yielding (provider, provider_id,
 * operation_id, status, state, amount, currency, linked_via, linked_at, linked_by, created). A
 * transaction linked already to the same operation has its status brought up to date; one linked to
 * another operation is left where it is (no row comes back for it: the caller sees it was refused).
 */
export function insertLinksSql(rows: string): string {
  return `INSERT INTO recon.provider_transactions
    (provider, provider_id, operation_id, status, state, amount, currency, linked_via, linked_at, linked_by, created)
  ${rows.trim()}
  ON CONFLICT (provider, provider_id) DO UPDATE SET status = EXCLUDED.status, state = EXCLUDED.state
    WHERE recon.provider_transactions.operation_id = EXCLUDED.operation_id`;
}

/**
 * Links a provider transaction to an operation. A transaction already linked to another
 * operation is not re-pointed (it stays where it is, and the caller is told).
 */
export async function linkTransaction(
  tx: Queryable,
  provider: string,
  operationId: string,
  t: ProviderTxn,
  how: { via: LinkedVia; by: string; at: Date },
): Promise<{ linked: boolean; existingOperation: string | null }> {
  return (await linkTransactions(tx, [{ provider, operationId, txn: t }], how))[0];
}

/**
 * linkTransaction for many at once: two statements whatever their number (the second only when
 * some were already linked elsewhere). One statement cannot insert the same (provider, provider_id)
 * twice: callers pass each at most once.
 */
export async function linkTransactions(
  tx: Queryable,
  links: { provider: string; operationId: string; txn: ProviderTxn }[],
  how: { via: LinkedVia; by: string; at: Date },
): Promise<{ linked: boolean; existingOperation: string | null }[]> {
  if (links.length === 0) return [];
  const key = (provider: string, id: string) => `${provider}\u0000${id}`;
  const r = await tx.query<{ provider: string; provider_id: string }>(
    `${insertLinksSql(`
       SELECT provider, provider_id, operation_id, status, state, amount, currency, $8, $9::timestamptz, $10, created
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $11::timestamptz[])
              AS u(provider, provider_id, operation_id, status, state, amount, currency, created)`)}
     RETURNING provider, provider_id`,
    [
      links.map((l) => l.provider),
      links.map((l) => l.txn.provider_id),
      links.map((l) => l.operationId),
      links.map((l) => l.txn.status),
      links.map((l) => l.txn.state),
      links.map((l) => l.txn.amount),
      links.map((l) => l.txn.currency),
      how.via,
      how.at.toISOString(),
      how.by,
      links.map((l) => (l.txn.created ? l.txn.created.toISOString() : null)),
    ],
  );
  const linked = new Set(r.rows.map((row) => key(row.provider, row.provider_id)));
  const refused = links.filter((l) => !linked.has(key(l.provider, l.txn.provider_id)));
  const ownerOf = new Map<string, string>();
  if (refused.length) {
    const owners = await tx.query<{ provider: string; provider_id: string; operation_id: string }>(
      `SELECT p.provider, p.provider_id, p.operation_id FROM recon.provider_transactions p
         JOIN unnest($1::text[], $2::text[]) AS u(provider, provider_id) USING (provider, provider_id)`,
      [refused.map((l) => l.provider), refused.map((l) => l.txn.provider_id)],
    );
    for (const o of owners.rows) ownerOf.set(key(o.provider, o.provider_id), o.operation_id);
  }
  return links.map((l) =>
    linked.has(key(l.provider, l.txn.provider_id))
      ? { linked: true, existingOperation: null }
      : { linked: false, existingOperation: ownerOf.get(key(l.provider, l.txn.provider_id)) ?? null },
  );
}
