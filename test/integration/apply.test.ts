/**
 * Decisions written in groups (src/core/reconcile/write-decisions.ts: decisionWriter, applyDecisions), over both store backends: each operation of a
 * group is checked on its own (lease, state), a store error in one item costs only that item, a
 * provider transaction named twice is linked once, the audit chains stay intact, and a pass does
 * not claim what another worker's pass already looked up (last_checked_at, migration 0003).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { chainHeads, eventsOf } from '../../src/core/journal/chain.js';
import { verifyChains } from '../../src/core/audit/verify.js';
import { claimForRun } from '../../src/core/attempt/claims.js';
import type { CoreContext } from '../../src/core/journal/context.js';
import { decisionWriter } from '../../src/core/reconcile/write-decisions.js';
import type { PlannedDecision } from '../../src/core/reconcile/plan.js';
import { recordOperations } from '../../src/core/intake/record.js';
import { findOperation } from '../../src/core/journal/operations.js';
import { transition } from '../../src/core/journal/transition.js';
import { validateOperation } from '../../src/core/intake/validate.js';
import { note } from '../../src/core/journal/note.js';
import { applyDecisions } from '../../src/core/reconcile/write-decisions.js';
import { LeaseLostError } from '../../src/errors.js';
import type { Db } from '../../src/store/db.js';
import { migrate, migrationsDir } from '../../src/store/migrate.js';
import { openStore } from '../../src/store/open.js';
import type { Decision, LookupResult, Operation, ProviderTxn } from '../../src/types.js';
import { backends, removeTempStores } from '../support/backends.js';
import { listedRefund } from '../support/listing-provider.js';

const T0 = new Date('2025-03-01T10:00:00.000Z');
const ms = (n: number) => new Date(T0.getTime() + n);

afterAll(() => removeTempStores());

const txn = (id: string, opId: string, over: Partial<ProviderTxn> = {}): ProviderTxn =>
  listedRefund(id, T0, { operation_id: opId, ...over });

const found = (t: ProviderTxn): LookupResult => ({ result: 'found', matches: [t], candidates: [] });
const notFound: LookupResult = { result: 'not_found', matches: [], candidates: [] };
const confirm = (t: ProviderTxn): Decision => ({
  decision: 'confirm',
  rule: 'found.single',
  state: 'confirmed',
  link: [t],
  explanation: 'one refund',
});
const wait: Decision = {
  decision: 'wait',
  rule: 'not_found.window',
  state: 'outcome_unknown',
  explanation: 'inside the window',
};

describe.each(backends)('decisions in groups on $name', (backend) => {
  let db: Db;
  const ctxAt = (d: Date): CoreContext => ({ db, actor: 'test', now: () => d });
  let prefix: string;
  let n = 0;

  beforeAll(async () => {
    db = await backend.open();
  });
  afterAll(async () => {
    await db?.close();
  });
  beforeEach(() => {
    prefix = `g${++n}`;
  });

  /** outcome_unknown operations, claimed by `owner` at T0 with a one-minute lease. */
  async function claimed(ids: string[], owner = 'W'): Promise<Map<string, Operation>> {
    const ops = ids.map((id) =>
      validateOperation(
        {
          id,
          provider: 'stripe',
          action: 'refund',
          payload: { payment_intent: `pi_${id}`, amount: 500, currency: 'usd' },
          approval: 'T-1',
        },
        ['stripe'],
      ),
    );
    await recordOperations(ctxAt(T0), ops);
    // Through the state machine, so each chain ends in its operation's state (audit verify checks it).
    for (const id of ids)
      await db.transaction(async (tx) => {
        for (const to of ['submitting', 'outcome_unknown'] as const)
          await transition(tx, id, to, { actor: 'test', now: T0, kind: 'k', rule: 'r' });
      });
    await db.query('UPDATE recon.operations SET attempt_count = 1, first_attempt_at = $2 WHERE id = ANY($1::text[])', [
      ids,
      T0.toISOString(),
    ]);
    const got = await claimForRun(db, { owner, leaseMs: 60_000, now: T0, limit: 1000, exclude: [] });
    return new Map(got.filter((o) => ids.includes(o.id)).map((o) => [o.id, o]));
  }

  const plan = (op: Operation, lookup: LookupResult, ruling: Decision): PlannedDecision => ({
    op,
    provider: 'stripe',
    lookup,
    ruling,
    nextCheckAt: null,
  });

  async function count(table: string, where: string, params: unknown[]): Promise<number> {
    const r = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM recon.${table} WHERE ${where}`, params);
    return Number(r.rows[0].n);
  }

  it('writes every item of a group on its own terms: a lost lease costs only its operation', async () => {
    const [a, b, c] = [`${prefix}-a`, `${prefix}-b`, `${prefix}-c`];
    const ops = await claimed([a, b, c]);
    // Another worker took over c's lease after ours expired.
    await db.query("UPDATE recon.operations SET lease_owner = 'OTHER', lease_expires_at = $2 WHERE id = $1", [
      c,
      ms(120_000).toISOString(),
    ]);
    const cEvents = await eventsOf(db, c);

    const results = await applyDecisions(
      ctxAt(ms(1000)),
      [
        plan(ops.get(a)!, found(txn(`re_${a}`, a)), confirm(txn(`re_${a}`, a))),
        plan(ops.get(b)!, notFound, wait),
        plan(ops.get(c)!, found(txn(`re_${c}`, c)), confirm(txn(`re_${c}`, c))),
      ],
      'W',
    );

    expect(results.map((r) => r.ok)).toEqual([true, true, false]);
    expect(!results[2].ok && results[2].error).toBeInstanceOf(LeaseLostError);
    expect(await findOperation(db, a)).toMatchObject({ state: 'confirmed', lease_owner: null, resolved_at: ms(1000) });
    expect(await findOperation(db, b)).toMatchObject({
      state: 'outcome_unknown',
      lease_owner: null,
      resolved_at: null,
    });
    expect(await findOperation(db, c)).toMatchObject({ state: 'outcome_unknown', lease_owner: 'OTHER' });
    // The provider transaction of a is linked; c wrote nothing at all.
    expect(await count('provider_transactions', 'operation_id = $1', [a])).toBe(1);
    expect(await count('provider_transactions', 'operation_id = $1', [c])).toBe(0);
    expect(await count('observations', 'operation_id = ANY($1::text[])', [[a, b]])).toBe(2);
    expect(await count('observations', 'operation_id = $1', [c])).toBe(0);
    expect(await eventsOf(db, c)).toEqual(cEvents);
    const last = (await eventsOf(db, a)).at(-1)!;
    expect(last).toMatchObject({
      kind: 'reconcile.decision',
      from_state: 'outcome_unknown',
      to_state: 'confirmed',
      rule: 'found.single',
      actor: 'test',
    });
    expect((await eventsOf(db, b)).at(-1)).toMatchObject({
      kind: 'reconcile.wait',
      from_state: 'outcome_unknown',
      to_state: 'outcome_unknown',
    });
    expect((await verifyChains(db)).ok).toBe(true);
  });

  it('an event appended after the chain head was read (a webhook) is not forked: the group is written again under its locks', async () => {
    const ids = [`${prefix}-a`, `${prefix}-b`];
    const ops = await claimed(ids);
    const heads = await chainHeads(db, ids);
    // A webhook's note on the first operation, between the head read and the group's write.
    await db.transaction((tx) => note(tx, ids[0], { actor: 'webhook', now: ms(500), kind: 'webhook.seen' }));
    const results = await applyDecisions(
      ctxAt(ms(1000)),
      ids.map((id) => ({ ...plan(ops.get(id)!, notFound, wait), head: heads.get(id) })),
      'W',
    );
    expect(results.map((r) => r.ok)).toEqual([true, true]);
    const kinds = (await eventsOf(db, ids[0])).map((e) => e.kind);
    expect(kinds.slice(-2)).toEqual(['webhook.seen', 'reconcile.wait']);
    expect((await verifyChains(db)).ok).toBe(true);
  });

  it('one statement writes the group: state, last_checked_at and lease release in one update of each row', async () => {
    const ids = Array.from({ length: 5 }, (_, i) => `${prefix}-${i}`);
    const ops = await claimed(ids);
    const heads = await chainHeads(db, ids);
    const statements: string[] = [];
    const counting: CoreContext = {
      db: {
        ...db,
        query: (sql: string, params?: unknown[]) => (statements.push(sql), db.query(sql, params)),
        transaction: (fn) => (statements.push('BEGIN'), db.transaction(fn)),
      },
      actor: 'test',
      now: () => ms(1000),
    };
    const results = await applyDecisions(
      counting,
      ids.map((id) => ({
        ...plan(ops.get(id)!, found(txn(`re_${id}`, id)), confirm(txn(`re_${id}`, id))),
        head: heads.get(id),
      })),
      'W',
    );
    expect(results.every((r) => r.ok)).toBe(true);
    expect(statements).toHaveLength(1);
    const rows = await db.query<{ state: string; lease_owner: string | null; last_checked_at: Date | null }>(
      'SELECT state, lease_owner, last_checked_at FROM recon.operations WHERE id = ANY($1::text[])',
      [ids],
    );
    expect(
      rows.rows.every((r) => r.state === 'confirmed' && r.lease_owner === null && r.last_checked_at !== null),
    ).toBe(true);
    expect((await verifyChains(db)).ok).toBe(true);
  });

  it('a store error in one item of a group is retried alone: the others are written', async () => {
    const [a, b] = [`${prefix}-a`, `${prefix}-b`];
    const ops = await claimed([a, b]);
    // An amount that is not an integer: the bigint column refuses it, and with it the group's transaction.
    const bad = txn(`re_${b}`, b, { amount: 1.5 });
    const results = await applyDecisions(
      ctxAt(ms(1000)),
      [
        plan(ops.get(a)!, found(txn(`re_${a}`, a)), confirm(txn(`re_${a}`, a))),
        plan(ops.get(b)!, found(bad), confirm(bad)),
      ],
      'W',
    );
    expect(results[0]).toMatchObject({
      ok: true,
      json: { id: a, decision: 'confirm', state: 'confirmed', provider_txn_ids: [`re_${a}`] },
    });
    expect(results[1].ok).toBe(false);
    expect((await findOperation(db, a))!.state).toBe('confirmed');
    expect(await findOperation(db, b)).toMatchObject({ state: 'outcome_unknown', lease_owner: 'W' });
    expect(await count('observations', 'operation_id = $1', [b])).toBe(0);
  });

  it('one provider transaction named by two operations in one group is linked to the first only', async () => {
    const [a, b] = [`${prefix}-a`, `${prefix}-b`];
    const ops = await claimed([a, b]);
    const shared = txn(`re_${prefix}_shared`, a);
    const results = await applyDecisions(
      ctxAt(ms(1000)),
      [plan(ops.get(a)!, found(shared), confirm(shared)), plan(ops.get(b)!, found(shared), confirm(shared))],
      'W',
    );
    expect(results.every((r) => r.ok)).toBe(true);
    const owners = await db.query('SELECT operation_id FROM recon.provider_transactions WHERE provider_id = $1', [
      shared.provider_id,
    ]);
    expect(owners.rows).toEqual([{ operation_id: a }]);
    expect(results[1].ok && results[1].json.explanation).toContain(`${shared.provider_id} is already linked to ${a}`);
    expect((await verifyChains(db)).ok).toBe(true);
  });

  it('the group writer answers each caller with its own result, however the calls are grouped', async () => {
    const ids = Array.from({ length: 30 }, (_, i) => `${prefix}-${i}`);
    const ops = await claimed(ids);
    const write = decisionWriter(ctxAt(ms(1000)), 'W', { maxGroup: 7 });
    const results = await Promise.all(
      ids.map((id, i) =>
        i % 3
          ? write(plan(ops.get(id)!, notFound, wait))
          : write(plan(ops.get(id)!, found(txn(`re_${id}`, id)), confirm(txn(`re_${id}`, id)))),
      ),
    );
    expect(results.map((r) => r.ok && r.json.id)).toEqual(ids);
    expect(results.map((r) => r.ok && r.json.decision)).toEqual(ids.map((_, i) => (i % 3 ? 'wait' : 'confirm')));
    expect(await count('operations', "id = ANY($1::text[]) AND state = 'confirmed'", [ids])).toBe(10);
    expect(await count('audit_events', "operation_id = ANY($1::text[]) AND kind LIKE 'reconcile.%'", [ids])).toBe(30);
  });

  it('a pass does not claim what another pass looked up after it began; a later pass does', async () => {
    const [a, b] = [`${prefix}-a`, `${prefix}-b`];
    const ops = await claimed([a, b], 'OTHER');
    // The other worker's pass decided `wait` for both at T0+1s and gave the leases back.
    await applyDecisions(
      ctxAt(ms(1000)),
      [plan(ops.get(a)!, notFound, wait), plan(ops.get(b)!, notFound, wait)],
      'OTHER',
    );
    expect((await findOperation(db, a))!.lease_owner).toBeNull();
    const mine = (since: Date) =>
      claimForRun(db, { owner: 'ME', leaseMs: 60_000, now: ms(2000), limit: 1000, checkedBefore: since }).then((got) =>
        got.map((o) => o.id).filter((id) => id === a || id === b),
      );
    expect(await mine(ms(500))).toEqual([]);
    expect((await mine(ms(1000))).sort()).toEqual([a, b]);
  });
});

describe.each(backends)('migration 0003 on $name', (backend) => {
  it('a store at schema 2 gets last_checked_at from its newest observation', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-mig-'));
    try {
      for (const f of fs.readdirSync(migrationsDir()).filter((f) => f < '0003'))
        fs.copyFileSync(path.join(migrationsDir(), f), path.join(dir, f));
      const db = await openStore(await backend.emptyUrl(), { autoMigrate: false, requireCurrent: false });
      try {
        await migrate(db, { dir });
        await db.query(
          `INSERT INTO recon.operations (id, provider, action, payload, payload_hash, idempotency_key, state, created_at, updated_at)
           VALUES ('m1', 'stripe', 'refund', '{}', 'h', 'm1', 'outcome_unknown', $1, $1), ('m2', 'stripe', 'refund', '{}', 'h', 'm2', 'outcome_unknown', $1, $1)`,
          [T0.toISOString()],
        );
        await db.query(
          `INSERT INTO recon.observations (operation_id, observed_at, result, detail) VALUES ('m1', $1, 'not_found', '{}'), ('m1', $2, 'not_found', '{}')`,
          [ms(1000).toISOString(), ms(5000).toISOString()],
        );
        expect((await migrate(db)).applied).toContain(3);
        const rows = await db.query<{ id: string; last_checked_at: Date | null }>(
          'SELECT id, last_checked_at FROM recon.operations ORDER BY id',
        );
        expect(rows.rows).toEqual([
          { id: 'm1', last_checked_at: ms(5000) },
          { id: 'm2', last_checked_at: null },
        ]);
      } finally {
        await db.close();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
