/**
 * The re-plan guard's read (src/core/intake/replan.ts holderOf), which every proposal makes: which
 * live operation of the same provider and action already has the proposal's target (Stripe: its
 * payment intent or charge; other providers: its client reference). What it answers, and that it
 * is answered from the target's indexes (migration 0006), not by reading the store's whole history:
 * at 200,000 operations it took 105 ms a proposal before (npm run bench, list-unresolved).
 */
import { expect, it } from 'vitest';
import { describeWorld } from '../support/describe-world.js';
import { holderOf } from '../../src/core/intake/replan.js';
import { recordOperations } from '../../src/core/intake/record.js';
import { validateOperation } from '../../src/core/intake/validate.js';
import type { Db, Queryable } from '../../src/store/db.js';

describeWorld('the re-plan guard', (suite) => {
  const refund = (id: string, payload: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    validateOperation(
      { id, provider: 'stripe', action: 'refund', payload: { amount: 1000, currency: 'usd', ...payload }, ...extra },
      ['stripe'],
    );
  const proposal = (id: string, payload: Record<string, unknown>, client_reference: string | null = null) => ({
    id,
    provider: 'stripe',
    action: 'refund',
    payload: { amount: 1000, currency: 'usd', ...payload },
    client_reference,
  });
  /** The statement the guard sends, and what it answers. */
  const guard = async (db: Db, op: ReturnType<typeof proposal>, type = 'stripe') => {
    let sent: { sql: string; params: unknown[] } | undefined;
    const q: Queryable = { query: (sql, params) => ((sent = { sql, params: params ?? [] }), db.query(sql, params)) };
    return { holder: await holderOf(q, op, type), sent: sent! };
  };

  it('answers the oldest live operation with the same payment intent or charge; failed and cancelled ones hold nothing', async () => {
    const db = await suite.db();
    const ctx = { db, actor: 'test', now: () => new Date() };
    await recordOperations(ctx, [refund('refund:g_1', { payment_intent: 'pi_g1' }, { approval: 'T-1' })]);
    await recordOperations(ctx, [refund('refund:g_2', { payment_intent: 'pi_g1' })]);
    await recordOperations(ctx, [refund('refund:g_3', { charge: 'ch_g3' })]);
    await recordOperations(ctx, [refund('refund:g_4', { payment_intent: 'pi_g4' })]);
    await db.query(`UPDATE recon.operations SET state = 'cancelled' WHERE id = 'refund:g_4'`);

    expect((await guard(db, proposal('refund:new_1', { payment_intent: 'pi_g1' }))).holder).toMatchObject({
      id: 'refund:g_1',
      state: 'approved',
    });
    // The operation itself is not its own holder: the second one is held by the first only.
    expect((await guard(db, proposal('refund:g_1', { payment_intent: 'pi_g1' }))).holder?.id).toBe('refund:g_2');
    expect((await guard(db, proposal('refund:new_2', { charge: 'ch_g3' }))).holder?.id).toBe('refund:g_3');
    expect((await guard(db, proposal('refund:new_3', { payment_intent: 'pi_x', charge: 'ch_g3' }))).holder?.id).toBe(
      'refund:g_3',
    );
    expect((await guard(db, proposal('refund:new_4', { payment_intent: 'pi_g4' }))).holder).toBeNull();
    expect((await guard(db, proposal('refund:new_5', { payment_intent: 'pi_none' }))).holder).toBeNull();
    // Another action on the same target is not a re-plan of this one.
    expect(
      (await guard(db, { ...proposal('refund:new_6', { payment_intent: 'pi_g1' }), action: 'capture' })).holder,
    ).toBeNull();
  });

  it('reads the target from its indexes, never the whole history (fails before migration 0006 and the target-first read)', async () => {
    const db = await suite.db();
    const ctx = { db, actor: 'test', now: () => new Date() };
    await recordOperations(ctx, [
      refund('refund:i_1', { payment_intent: 'pi_i1' }),
      refund('refund:i_2', { charge: 'ch_i2' }),
    ]);
    // The plan the statement can have at all: with sequential scans off, a statement the target's
    // indexes cannot serve walks an index of the whole table in created_at order instead.
    const plan = async (op: ReturnType<typeof proposal>) => {
      const { sent } = await guard(db, op);
      return db.transaction(async (tx) => {
        await tx.query('SET LOCAL enable_seqscan = off');
        const r = await tx.query<Record<string, string>>(`EXPLAIN ${sent.sql}`, sent.params);
        return r.rows.map((row) => Object.values(row)[0]).join('\n');
      });
    };
    const byIntent = await plan(proposal('refund:i_new', { payment_intent: 'pi_new' }));
    expect(byIntent).toContain('operations_payment_intent_idx');
    expect(byIntent).not.toContain('operations_created_idx');
    const byBoth = await plan(proposal('refund:i_new', { payment_intent: 'pi_new', charge: 'ch_new' }));
    expect(byBoth).toContain('operations_payment_intent_idx');
    expect(byBoth).toContain('operations_charge_idx');
  });

  it('its generic plan (a session that keeps the statement prepared, keepPlan) reads the same indexes', async () => {
    const db = await suite.db();
    // A prepared statement may be planned once for any values (plan_cache_mode forces that plan
    // here): the partial indexes (WHERE payload->>'payment_intent' IS NOT NULL) must still serve it.
    const generic = async (op: ReturnType<typeof proposal>) => {
      const { sent } = await guard(db, op);
      const literal = (v: unknown) => `'${String(v).replaceAll("'", "''")}'`;
      return db.transaction(async (tx) => {
        await tx.query('SET LOCAL enable_seqscan = off');
        await tx.query('SET LOCAL plan_cache_mode = force_generic_plan');
        await tx.query(`PREPARE guard_generic(${sent.params.map(() => 'text').join(', ')}) AS ${sent.sql}`);
        try {
          const r = await tx.query<Record<string, string>>(
            `EXPLAIN EXECUTE guard_generic(${sent.params.map(literal).join(', ')})`,
          );
          return r.rows.map((row) => Object.values(row)[0]).join('\n');
        } finally {
          await tx.query('DEALLOCATE guard_generic');
        }
      });
    };
    const byIntent = await generic(proposal('refund:g_new', { payment_intent: 'pi_new' }));
    expect(byIntent).toContain('operations_payment_intent_idx');
    expect(byIntent).not.toContain('operations_created_idx');
    const byBoth = await generic(proposal('refund:g_new', { payment_intent: 'pi_new', charge: 'ch_new' }));
    expect(byBoth).toContain('operations_payment_intent_idx');
    expect(byBoth).toContain('operations_charge_idx');
  });
});
