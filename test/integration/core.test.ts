/**
 * The operations core over both store backends: recording (frozen payloads, all-or-nothing
 * batches), the state machine with its audit append, listing, `ops show`, and the audit trail's
 * tamper resistance (SPEC §2, §3, §8 incidents 2 and 10).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { approveOperation } from '../../src/core/intake/approve.js';
import { eventHash, eventsOf } from '../../src/core/journal/chain.js';
import { verifyChains } from '../../src/core/audit/verify.js';
import type { CoreContext } from '../../src/core/journal/context.js';
import { recordOperations } from '../../src/core/intake/record.js';
import { findOperation, listOperations } from '../../src/core/journal/operations.js';
import { transition } from '../../src/core/journal/transition.js';
import { validateOperation, type OperationInput } from '../../src/core/intake/validate.js';
import { showOperation } from '../../src/core/journal/views.js';
import { RefusedError } from '../../src/errors.js';
import type { Db, Queryable } from '../../src/store/db.js';
import { UNRESOLVED_STATES, type State } from '../../src/types.js';
import { backends, removeTempStores, resetStore } from '../support/backends.js';

const T0 = new Date('2025-03-01T10:00:00.000Z');

function input(id: string, over: Partial<Record<string, unknown>> = {}): OperationInput {
  return validateOperation(
    {
      id,
      provider: 'stripe',
      action: 'refund',
      payload: { payment_intent: 'pi_1', amount: 1999, currency: 'usd' },
      ...over,
    },
    ['stripe', 'warehouse'],
  );
}

async function count(q: Queryable, table: string, where = 'true', params: unknown[] = []): Promise<number> {
  const r = await q.query<{ n: number }>(`SELECT count(*)::int AS n FROM recon.${table} WHERE ${where}`, params);
  return Number(r.rows[0].n);
}

async function setState(db: Db, id: string, state: State): Promise<void> {
  await db.query('UPDATE recon.operations SET state = $2 WHERE id = $1', [id, state]);
}

afterAll(() => removeTempStores());

describe.each(backends)('operations core on $name', (backend) => {
  let db: Db;
  let ctx: CoreContext;
  const at = (d: Date): CoreContext => ({ db, actor: 'test', now: () => d });

  // One store per backend (a fresh PGlite store takes seconds to create); every test starts from
  // empty tables. The append-only triggers are disabled only for the reset.
  beforeAll(async () => {
    db = await backend.open();
  });
  afterAll(async () => {
    await db?.close();
  });
  beforeEach(async () => {
    await resetStore(db);
    ctx = at(T0);
  });

  describe('recordOperations', () => {
    it('creates an operation, proposed without approval and approved with it, with a first audit event', async () => {
      const r = await recordOperations(ctx, [input('op_a'), input('op_b', { approval: 'TICKET-1' })]);
      expect(r).toEqual([
        { id: 'op_a', state: 'proposed', created: true },
        { id: 'op_b', state: 'approved', created: true },
      ]);
      const a = (await findOperation(db, 'op_a'))!;
      expect(a).toMatchObject({
        state: 'proposed',
        idempotency_key: 'op_a',
        amount: 1999,
        currency: 'usd',
        attempt_count: 0,
      });
      expect(a.created_at.toISOString()).toBe(T0.toISOString());
      const events = await eventsOf(db, 'op_b');
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({
        seq: 1,
        kind: 'recorded',
        to_state: 'approved',
        rule: 'record.approved',
        actor: 'test',
      });
    });

    it('the second click: same id and same payload is the existing operation, unchanged', async () => {
      await recordOperations(ctx, [input('op_a')]);
      await setState(db, 'op_a', 'outcome_unknown');
      // Key order differs: the canonical hash is the same.
      const again = validateOperation(
        {
          payload: { currency: 'usd', amount: 1999, payment_intent: 'pi_1' },
          action: 'refund',
          provider: 'stripe',
          id: 'op_a',
        },
        ['stripe'],
      );
      const r = await recordOperations(at(new Date(T0.getTime() + 60_000)), [again]);
      expect(r).toEqual([{ id: 'op_a', state: 'outcome_unknown', created: false }]);
      const op = (await findOperation(db, 'op_a'))!;
      expect(op.state).toBe('outcome_unknown');
      expect(op.updated_at.toISOString()).toBe(T0.toISOString());
      expect(await count(db, 'operations')).toBe(1);
      expect(await count(db, 'audit_events')).toBe(1);
    });

    it('same id with a changed amount is refused and nothing is written', async () => {
      await recordOperations(ctx, [input('op_a')]);
      const changed = input('op_a', { payload: { payment_intent: 'pi_1', amount: 2999, currency: 'usd' } });
      const err = await recordOperations(ctx, [changed]).catch((e) => e);
      expect(err).toBeInstanceOf(RefusedError);
      expect(err.rule).toBe('payload_frozen');
      expect(err.message).toMatch(/op_a: payload differs/);
      expect((await findOperation(db, 'op_a'))!.amount).toBe(1999);
      expect(await count(db, 'audit_events')).toBe(1);
    });

    it('same id for another provider or action is refused', async () => {
      await recordOperations(ctx, [input('op_a')]);
      const err = await recordOperations(ctx, [input('op_a', { provider: 'warehouse' })]).catch((e) => e);
      expect(err).toBeInstanceOf(RefusedError);
      expect((await findOperation(db, 'op_a'))!.provider).toBe('stripe');
    });

    it('a batch is all or nothing: when the 3rd conflicts, the first two are not written either', async () => {
      await recordOperations(ctx, [input('op_c')]);
      const batch = [
        input('op_a'),
        input('op_b'),
        input('op_c', { payload: { payment_intent: 'pi_1', amount: 1, currency: 'usd' } }),
      ];
      await expect(recordOperations(ctx, batch)).rejects.toBeInstanceOf(RefusedError);
      expect(await findOperation(db, 'op_a')).toBeNull();
      expect(await findOperation(db, 'op_b')).toBeNull();
      expect(await count(db, 'operations')).toBe(1);
      expect(await count(db, 'audit_events')).toBe(1);
    });

    it('all or nothing across chunks: a conflict in the second chunk of 1,000 rolls back the first', async () => {
      await recordOperations(ctx, [input('op_1500')]);
      const batch = Array.from({ length: 1500 }, (_, i) => input(`op_${i + 1}`));
      batch[1499] = input('op_1500', { payload: { amount: 5, currency: 'usd', payment_intent: 'pi_1' } });
      await expect(recordOperations(ctx, batch)).rejects.toBeInstanceOf(RefusedError);
      expect(await count(db, 'operations')).toBe(1);
      expect(await count(db, 'audit_events')).toBe(1);
    });

    it('the same id twice in one batch with the same payload is recorded once', async () => {
      const r = await recordOperations(ctx, [input('op_a'), input('op_b'), input('op_a')]);
      expect(r.map((x) => x.id)).toEqual(['op_a', 'op_b', 'op_a']);
      expect(r[0]).toEqual({ id: 'op_a', state: 'proposed', created: true });
      expect(await count(db, 'operations')).toBe(2);
      expect(await count(db, 'audit_events', 'operation_id = $1', ['op_a'])).toBe(1);
    });

    it('the same id twice in one batch with different payloads refuses the batch, nothing written', async () => {
      const batch = [
        input('op_a'),
        input('op_b'),
        input('op_a', { payload: { amount: 1, currency: 'usd', payment_intent: 'pi_1' } }),
      ];
      const err = await recordOperations(ctx, batch).catch((e) => e);
      expect(err).toBeInstanceOf(RefusedError);
      expect(err.message).toMatch(/an earlier record in this input/);
      expect(await count(db, 'operations')).toBe(0);
      expect(await count(db, 'audit_events')).toBe(0);
    });
  });

  describe('approveOperation and transition()', () => {
    it('approves a proposed operation, storing the reference and one audit event', async () => {
      await recordOperations(ctx, [input('op_a')]);
      const later = new Date(T0.getTime() + 5_000);
      const op = await approveOperation(at(later), 'op_a', 'TICKET-9');
      expect(op).toMatchObject({ state: 'approved', approval: 'TICKET-9' });
      const stored = (await findOperation(db, 'op_a'))!;
      expect(stored).toMatchObject({ state: 'approved', approval: 'TICKET-9' });
      expect(stored.updated_at.toISOString()).toBe(later.toISOString());
      const events = await eventsOf(db, 'op_a');
      expect(events.map((e) => [e.seq, e.kind, e.from_state, e.to_state, e.rule])).toEqual([
        [1, 'recorded', null, 'proposed', 'record.proposed'],
        [2, 'approved', 'proposed', 'approved', 'human.approval'],
      ]);
      expect(events[1].detail).toEqual({ approval: 'TICKET-9' });
    });

    it('refuses to approve an approved operation and writes nothing', async () => {
      await recordOperations(ctx, [input('op_a', { approval: 'T-1' })]);
      const err = await approveOperation(ctx, 'op_a', 'T-2').catch((e) => e);
      expect(err).toBeInstanceOf(RefusedError);
      expect(err.rule).toBe('state_machine');
      expect((await findOperation(db, 'op_a'))!.approval).toBe('T-1');
      expect(await count(db, 'audit_events')).toBe(1);
    });

    it.each<[State, State]>([
      ['proposed', 'submitting'],
      ['approved', 'confirmed'],
      ['approved', 'failed'],
      ['confirmed', 'failed'],
      ['failed', 'submitting'],
      ['cancelled', 'approved'],
      ['needs_review', 'submitting'],
      ['pending', 'submitting'],
    ])('refuses %s → %s and writes nothing', async (from, to) => {
      await recordOperations(ctx, [input('op_a')]);
      await setState(db, 'op_a', from);
      const before = (await findOperation(db, 'op_a'))!;
      const later = new Date(T0.getTime() + 1000);
      const err = await db
        .transaction((tx) => transition(tx, 'op_a', to, { actor: 'test', now: later, kind: 'k', rule: 'r' }))
        .catch((e) => e);
      expect(err).toBeInstanceOf(RefusedError);
      expect(await findOperation(db, 'op_a')).toEqual(before);
      expect(await count(db, 'audit_events')).toBe(1);
    });

    it('every allowed move appends exactly one chained audit event naming the rule and actor', async () => {
      await recordOperations(ctx, [input('op_a', { approval: 'T-1' })]);
      const path: State[] = ['submitting', 'outcome_unknown', 'pending', 'needs_review', 'confirmed'];
      let t = T0.getTime();
      for (const [i, to] of path.entries()) {
        const now = new Date((t += 1000));
        const { op, event } = await db.transaction((tx) =>
          transition(tx, 'op_a', to, {
            actor: `worker-${i}`,
            now,
            kind: `step.${i}`,
            rule: `rule.${i}`,
            review_reason: 'duplicate',
            by: 'person', // only a person leaves needs_review (SPEC §3)
            detail: { i },
          }),
        );
        expect(op.state).toBe(to);
        expect(event).toMatchObject({
          seq: i + 2,
          kind: `step.${i}`,
          to_state: to,
          rule: `rule.${i}`,
          actor: `worker-${i}`,
        });
        expect(await count(db, 'audit_events', 'operation_id = $1', ['op_a'])).toBe(i + 2);
      }
      const final = (await findOperation(db, 'op_a'))!;
      expect(final.state).toBe('confirmed');
      expect(final.resolved_at?.getTime()).toBe(t);
      expect(final.review_reason).toBe('duplicate');
      const events = await eventsOf(db, 'op_a');
      expect(events.map((e) => e.from_state)).toEqual([
        null,
        'approved',
        'submitting',
        'outcome_unknown',
        'pending',
        'needs_review',
      ]);
      expect(events[4].detail).toEqual({ i: 3, review_reason: 'duplicate' });
      for (let i = 1; i < events.length; i++) expect(events[i].prev_hash).toBe(events[i - 1].hash);
      expect((await verifyChains(db)).ok).toBe(true);
    });

    it('a transaction that fails after the move leaves neither the new state nor the event', async () => {
      await recordOperations(ctx, [input('op_a', { approval: 'T-1' })]);
      const boom = new Error('crash after transition');
      const err = await db
        .transaction(async (tx) => {
          await transition(tx, 'op_a', 'submitting', {
            actor: 'test',
            now: new Date(T0.getTime() + 1),
            kind: 'k',
            rule: 'r',
          });
          throw boom;
        })
        .catch((e) => e);
      expect(err).toBe(boom);
      expect((await findOperation(db, 'op_a'))!.state).toBe('approved');
      expect(await count(db, 'audit_events')).toBe(1);
    });

    it('an audit append that fails rolls the state change back', async () => {
      await recordOperations(ctx, [input('op_a', { approval: 'T-1' })]);
      // jsonb cannot hold \u0000, so the event insert fails after the row was updated.
      const err = await db
        .transaction((tx) =>
          transition(tx, 'op_a', 'cancelled', {
            actor: 'test',
            now: T0,
            kind: 'k',
            rule: 'r',
            detail: { bad: '\u0000' },
          }),
        )
        .catch((e) => e);
      expect(err).toBeInstanceOf(Error);
      expect((await findOperation(db, 'op_a'))!.state).toBe('approved');
      expect(await count(db, 'audit_events')).toBe(1);
    });
  });

  describe('listOperations', () => {
    beforeEach(async () => {
      // op_1 oldest … op_6 newest, one minute apart.
      const specs: [string, State, string, string | null][] = [
        ['op_1', 'confirmed', 'stripe', 'ord_1'],
        ['op_2', 'outcome_unknown', 'stripe', 'ord_2'],
        ['op_3', 'needs_review', 'warehouse', 'ord_2'],
        ['op_4', 'pending', 'stripe', null],
        ['op_5', 'proposed', 'warehouse', 'ord_5'],
        ['op_6', 'submitting', 'stripe', 'ord_6'],
      ];
      for (const [i, [id, state, provider, ref]] of specs.entries()) {
        await recordOperations(at(new Date(T0.getTime() + i * 60_000)), [
          input(id, { provider, client_reference: ref ?? undefined }),
        ]);
        await setState(db, id, state);
      }
    });
    const ids = async (f: Partial<Parameters<typeof listOperations>[1]>) =>
      (await listOperations(db, { limit: 50, ...f })).map((o) => o.id);

    it('lists newest first', async () => {
      expect(await ids({})).toEqual(['op_6', 'op_5', 'op_4', 'op_3', 'op_2', 'op_1']);
    });
    it('filters by the unresolved states', async () => {
      expect(await ids({ states: [...UNRESOLVED_STATES] })).toEqual(['op_6', 'op_4', 'op_3', 'op_2']);
    });
    it('filters by a set of states, resolved ones included', async () => {
      expect(await ids({ states: ['confirmed', 'proposed'] })).toEqual(['op_5', 'op_1']);
      expect(await ids({ states: ['needs_review'] })).toEqual(['op_3']);
    });
    it('filters by provider', async () => {
      expect(await ids({ provider: 'warehouse' })).toEqual(['op_5', 'op_3']);
    });
    it('filters by created before (--older-than)', async () => {
      expect(await ids({ createdBefore: new Date(T0.getTime() + 2 * 60_000) })).toEqual(['op_2', 'op_1']);
    });
    it('filters by client reference', async () => {
      expect(await ids({ clientReference: 'ord_2' })).toEqual(['op_3', 'op_2']);
    });
    it('combines filters', async () => {
      expect(
        await ids({
          states: [...UNRESOLVED_STATES],
          provider: 'stripe',
          createdBefore: new Date(T0.getTime() + 4 * 60_000),
        }),
      ).toEqual(['op_4', 'op_2']);
    });
    it('honours the limit', async () => {
      expect(await ids({ limit: 2 })).toEqual(['op_6', 'op_5']);
    });
    it('orders operations created at the same instant by id, stably', async () => {
      await recordOperations(ctx, [input('same_b'), input('same_a')]);
      const list = await ids({ createdBefore: new Date(T0.getTime() + 1) });
      expect(list).toEqual(['same_b', 'same_a', 'op_1']);
    });
  });

  describe('showOperation', () => {
    it('returns the record, attempts, transactions, observations and the timeline in the SPEC shape', async () => {
      await recordOperations(ctx, [input('op_a', { client_reference: 'ord_1', approval: 'T-1' })]);
      const detail = await showOperation(db, 'op_a');
      expect(Object.keys(detail).sort()).toEqual([
        'attempts',
        'events',
        'observations',
        'operation',
        'provider_transactions',
      ]);
      for (const f of [
        'id',
        'provider',
        'action',
        'state',
        'idempotency_key',
        'client_reference',
        'amount',
        'currency',
        'attempt_count',
        'created_at',
        'updated_at',
        'provider_txn_ids',
        'review_reason',
      ]) {
        expect(detail.operation).toHaveProperty(f);
      }
      expect(detail.operation).toMatchObject({
        id: 'op_a',
        provider: 'stripe',
        action: 'refund',
        state: 'approved',
        idempotency_key: 'op_a',
        client_reference: 'ord_1',
        amount: 1999,
        currency: 'usd',
        attempt_count: 0,
        created_at: T0.toISOString(),
        provider_txn_ids: [],
        review_reason: null,
      });
      expect(detail.attempts).toEqual([]);
      expect(detail.provider_transactions).toEqual([]);
      expect(detail.observations).toEqual([]);
      expect(detail.events).toHaveLength(1);
      expect(JSON.parse(JSON.stringify(detail)).operation.created_at).toBe(T0.toISOString());
    });

    it('shows a missing operation as not found (exit 3)', async () => {
      const err = await showOperation(db, 'nope').catch((e) => e);
      expect(err.exitCode).toBe(3);
    });
  });

  describe('the audit trail', () => {
    beforeEach(async () => {
      await recordOperations(ctx, [
        input('op_a', { approval: 'T' }),
        input('op_b', { approval: 'T' }),
        input('op_c', { approval: 'T' }),
      ]);
      for (const id of ['op_a', 'op_b', 'op_c']) {
        for (const [i, to] of (['submitting', 'outcome_unknown', 'confirmed'] as State[]).entries()) {
          await db.transaction((tx) =>
            transition(tx, id, to, { actor: 'w', now: new Date(T0.getTime() + (i + 1) * 1000), kind: 'k', rule: 'r' }),
          );
        }
      }
    });

    it.each([
      ['UPDATE', "UPDATE recon.audit_events SET actor = 'mallory' WHERE operation_id = 'op_a'"],
      ['DELETE', "DELETE FROM recon.audit_events WHERE operation_id = 'op_a'"],
      ['TRUNCATE', 'TRUNCATE recon.audit_events'],
    ])('the database refuses %s', async (verb, sql) => {
      const err = await db.query(sql).catch((e) => e);
      expect(err).toBeInstanceOf(Error);
      expect(String(err.message)).toContain(`${verb} is not allowed`);
      expect(await count(db, 'audit_events')).toBe(12);
      expect(await count(db, 'audit_events', "actor = 'mallory'")).toBe(0);
    });

    it('verifies a clean trail', async () => {
      const r = await verifyChains(db);
      expect(r).toEqual({
        ok: true,
        operations_checked: 3,
        events_checked: 12,
        broken: [],
        keying: { hmac: 'unkeyed_store', keyed_since: null, key_id: null, keyed_events: 0, unkeyed_events: 12 },
      });
      // Paging must not break chains at page boundaries.
      expect(await verifyChains(db, { pageSize: 3 })).toEqual(r);
    });

    async function tamper(sql: string): Promise<void> {
      await db.transaction(async (tx) => {
        await tx.query('ALTER TABLE recon.audit_events DISABLE TRIGGER USER');
        await tx.query(sql);
        await tx.query('ALTER TABLE recon.audit_events ENABLE TRIGGER USER');
      });
    }

    it('finds a row changed behind the trigger, reporting the first broken link per operation', async () => {
      // op_a: seq 2 and seq 3 edited → only seq 2 is reported. op_c: a deleted event → a seq gap.
      await tamper("UPDATE recon.audit_events SET actor = 'mallory' WHERE operation_id = 'op_a' AND seq IN (2, 3)");
      await tamper("DELETE FROM recon.audit_events WHERE operation_id = 'op_c' AND seq = 3");
      // The triggers are back: a plain edit is refused again.
      await expect(db.query("UPDATE recon.audit_events SET actor = 'x'")).rejects.toThrow(/not allowed/);
      for (const pageSize of [5000, 2]) {
        const r = await verifyChains(db, { pageSize });
        expect(r.ok).toBe(false);
        expect(r.operations_checked).toBe(3);
        expect(r.broken).toEqual([
          expect.objectContaining({ operation_id: 'op_a', seq: 2, problem: 'hash_mismatch' }),
          expect.objectContaining({ operation_id: 'op_c', seq: 4, problem: 'seq_gap', expected: '3', found: '4' }),
        ]);
      }
    });

    it('finds an edit that also recomputed the row hash, at the next link', async () => {
      const events = await eventsOf(db, 'op_b');
      const forged = { ...events[1], actor: 'mallory' };
      const hash = eventHash(forged.prev_hash, forged);
      await tamper(
        `UPDATE recon.audit_events SET actor = 'mallory', hash = '${hash}' WHERE operation_id = 'op_b' AND seq = 2`,
      );
      const r = await verifyChains(db);
      expect(r.broken).toEqual([
        expect.objectContaining({ operation_id: 'op_b', seq: 3, problem: 'prev_hash_mismatch', expected: hash }),
      ]);
    });

    it('verifies one operation on its own', async () => {
      await tamper("UPDATE recon.audit_events SET kind = 'forged' WHERE operation_id = 'op_a' AND seq = 4");
      expect(await verifyChains(db, { operationId: 'op_b' })).toMatchObject({
        ok: true,
        operations_checked: 1,
        events_checked: 4,
      });
      expect(await verifyChains(db, { operationId: 'op_a' })).toMatchObject({
        ok: false,
        broken: [expect.objectContaining({ seq: 4 })],
      });
    });
  });

  it.runIf(backend.name === 'postgres')('lists unresolved operations through operations_unresolved_idx', async () => {
    await db.query(
      `INSERT INTO recon.operations (id, provider, action, payload, payload_hash, idempotency_key, state, created_at, updated_at)
       SELECT 'done_' || g, 'stripe', 'refund', '{}', 'h', 'done_' || g, 'confirmed',
              $1::timestamptz + g * interval '1 second', $1::timestamptz
         FROM generate_series(1, 5000) g`,
      [T0.toISOString()],
    );
    await db.query(
      `INSERT INTO recon.operations (id, provider, action, payload, payload_hash, idempotency_key, state, created_at, updated_at)
       SELECT 'open_' || g, 'stripe', 'refund', '{}', 'h', 'open_' || g, (ARRAY['outcome_unknown','needs_review','pending'])[1 + g % 3],
              $1::timestamptz + g * interval '7 second', $1::timestamptz
         FROM generate_series(1, 5) g`,
      [T0.toISOString()],
    );
    await db.query('ANALYZE recon.operations');
    const plans: string[] = [];
    const explaining: Queryable = {
      async query(sql, params) {
        const r = await db.query<Record<string, string>>('EXPLAIN ' + sql, params);
        plans.push(r.rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n'));
        return { rows: [], rowCount: 0 };
      },
    };
    await listOperations(explaining, { states: [...UNRESOLVED_STATES], limit: 50 });
    await listOperations(explaining, { states: ['needs_review', 'outcome_unknown'], limit: 50 });
    expect(plans).toHaveLength(2);
    for (const plan of plans) expect(plan).toContain('operations_unresolved_idx');
    // And the query itself returns just the unresolved ones.
    expect((await listOperations(db, { states: [...UNRESOLVED_STATES], limit: 50 })).map((o) => o.id)).toEqual([
      'open_5',
      'open_4',
      'open_3',
      'open_2',
      'open_1',
    ]);
  });
});
