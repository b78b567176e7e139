import type { Db, Queryable } from '../../store/db.js';
import type { Provider, ProviderTxn } from '../../types.js';
import type { CoreContext } from '../journal/context.js';

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
interface DuplicateTxn {
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

/**
 * One batch into the index, committed without waiting for its WAL to reach disk: the index is a copy
 * of what was read, and its random keys (refund ids, charges) make a large index write mostly
 * full-page images after each checkpoint (1.4 MB of WAL per 500 rows at a million rows, 0.5 MB at
 * 200k), so waiting for each flush made every page of a deep audit slower than a shallow one's. A
 * crash loses at most the last batches, which the next scan reads again: the scan window
 * (`audit_scans`) is committed after them with the default durability, and WAL is flushed in
 * order, so once the window is on disk every batch before it is too.
 */
async function indexTransactions(q: Queryable, provider: string, txns: ProviderTxn[], now: Date): Promise<void> {
  // set_config(…, true) is SET LOCAL: it lasts for this statement's own transaction, through its
  // commit, and never reaches the pooled session (test/integration/ledger-index-commit.test.ts).
  await q.query(
    `INSERT INTO recon.ledger_index (provider, provider_id, operation_id, client_reference, grp, amount, currency, status, created, scanned_at)
     SELECT $1, u.id, u.op, u.ref, u.grp, u.amount, u.currency, u.status, u.created, $10::timestamptz
       FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::text[], $9::timestamptz[])
         AS u(id, op, ref, grp, amount, currency, status, created)
      WHERE (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
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

export interface FindOptions {
  provider?: string;
  since?: Date;
  until?: Date;
  windowMs?: number;
}

/** Groups described per query, and fetched per cursor read. */
const GROUP_BATCH = 200;

/**
 * The duplicate groups among the indexed ledger, as one SQL statement ordered by provider, kind and
 * key (byte order). With since/until, only groups with at least one transaction created in that
 * range are reported.
 */
function groupsSql(): string {
  const inRange = `($2::timestamptz IS NULL OR max(created) >= $2::timestamptz) AND ($3::timestamptz IS NULL OR min(created) <= $3::timestamptz)`;
  const byKey = (column: string, extra = '') => `
    SELECT provider, '${column}' AS kind, ${column} AS key, NULL::text AS grp, NULL::bigint AS amount
      FROM recon.ledger_index
     WHERE ${column} IS NOT NULL AND ($1::text IS NULL OR provider = $1::text)
     GROUP BY provider, ${column}
    HAVING count(*) > 1 ${extra} AND ${inRange}`;
  return `
    WITH pairs AS (
      -- Same charge, same amount, close in time; two refunds that each carry their own distinct operation id are legitimate.
      SELECT a.provider, a.grp, a.amount
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
    )
    SELECT provider, kind, key, grp, amount FROM (
      ${byKey('operation_id')}
      UNION ALL
      -- A client reference shared by several distinct operations is legitimate (two refunds of one order,
      -- each its own operation); one shared by a single operation only is already reported by operation id.
      ${byKey(
        'client_reference',
        `AND NOT (count(DISTINCT operation_id) = 1 AND count(operation_id) = count(*))
       AND (count(DISTINCT operation_id) <= 1 OR count(*) > count(DISTINCT operation_id))`,
      )}
      UNION ALL
      SELECT DISTINCT provider, 'same_charge_amount', grp || ':' || amount, grp, amount FROM pairs
    ) AS g
    ORDER BY provider COLLATE "C", kind COLLATE "C", key COLLATE "C"`;
}

function findParams(o: FindOptions): unknown[] {
  return [
    o.provider ?? null,
    o.since?.toISOString() ?? null,
    o.until?.toISOString() ?? null,
    (o.windowMs ?? 24 * 3600_000) / 1000,
  ];
}

/** How many duplicate groups the indexed ledger holds (what `stats` reports), without describing them. */
export async function countDuplicates(q: Queryable, o: FindOptions): Promise<number> {
  const r = await q.query<{ n: number }>(`SELECT count(*)::int AS n FROM (${groupsSql()}) AS d`, findParams(o));
  return Number(r.rows[0].n);
}

/**
 * Streams the duplicates among the indexed ledger to `onBatch`, a batch of groups at a time, in
 * order (provider, kind, key in byte order): the groups are read through a cursor and each batch
 * is described by one query, so memory holds one batch however many groups there are, and the
 * report can be written as it is found. Returns the number of groups.
 */
export async function forEachDuplicate(
  db: Db,
  o: FindOptions,
  onBatch: (duplicates: Duplicate[]) => Promise<void> | void,
): Promise<number> {
  let total = 0;
  await db.transaction(async (tx) => {
    await tx.query(`DECLARE recon_dup_cursor NO SCROLL CURSOR FOR ${groupsSql()}`, findParams(o));
    for (;;) {
      const page = await tx.query<GroupRow>(`FETCH ${GROUP_BATCH} FROM recon_dup_cursor`);
      if (!page.rows.length) break;
      total += page.rows.length;
      await onBatch(await describeGroups(tx, page.rows, o));
      if (page.rows.length < GROUP_BATCH) break;
    }
    await tx.query('CLOSE recon_dup_cursor');
  });
  return total;
}

/** Every duplicate in one array (for small ledgers: the demo, tests). */
export async function findDuplicates(db: Db, o: FindOptions): Promise<Duplicate[]> {
  const out: Duplicate[] = [];
  await forEachDuplicate(db, o, (batch) => void out.push(...batch));
  return out;
}

interface GroupRow {
  provider: string;
  kind: Duplicate['kind'];
  key: string;
  grp: string | null;
  amount: number | null;
}

/**
 * The transactions of a batch of groups, in one query: each group's members found again by its key
 * (the same-charge kind: the members of its qualifying pairs), with what recon holds for each.
 */
async function describeGroups(q: Queryable, groups: GroupRow[], o: FindOptions): Promise<Duplicate[]> {
  const r = await q.query<DuplicateRow>(
    `WITH g AS (
       SELECT * FROM json_to_recordset($1::json) AS g(ord int, provider text, kind text, key text, grp text, amount bigint)
     ),
     members AS (
       SELECT g.ord, l.provider_id FROM g
         JOIN recon.ledger_index l ON l.provider = g.provider
          AND ((g.kind = 'operation_id' AND l.operation_id = g.key)
            OR (g.kind = 'client_reference' AND l.client_reference = g.key))
       UNION
       SELECT g.ord, x.id FROM g
         JOIN recon.ledger_index a ON g.kind = 'same_charge_amount' AND a.provider = g.provider
          AND a.grp = g.grp AND a.amount = g.amount
         JOIN recon.ledger_index b
           ON b.provider = a.provider AND b.grp = a.grp AND b.amount = a.amount AND b.provider_id > a.provider_id
          AND b.created BETWEEN a.created - make_interval(secs => $4::float8) AND a.created + make_interval(secs => $4::float8)
        CROSS JOIN LATERAL (VALUES (a.provider_id), (b.provider_id)) AS x(id)
        WHERE NOT (a.operation_id IS NOT NULL AND b.operation_id IS NOT NULL AND a.operation_id <> b.operation_id)
          AND NOT (a.operation_id IS NOT NULL AND a.operation_id IS NOT DISTINCT FROM b.operation_id)
          AND ($2::timestamptz IS NULL OR greatest(a.created, b.created) >= $2::timestamptz)
          AND ($3::timestamptz IS NULL OR least(a.created, b.created) <= $3::timestamptz)
     )
     -- Only the columns the report shows, the time already as toISOString() writes it: no Date per
     -- row to parse and print again (at a million refunds the driver's rows are most of what this
     -- phase allocates, and they outlive minor GCs; node --heap-prof, --trace-gc-nvp).
     SELECT m.ord, l.provider_id, l.amount, l.currency, l.status,
            to_char(l.created AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created,
            l.operation_id, l.client_reference, l.grp,
            t.operation_id AS recon_operation, o.state AS recon_state, o.review_reason
       FROM members m
       JOIN g ON g.ord = m.ord
       JOIN recon.ledger_index l ON l.provider = g.provider AND l.provider_id = m.provider_id
       LEFT JOIN recon.provider_transactions t ON t.provider = l.provider AND t.provider_id = l.provider_id
       LEFT JOIN recon.operations o ON o.id = t.operation_id
      ORDER BY m.ord, l.created, l.provider_id`,
    [
      // One JSON document, not six arrays: the driver builds an array literal by string concatenation
      // and escapes each element (12 MB of short-lived strings for 10,000 groups, node --heap-prof).
      JSON.stringify(
        groups.map((g, ord) => ({ ord, provider: g.provider, kind: g.kind, key: g.key, grp: g.grp, amount: g.amount })),
      ),
      o.since?.toISOString() ?? null,
      o.until?.toISOString() ?? null,
      (o.windowMs ?? 24 * 3600_000) / 1000,
    ],
  );
  const rowsOf: DuplicateRow[][] = groups.map(() => []);
  for (const row of r.rows) rowsOf[Number(row.ord)].push(row);
  return groups.map((g, i) => describeGroup(g, rowsOf[i]));
}

interface DuplicateRow {
  ord: number | string;
  provider_id: string;
  amount: number | string | null;
  currency: string | null;
  status: string;
  /** ISO 8601 in UTC, milliseconds (what `Date#toISOString` writes), formatted by the query. */
  created: string;
  operation_id: string | null;
  client_reference: string | null;
  grp: string | null;
  recon_operation: string | null;
  recon_state: string | null;
  review_reason: string | null;
}

function describeGroup(g: GroupRow, rows: DuplicateRow[]): Duplicate {
  const transactions: DuplicateTxn[] = rows.map((t) => ({
    provider_id: t.provider_id,
    amount: t.amount === null ? null : Number(t.amount),
    currency: t.currency,
    status: t.status,
    created: t.created,
    operation_id: t.operation_id,
    client_reference: t.client_reference,
    group: t.grp,
    recon_operation: t.recon_operation,
    recon_state: t.recon_state,
  }));
  const recon_knows =
    rows.length > 0 && rows.every((t) => t.recon_operation && (t.recon_state === 'needs_review' || t.review_reason));
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
