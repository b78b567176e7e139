import type { Queryable } from '../store/db.js';
import type { Provider, ProviderTxn } from '../types.js';
import type { CoreContext } from './context.js';

/**
 * `recon audit duplicates`: provider-side duplicates — several transactions for one operation id
 * or one client reference, and same-charge same-amount refunds close in time (the duplicates of
 * the time before recon).
 *
 * The ledger is streamed page by page into `recon.ledger_index` (a compact copy of what was read),
 * and duplicates are found with SQL over that table: memory stays flat however large the ledger,
 * and an incremental scan (only what is new since the last one — Stripe grants an account as few
 * as 10,000 reads a month) still pairs a new refund with one read a year ago.
 */
export interface DuplicateTxn {
  provider_id: string;
  amount: number | null;
  currency: string | null;
  status: string;
  created: string;
  operation_id: string | null;
  client_reference: string | null;
  group: string | null;
  /** What recon holds for this transaction: the operation it is linked to and its state. */
  recon_operation: string | null;
  recon_state: string | null;
}

export interface Duplicate {
  provider: string;
  kind: 'operation_id' | 'client_reference' | 'same_charge_amount';
  key: string;
  transactions: DuplicateTxn[];
  amount_total: number;
  currency: string | null;
  /** True when recon already has every one of these linked to an operation in needs_review or resolved by a human. */
  recon_knows: boolean;
}

export interface DuplicateScan {
  provider: string;
  since: string | null;
  until: string;
  pages: number;
  transactions: number;
  incremental: boolean;
}

export interface DuplicatesReport {
  duplicates: Duplicate[];
  scans: DuplicateScan[];
}

export interface AuditOptions {
  since?: Date;
  until?: Date;
  /** Re-read the whole ledger (ignores the stored scan window). */
  full?: boolean;
  /** Same charge + same amount within this many ms counts as a duplicate. Default 24h. */
  windowMs?: number;
  onPage?: (p: { provider: string; page: number; transactions: number }) => void;
}

/** Clock skew and delayed indexing: an incremental scan re-reads this much before the last window. */
const OVERLAP_MS = 60 * 60 * 1000;
const BATCH = 500;

export async function scanLedger(ctx: CoreContext, provider: Provider, o: AuditOptions): Promise<DuplicateScan> {
  if (!provider.list) throw new Error(`provider ${provider.name} cannot list its ledger for audits`);
  const until = o.until ?? ctx.now();
  let since = o.since;
  let incremental = false;
  if (!since && !o.full) {
    const prev = await ctx.db.query<{ scanned_until: Date }>(
      'SELECT scanned_until FROM recon.audit_scans WHERE provider = $1',
      [provider.name],
    );
    if (prev.rows[0]) {
      since = new Date(prev.rows[0].scanned_until.getTime() - OVERLAP_MS);
      incremental = true;
    }
  }
  let pages = 0;
  let count = 0;
  let buffer: ProviderTxn[] = [];
  const flush = async () => {
    if (buffer.length) await indexTransactions(ctx.db, provider.name, buffer, ctx.now());
    buffer = [];
  };
  for await (const txn of provider.list({
    since,
    until,
    onPage: ({ page }) => {
      pages = page;
      o.onPage?.({ provider: provider.name, page, transactions: count });
    },
  })) {
    buffer.push(txn);
    count++;
    if (buffer.length >= BATCH) await flush();
  }
  await flush();
  await ctx.db.query(
    `INSERT INTO recon.audit_scans (provider, scanned_from, scanned_until, updated_at)
     VALUES ($1, $2::timestamptz, $3::timestamptz, $4::timestamptz)
     ON CONFLICT (provider) DO UPDATE SET
       scanned_from = LEAST(recon.audit_scans.scanned_from, EXCLUDED.scanned_from),
       scanned_until = GREATEST(recon.audit_scans.scanned_until, EXCLUDED.scanned_until),
       updated_at = EXCLUDED.updated_at`,
    [provider.name, (since ?? new Date(0)).toISOString(), until.toISOString(), ctx.now().toISOString()],
  );
  return {
    provider: provider.name,
    since: since?.toISOString() ?? null,
    until: until.toISOString(),
    pages,
    transactions: count,
    incremental,
  };
}

async function indexTransactions(q: Queryable, provider: string, txns: ProviderTxn[], now: Date): Promise<void> {
  await q.query(
    `INSERT INTO recon.ledger_index (provider, provider_id, operation_id, client_reference, grp, amount, currency, status, created, scanned_at)
     SELECT $1, u.id, u.op, u.ref, u.grp, u.amount, u.currency, u.status, u.created, $10::timestamptz
       FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::text[], $9::timestamptz[])
         AS u(id, op, ref, grp, amount, currency, status, created)
     ON CONFLICT (provider, provider_id) DO UPDATE SET status = EXCLUDED.status, scanned_at = EXCLUDED.scanned_at`,
    [
      provider,
      txns.map((t) => t.provider_id),
      txns.map((t) => t.operation_id),
      txns.map((t) => t.client_reference),
      txns.map((t) => t.group ?? null),
      txns.map((t) => t.amount),
      txns.map((t) => t.currency),
      txns.map((t) => t.status),
      txns.map((t) => (t.created ?? now).toISOString()),
      now.toISOString(),
    ],
  );
}

/**
 * Finds duplicates among the indexed ledger. With since/until, only groups with at least one
 * transaction created in that range are reported.
 */
export async function findDuplicates(
  q: Queryable,
  o: { provider?: string; since?: Date; until?: Date; windowMs?: number },
): Promise<Duplicate[]> {
  const params = [o.provider ?? null, o.since?.toISOString() ?? null, o.until?.toISOString() ?? null];
  const inRange = `($2::timestamptz IS NULL OR max(created) >= $2::timestamptz) AND ($3::timestamptz IS NULL OR min(created) <= $3::timestamptz)`;
  const byKey = (column: string, extra = '') => `
    SELECT provider, ${column} AS key, array_agg(provider_id ORDER BY created, provider_id) AS ids
      FROM recon.ledger_index
     WHERE ${column} IS NOT NULL AND ($1::text IS NULL OR provider = $1::text)
     GROUP BY provider, ${column}
    HAVING count(*) > 1 ${extra} AND ${inRange}`;
  const byOperation = await q.query<{ provider: string; key: string; ids: string[] }>(byKey('operation_id'), params);
  // A client reference shared by several distinct operations is legitimate (two refunds of one order,
  // each its own operation); one shared by a single operation only is already reported by operation id.
  const byClientRef = await q.query<{ provider: string; key: string; ids: string[] }>(
    byKey(
      'client_reference',
      `AND NOT (count(DISTINCT operation_id) = 1 AND count(operation_id) = count(*))
       AND (count(DISTINCT operation_id) <= 1 OR count(*) > count(DISTINCT operation_id))`,
    ),
    params,
  );
  // Same charge, same amount, close in time; two refunds that each carry their own distinct operation id are legitimate.
  const pairs = await q.query<{ provider: string; grp: string; amount: number; a: string; b: string }>(
    `SELECT a.provider, a.grp, a.amount, a.provider_id AS a, b.provider_id AS b
       FROM recon.ledger_index a
       JOIN recon.ledger_index b
         ON b.provider = a.provider AND b.grp = a.grp AND b.amount = a.amount AND b.provider_id > a.provider_id
        AND b.created BETWEEN a.created - make_interval(secs => $4::float8) AND a.created + make_interval(secs => $4::float8)
      WHERE a.grp IS NOT NULL AND ($1::text IS NULL OR a.provider = $1::text)
        AND NOT (a.operation_id IS NOT NULL AND b.operation_id IS NOT NULL AND a.operation_id <> b.operation_id)
        -- IS NOT DISTINCT FROM, not =: with b's id NULL, "=" is NULL and NOT NULL would drop the pair.
        AND NOT (a.operation_id IS NOT NULL AND a.operation_id IS NOT DISTINCT FROM b.operation_id)
        AND ($2::timestamptz IS NULL OR greatest(a.created, b.created) >= $2::timestamptz)
        AND ($3::timestamptz IS NULL OR least(a.created, b.created) <= $3::timestamptz)
      ORDER BY a.provider, a.grp, a.amount`,
    [...params, (o.windowMs ?? 24 * 3600_000) / 1000],
  );
  const clusters = new Map<string, { provider: string; key: string; ids: Set<string> }>();
  for (const p of pairs.rows) {
    const key = `${p.grp}:${p.amount}`;
    const c = clusters.get(`${p.provider}\u0000${key}`) ?? { provider: p.provider, key, ids: new Set<string>() };
    c.ids.add(p.a).add(p.b);
    clusters.set(`${p.provider}\u0000${key}`, c);
  }
  const groups: { provider: string; kind: Duplicate['kind']; key: string; ids: string[] }[] = [
    ...byOperation.rows.map((r) => ({ provider: r.provider, kind: 'operation_id' as const, key: r.key, ids: r.ids })),
    ...byClientRef.rows.map((r) => ({
      provider: r.provider,
      kind: 'client_reference' as const,
      key: r.key,
      ids: r.ids,
    })),
    ...[...clusters.values()].map((c) => ({
      provider: c.provider,
      kind: 'same_charge_amount' as const,
      key: c.key,
      ids: [...c.ids],
    })),
  ];
  const out: Duplicate[] = [];
  for (const g of groups) out.push(await describeGroup(q, g));
  return out.sort(
    (a, b) => a.provider.localeCompare(b.provider) || a.kind.localeCompare(b.kind) || a.key.localeCompare(b.key),
  );
}

async function describeGroup(
  q: Queryable,
  g: { provider: string; kind: Duplicate['kind']; key: string; ids: string[] },
): Promise<Duplicate> {
  const r = await q.query(
    `SELECT l.*, t.operation_id AS recon_operation, o.state AS recon_state, o.review_reason
       FROM recon.ledger_index l
       LEFT JOIN recon.provider_transactions t ON t.provider = l.provider AND t.provider_id = l.provider_id
       LEFT JOIN recon.operations o ON o.id = t.operation_id
      WHERE l.provider = $1 AND l.provider_id = ANY($2::text[])
      ORDER BY l.created, l.provider_id`,
    [g.provider, g.ids],
  );
  const transactions: DuplicateTxn[] = r.rows.map((t: any) => ({
    provider_id: t.provider_id,
    amount: t.amount === null ? null : Number(t.amount),
    currency: t.currency,
    status: t.status,
    created: new Date(t.created).toISOString(),
    operation_id: t.operation_id,
    client_reference: t.client_reference,
    group: t.grp,
    recon_operation: t.recon_operation,
    recon_state: t.recon_state,
  }));
  const recon_knows =
    r.rows.length > 0 &&
    r.rows.every((t: any) => t.recon_operation && (t.recon_state === 'needs_review' || t.review_reason));
  return {
    provider: g.provider,
    kind: g.kind,
    key: `${g.kind === 'same_charge_amount' ? 'charge' : g.kind}:${g.key}`,
    transactions,
    amount_total: transactions.reduce((s, t) => s + (t.amount ?? 0), 0),
    currency: transactions[0]?.currency ?? null,
    recon_knows,
  };
}
