/**
 * `recon audit duplicates` (SPEC §7, §8 incident 9): the old duplicates at the provider — two refunds
 * for one operation, two for one order, the same refund issued twice by hand — are found by their
 * transaction ids in a ledger of thousands, without reporting the legitimate look-alikes; the ledger
 * is streamed page by page, and a nightly audit reads only what is new yet still pairs a new refund
 * with one it read long ago.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { scanLedger } from '../../src/core/audit/duplicates.js';
import { createProvider } from '../../src/providers/index.js';
import { warehouseProviderConfig } from '../../src/sandbox/warehouse/provider-config.js';
import type { Db } from '../../src/store/db.js';
import type { ListRange, Provider, ProviderTxn } from '../../src/types.js';
import { backends, removeTempStores, type Backend } from '../support/backends.js';
import type { CliResult, JsonDoc } from '../support/cli.js';
import { startWorld, type World } from '../support/world.js';

const DAY = 86_400;
const CSV_HEAD = [
  'provider',
  'kind',
  'key',
  'provider_id',
  'amount',
  'currency',
  'status',
  'created',
  'operation_id',
  'client_reference',
  'recon_operation',
  'recon_state',
];

/** Deterministic pseudo-random numbers (mulberry32), so a failing ledger can be rebuilt. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function envOf(world: World): Record<string, string> {
  return {
    STRIPE_API_KEY: world.stripe.apiKey,
    STRIPE_WEBHOOK_SECRET: world.stripe.webhookSecret,
    WAREHOUSE_TOKEN: 'wh_token_test',
  };
}

function expectExit(r: CliResult, code: number): CliResult {
  if (r.code !== code)
    throw new Error(`expected exit ${code}, got ${r.code}\nstdout: ${r.stdout.slice(0, 2000)}\nstderr: ${r.stderr}`);
  return r;
}

/** The reported groups as key → sorted transaction ids: what an auditor reads. */
function groupsOf(json: JsonDoc): Record<string, string[]> {
  return Object.fromEntries(
    json.duplicates.map((d: JsonDoc) => [d.key, d.transactions.map((t: JsonDoc) => t.provider_id).sort()]),
  );
}

/** RFC 4180 CSV (quoted cells, doubled quotes, commas and newlines inside quotes). */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') [cell, i] = [cell + '"', i + 1];
      else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') [row, cell] = [[...row, cell], ''];
    else if (c === '\n') {
      rows.push([...row, cell]);
      [row, cell] = [[], ''];
    } else if (c !== '\r') cell += c;
  }
  if (cell !== '' || row.length) rows.push([...row, cell]);
  return rows;
}

/** A clean background ledger: every refund has its own amount, so no two can look alike. */
function seedBackground(
  world: World,
  n: number,
  o: { seed: number; charges: number; newestAgoSec: number; spanSec: number },
): void {
  const random = rng(o.seed);
  const nowSec = Math.floor(Date.now() / 1000);
  const charges = Array.from(
    { length: o.charges },
    () => world.stripe.seedPaymentIntent({ amount: 10_000_000, currency: 'usd' }).charge,
  );
  for (let i = 0; i < n; i++) {
    const metadata: Record<string, string> =
      i % 3 === 0
        ? { recon_operation_id: `bg_op_${o.seed}_${i}` }
        : i % 3 === 1
          ? { recon_operation_id: `bg_op_${o.seed}_${i}`, recon_client_reference: `bg_order_${o.seed}_${i}` }
          : {};
    world.stripe.seedRefund({
      charge: charges[i % o.charges],
      amount: 100_000 + i,
      currency: 'usd',
      metadata,
      created: nowSec - o.newestAgoSec - Math.floor(random() * o.spanSec),
    });
  }
}

describe.each(backends)('audit duplicates over a large Stripe ledger on $name', (backend: Backend) => {
  let world: World;
  const ids: Record<string, string> = {};
  let expected: Record<string, string[]>;

  beforeAll(async () => {
    world = await startWorld({ backend });
    seedBackground(world, 5_000, { seed: 7, charges: 400, newestAgoSec: DAY, spanSec: 364 * DAY });
    const nowSec = Math.floor(Date.now() / 1000);
    const charge = () => world.stripe.seedPaymentIntent({ amount: 10_000_000, currency: 'usd' }).charge;
    const plant = (
      name: string,
      r: { charge?: string; amount: number; metadata?: Record<string, string>; ago: number },
    ) => {
      ids[name] = world.stripe.seedRefund({
        charge: r.charge ?? charge(),
        amount: r.amount,
        currency: 'usd',
        metadata: r.metadata ?? {},
        created: nowSec - r.ago,
      }).id;
      return ids[name];
    };
    // (a) one operation, two refunds (the retry that was not deduplicated).
    plant('A1', { amount: 5001, metadata: { recon_operation_id: 'op_dup_a' }, ago: 40 * DAY });
    plant('A2', { amount: 5001, metadata: { recon_operation_id: 'op_dup_a' }, ago: 39 * DAY });
    // (b) one order, two refunds: one carries an operation id, the other none; and one with no ids at all.
    plant('B1', {
      amount: 6001,
      metadata: { recon_client_reference: 'order_dup_b', recon_operation_id: 'op_b1' },
      ago: 100 * DAY,
    });
    plant('B2', { amount: 6002, metadata: { recon_client_reference: 'order_dup_b' }, ago: 99 * DAY });
    plant('B3', { amount: 6003, metadata: { recon_client_reference: 'order_dup_b2' }, ago: 200 * DAY });
    plant('B4', { amount: 6004, metadata: { recon_client_reference: 'order_dup_b2' }, ago: 201 * DAY });
    // (c) the same refund issued twice by hand, 5 minutes apart; and 30 minutes apart (only within 24h).
    const chC = charge();
    plant('C1', { charge: chC, amount: 4242, ago: 10 * DAY });
    plant('C2', { charge: chC, amount: 4242, ago: 10 * DAY - 300 });
    const chD = charge();
    plant('D1', { charge: chD, amount: 4343, ago: 20 * DAY });
    plant('D2', { charge: chD, amount: 4343, ago: 20 * DAY - 1800 });
    // (c') a recon refund and a manual one for the same charge and amount, 2 minutes apart. Refund ids
    // are random and the pair query compares them: plant pairs until both id orders are covered.
    const mixed: Record<string, string[]> = {};
    const orders = new Set<boolean>();
    for (let i = 0; orders.size < 2 || i < 2; i++) {
      const ch = charge();
      const withId = plant(`E${i}a`, {
        charge: ch,
        amount: 4747,
        metadata: { recon_operation_id: `op_e${i}` },
        ago: 30 * DAY + i,
      });
      const manual = plant(`E${i}b`, { charge: ch, amount: 4747, ago: 30 * DAY + i - 120 });
      orders.add(withId < manual);
      mixed[`charge:${ch}:4747`] = [withId, manual].sort();
    }
    // Look-alikes that are not duplicates: 3 days and a second apart; two operations; one order refunded by two operations.
    const chFar = charge();
    plant('L1', { charge: chFar, amount: 4444, ago: 50 * DAY });
    plant('L2', { charge: chFar, amount: 4444, ago: 47 * DAY - 1 });
    const chLegit = charge();
    plant('L3', { charge: chLegit, amount: 4545, metadata: { recon_operation_id: 'op_l1' }, ago: 60 * DAY });
    plant('L4', { charge: chLegit, amount: 4545, metadata: { recon_operation_id: 'op_l2' }, ago: 60 * DAY - 600 });
    plant('L5', {
      amount: 4646,
      metadata: { recon_client_reference: 'order_legit', recon_operation_id: 'op_r1' },
      ago: 70 * DAY,
    });
    plant('L6', {
      amount: 4647,
      metadata: { recon_client_reference: 'order_legit', recon_operation_id: 'op_r2' },
      ago: 70 * DAY - 60,
    });
    const sorted = (...names: string[]) => names.map((n) => ids[n]).sort();
    expected = {
      'operation_id:op_dup_a': sorted('A1', 'A2'),
      'client_reference:order_dup_b': sorted('B1', 'B2'),
      'client_reference:order_dup_b2': sorted('B3', 'B4'),
      [`charge:${chC}:4242`]: sorted('C1', 'C2'),
      [`charge:${chD}:4343`]: sorted('D1', 'D2'),
      ...mixed,
    };
  });

  afterAll(async () => {
    await world?.close();
    removeTempStores();
  });

  it('finds every planted duplicate by its transaction ids, no look-alike, reading the ledger in pages of 100', async () => {
    const ledgerSize = world.stripe.refunds().length;
    expect(ledgerSize).toBe(5_000 + Object.keys(ids).length);
    const pagesBefore = world.stripe.stats.listPages;

    const r = expectExit(await world.recon(['audit', 'duplicates', '--json']), 8);

    expect(groupsOf(r.json)).toEqual(expected);
    const a = r.json.duplicates.find((d: JsonDoc) => d.key === 'operation_id:op_dup_a');
    expect(a).toMatchObject({
      provider: 'stripe',
      kind: 'operation_id',
      amount_total: 10002,
      currency: 'usd',
      recon_knows: false,
    });
    // Streamed: every refund read exactly once, 100 per page (the sandbox answers 400 to limit > 100).
    const pages = Math.ceil(ledgerSize / 100);
    expect(r.json.scans).toEqual([
      expect.objectContaining({ provider: 'stripe', pages, transactions: ledgerSize, incremental: false, since: null }),
    ]);
    expect(world.stripe.stats.listPages - pagesBefore).toBe(pages);
    expect(world.stripe.stats.status[400]).toBeUndefined();
  });

  it('--csv prints a header and one row per duplicated transaction', async () => {
    const r = expectExit(await world.recon(['audit', 'duplicates', '--csv']), 8);
    const rows = parseCsv(r.stdout.trimEnd());
    expect(rows[0]).toEqual(CSV_HEAD);
    const body = rows.slice(1);
    const total = Object.values(expected).reduce((n, g) => n + g.length, 0);
    expect(body).toHaveLength(total);
    for (const row of body) expect(row).toHaveLength(CSV_HEAD.length);
    const byKey: Record<string, string[]> = {};
    for (const row of body) (byKey[row[2]] ??= []).push(row[3]);
    for (const k of Object.keys(byKey)) byKey[k].sort();
    expect(byKey).toEqual(expected);
    const c1 = body.find((row) => row[3] === ids.C1)!;
    expect(c1.slice(4, 7)).toEqual(['4242', 'usd', 'succeeded']);
    expect(Number.isNaN(Date.parse(c1[7]))).toBe(false);
  });

  it('--window 10m keeps the 5-minute pairs and drops the 30-minute one', async () => {
    const r = expectExit(await world.recon(['audit', 'duplicates', '--json', '--window', '10m']), 8);
    const groups = groupsOf(r.json);
    const chD = Object.keys(expected).find((k) => k.endsWith(':4343'))!;
    const { [chD]: dropped, ...rest } = expected;
    expect(dropped).toHaveLength(2);
    expect(groups).toEqual(rest);
    const wide = expectExit(await world.recon(['audit', 'duplicates', '--json', '--window', '72h']), 8);
    // 72h still does not reach the refunds 3 days apart plus a second.
    expect(groupsOf(wide.json)).toEqual(expected);
  });

  it('fills recon.ledger_index page by page while it reads (in process, real Stripe adapter)', async () => {
    const config = await loadConfig({ flag: world.configPath, env: envOf(world), cwd: world.dir });
    const stripe = await createProvider('stripe', config);
    const db: Db = await backend.open();
    const indexedAtPage: number[] = [];
    // Between pages the audit is suspended waiting for the next transaction: what the index holds then is what was flushed so far.
    const watched: Provider = {
      ...stripe,
      async *list(range: ListRange): AsyncGenerator<ProviderTxn> {
        let newPage = 0;
        for await (const txn of stripe.list!({ ...range, onPage: (p) => ((newPage = p.page), range.onPage?.(p)) })) {
          if (newPage) {
            const n = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM recon.ledger_index');
            indexedAtPage[newPage] = Number(n.rows[0].n);
            newPage = 0;
          }
          yield txn;
        }
      },
    };
    try {
      const scan = await scanLedger({ db, actor: 'test', now: () => new Date() }, watched, {});
      const total = world.stripe.refunds().length;
      expect(scan.transactions).toBe(total);
      expect(scan.pages).toBe(Math.ceil(total / 100));
      expect(indexedAtPage.length - 1).toBe(scan.pages);
      for (let page = 1; page < indexedAtPage.length; page++) {
        const read = (page - 1) * 100;
        // Never ahead of what was read, never more than one write batch behind it.
        expect(indexedAtPage[page]).toBeLessThanOrEqual(read);
        expect(indexedAtPage[page]).toBeGreaterThanOrEqual(read - 500);
      }
      const end = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM recon.ledger_index');
      expect(Number(end.rows[0].n)).toBe(total);
    } finally {
      await db.close();
      await stripe.close?.();
    }
  });

  it('recon_knows is true once recon has linked both refunds to an operation in needs_review', async () => {
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    const op = {
      id: 'refund:ord_known',
      provider: 'stripe',
      action: 'refund',
      payload: { payment_intent: pi.payment_intent, amount: 1500, currency: 'usd' },
      approval: 'TICKET-9',
    };
    expectExit(await world.record([op]), 0);
    world.stripe.faults.inject({ kind: 'commit_then_drop' }, { idempotencyKey: op.id });
    // SPEC §7 exit codes: a submit whose answer was lost exits 7 (outcome unknown); the refund did commit.
    const submitted = expectExit(await world.recon(['ops', 'submit', op.id, '--json']), 7);
    expect(submitted.json.state ?? submitted.json.operation?.state).toBe('outcome_unknown');
    expect(world.stripe.refunds({ payment_intent: pi.payment_intent })).toHaveLength(1);
    world.stripe.faults.clear();
    // Someone refunded the same operation again by hand, copying its metadata.
    const manual = world.stripe.seedRefund({
      payment_intent: pi.payment_intent,
      amount: 1500,
      currency: 'usd',
      metadata: { recon_operation_id: op.id },
    });
    expectExit(await world.recon(['run', '--json']), 8);
    const refunds = world.stripe.refunds({ payment_intent: pi.payment_intent });
    expect(refunds).toHaveLength(2);

    const r = expectExit(await world.recon(['audit', 'duplicates', '--json']), 8);
    const known = r.json.duplicates.find((d: JsonDoc) => d.key === `operation_id:${op.id}`);
    expect(known.transactions.map((t: JsonDoc) => t.provider_id).sort()).toEqual(refunds.map((x) => x.id).sort());
    expect(known.transactions.map((t: JsonDoc) => t.provider_id)).toContain(manual.id);
    expect(known.recon_knows).toBe(true);
    expect(
      known.transactions.every((t: JsonDoc) => t.recon_operation === op.id && t.recon_state === 'needs_review'),
    ).toBe(true);
    // The same-charge pair of those two refunds is the same finding, not a second one; the old ones stay unknown to recon.
    expect(
      r.json.duplicates
        .filter((d: JsonDoc) => d.key !== `operation_id:${op.id}`)
        .every((d: JsonDoc) => d.recon_knows === false),
    ).toBe(true);
    expect(groupsOf(r.json)).toEqual({ ...expected, [`operation_id:${op.id}`]: refunds.map((x) => x.id).sort() });
  });
});

describe.each(backends)('incremental audit on $name', (backend: Backend) => {
  let world: World;
  const HOUR = 3600;

  beforeAll(async () => {
    world = await startWorld({ backend });
    seedBackground(world, 1_000, { seed: 11, charges: 100, newestAgoSec: 6 * HOUR, spanSec: 360 * DAY });
  });

  afterAll(async () => {
    await world?.close();
    removeTempStores();
  });

  it('a clean ledger exits 0; the next audit reads only the new refunds and pairs one with an old refund read before', async () => {
    const t = Math.floor(Date.now() / 1000);
    const chX = world.stripe.seedPaymentIntent({ amount: 100_000, currency: 'usd' }).charge;
    // Read by the first audit and, 5h old, outside the second audit's re-read overlap (1h before the first until, T-3h).
    const old = world.stripe.seedRefund({ charge: chX, amount: 777, currency: 'usd', created: t - 5 * HOUR });
    const firstUntil = new Date((t - 3 * HOUR) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');

    const first = expectExit(await world.recon(['audit', 'duplicates', '--json', '--until', firstUntil]), 0);
    expect(first.json.duplicates).toEqual([]);
    expect(first.json.scans[0]).toMatchObject({
      incremental: false,
      transactions: 1_001,
      pages: 11,
      until: new Date(firstUntil).toISOString(),
    });

    // New since: the duplicate of the old refund 3h after it; one created inside the overlap but indexed late; three more.
    const dup = world.stripe.seedRefund({ charge: chX, amount: 777, currency: 'usd', created: t - 2 * HOUR });
    world.stripe.seedRefund({ amount: 901, currency: 'usd', created: t - 3 * HOUR - 30 * 60 });
    for (let i = 0; i < 3; i++) world.stripe.seedRefund({ amount: 910 + i, currency: 'usd', created: t - 60 * i });
    const pagesBefore = world.stripe.stats.listPages;

    const second = expectExit(await world.recon(['audit', 'duplicates', '--json']), 8);
    expect(second.json.scans[0]).toMatchObject({
      incremental: true,
      transactions: 5,
      pages: 1,
      since: new Date((t - 4 * HOUR) * 1000).toISOString(),
    });
    expect(world.stripe.stats.listPages - pagesBefore).toBe(1);
    expect(groupsOf(second.json)).toEqual({ [`charge:${chX}:777`]: [old.id, dup.id].sort() });

    const full = expectExit(await world.recon(['audit', 'duplicates', '--json', '--full']), 8);
    const total = world.stripe.refunds().length;
    expect(total).toBe(1_006);
    expect(full.json.scans[0]).toMatchObject({
      incremental: false,
      transactions: total,
      pages: Math.ceil(total / 100),
      since: null,
    });
    expect(groupsOf(full.json)).toEqual({ [`charge:${chX}:777`]: [old.id, dup.id].sort() });
  });

  it('refuses bad flags with exit 2 before reading anything', async () => {
    const pagesBefore = world.stripe.stats.listPages;
    const scansBefore = await world.recon(['audit', 'duplicates', '--json']);
    const pagesAfterOne = world.stripe.stats.listPages;
    for (const args of [
      ['--csv', '--json'],
      ['--since', '2026-05-01', '--until', '2026-01-01', '--json'],
      ['--window', 'soon', '--json'],
      ['--provider', 'nope', '--json'],
      ['--since', 'yesterday', '--json'],
    ]) {
      const r = await world.recon(['audit', 'duplicates', ...args]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.json?.duplicates).toBeUndefined();
    }
    expect(world.stripe.stats.listPages).toBe(pagesAfterOne);
    expect(pagesAfterOne - pagesBefore).toBe(1);
    // The refused inverted range did not move the stored window: the next audit still starts an hour before the last one.
    const next = expectExit(await world.recon(['audit', 'duplicates', '--json']), 8);
    expect(next.json.scans[0].since).toBe(
      new Date(Date.parse(scansBefore.json.scans[0].until) - 3600_000).toISOString(),
    );
  });
});

describe.each(backends)('audit duplicates over the warehouse http provider on $name', (backend: Backend) => {
  let world: World;

  beforeAll(async () => {
    world = await startWorld({
      backend,
      warehouse: true,
      warehouseConfig: {
        fields: { ...(warehouseProviderConfig('', '').fields as Record<string, string>), created: 'created' },
        list: { path: '/v1/shipments?limit=100&created_gte={since}&created_lte={until}' },
      },
    });
  });

  afterAll(async () => {
    await world?.close();
    removeTempStores();
  });

  it('lists the shipments page by page and reports two shipments of one order', async () => {
    const nowSec = Math.floor(Date.now() / 1000);
    const random = rng(3);
    for (let i = 0; i < 250; i++) {
      world.warehouse!.seedShipment(
        { client_reference: `order_w_${i}`, sku: 'BOOK-1' },
        { created: nowSec - DAY - Math.floor(random() * 300 * DAY) },
      );
    }
    const a = world.warehouse!.seedShipment(
      { client_reference: 'order_w_dup', sku: 'BOOK-2' },
      { created: nowSec - 9 * DAY },
    );
    const b = world.warehouse!.seedShipment(
      { client_reference: 'order_w_dup', sku: 'BOOK-2' },
      { created: nowSec - 8 * DAY },
    );

    const r = expectExit(await world.recon(['audit', 'duplicates', '--provider', 'warehouse', '--json']), 8);
    expect(groupsOf(r.json)).toEqual({ 'client_reference:order_w_dup': [a.id, b.id].sort() });
    expect(r.json.scans).toEqual([expect.objectContaining({ provider: 'warehouse', transactions: 252, pages: 3 })]);
    expect(world.warehouse!.stats.listPages).toBe(3);
    expect(r.json.duplicates[0].transactions.map((t: JsonDoc) => t.created)).toEqual([
      new Date(a.created * 1000).toISOString(),
      new Date(b.created * 1000).toISOString(),
    ]);
    // Without --provider, every provider that can list is audited: the empty Stripe ledger too.
    const all = expectExit(await world.recon(['audit', 'duplicates', '--json']), 8);
    expect(all.json.scans.map((s: JsonDoc) => s.provider).sort()).toEqual(['stripe', 'warehouse']);
  });
});
