/**
 * Issue 10, "A changed payload is sent" and the submit half of "Provider payloads validated when
 * recorded": the payload hash is re-checked in the transaction that claims the attempt (submit and
 * every retry), a transaction linked from a submit response is checked like a lookup's, and an
 * adapter's local error before any byte is sent never burns an attempt as an unknown outcome.
 * In-process against the Stripe sandbox, asserting on its ledger.
 */
import { expect, it } from 'vitest';
import { describeWorld } from '../support/describe-world.js';
import type { StripeWorld } from '../support/stripe-world.js';
import { eventsOf } from '../../src/core/journal/chain.js';
import { verifyChains } from '../../src/core/audit/verify.js';
import { payloadHash } from '../../src/lib/canonical.js';
import { recordOperations } from '../../src/core/intake/record.js';
import { attemptsOf, getOperation, lockOperation, transactionsOf } from '../../src/core/journal/operations.js';
import { linkTransactions } from '../../src/core/journal/links.js';
import { claimAttempt, readForClaim } from '../../src/core/attempt/claims.js';
import { escalate } from '../../src/core/review/escalate.js';
import { finishAttempt, submitOperation, submitRequest } from '../../src/core/attempt/submit.js';
import { note } from '../../src/core/journal/note.js';
import type { Db } from '../../src/store/db.js';
import { validateOperation } from '../../src/core/intake/validate.js';
import { LeaseLostError, RefusedError, UsageError } from '../../src/errors.js';
import type { Provider, ProviderTxn } from '../../src/types.js';

describeWorld('what submit sends', (suite) => {
  const tamper = (w: StripeWorld, id: string) =>
    w.db.query(`UPDATE recon.operations SET payload = jsonb_set(payload, '{amount}', '99999') WHERE id = $1`, [id]);

  it('a payload changed in the database after recording is not sent: needs_review, payload_tampered, audited', async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:tp_1', amount: 1500 }]);
    await tamper(w, 'refund:tp_1');

    const err = await submitOperation(w.ctx, w.stripe, 'refund:tp_1').catch((e) => e);
    expect(err).toBeInstanceOf(RefusedError);
    expect(err.message).toMatch(/payload/);
    expect(w.sandbox.refunds({ payment_intent: pi })).toEqual([]);
    const op = await getOperation(w.db, 'refund:tp_1');
    expect(op).toMatchObject({ state: 'needs_review', review_reason: 'payload_tampered', attempt_count: 0 });
    expect(await attemptsOf(w.db, op.id)).toEqual([]);
    expect((await eventsOf(w.db, op.id)).at(-1)).toMatchObject({
      from_state: 'approved',
      to_state: 'needs_review',
      rule: 'claim.payload_tampered',
    });
    expect((await verifyChains(w.db)).ok).toBe(true);
  });

  it('a payload changed together with its payload_hash is still caught: the hash recorded in the audit chain decides', async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:tp_3', amount: 1500 }]);
    const changed = { payment_intent: pi, amount: 99999, currency: 'usd' };
    await w.db.query('UPDATE recon.operations SET payload = $2::jsonb, payload_hash = $3 WHERE id = $1', [
      'refund:tp_3',
      JSON.stringify(changed),
      payloadHash(changed),
    ]);
    const err = await submitOperation(w.ctx, w.stripe, 'refund:tp_3').catch((e) => e);
    expect(err).toBeInstanceOf(RefusedError);
    expect(w.sandbox.refunds({ payment_intent: pi })).toEqual([]);
    expect(await getOperation(w.db, 'refund:tp_3')).toMatchObject({
      state: 'needs_review',
      review_reason: 'payload_tampered',
    });
  });

  it('a retry re-checks the payload in its claim as well: nothing sent, needs_review', async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:tp_2', amount: 1500 }]);
    w.sandbox.faults.inject({ kind: 'drop_before_commit' }, { times: 2 });
    expect((await submitOperation(w.ctx, w.stripe, 'refund:tp_2')).operation.state).toBe('outcome_unknown');
    await tamper(w, 'refund:tp_2');

    const err = await submitOperation(w.ctx, w.stripe, 'refund:tp_2', {
      from: 'outcome_unknown',
      rule: 'not_found.retry',
    }).catch((e) => e);
    expect(err).toBeInstanceOf(RefusedError);
    expect(w.sandbox.refunds({ payment_intent: pi })).toEqual([]);
    expect(await getOperation(w.db, 'refund:tp_2')).toMatchObject({
      state: 'needs_review',
      review_reason: 'payload_tampered',
      attempt_count: 1,
    });
  });

  it('a transaction linked from a submit response is checked like a lookup: a different amount is needs_review (mismatch), never confirmed', async () => {
    const w = await suite.stripeWorld();
    await w.recordRefunds([{ id: 'refund:rs_1', amount: 1500 }]);
    const stripe = w.stripe;
    // An adapter (or a provider) that answers with another object than the one asked for.
    const lying: Provider = {
      ...stripe,
      async submit(req) {
        const r = await stripe.submit(req);
        return { ...r, txn: { ...r.txn!, amount: 1499 } };
      },
    };
    const r = await submitOperation(w.ctx, lying, 'refund:rs_1');
    expect(r.operation).toMatchObject({ state: 'needs_review', review_reason: 'mismatch' });
    expect(await transactionsOf(w.db, 'refund:rs_1')).toHaveLength(1);
  });

  it('an operation the adapter cannot send (no payment_intent nor charge) is refused before the claim: no attempt burned, not unknown', async () => {
    const w = await suite.stripeWorld();
    // Recorded before record-time validation existed (or through the library): nothing to refund.
    await recordOperations(w.ctx, [
      validateOperation(
        {
          id: 'refund:bad_1',
          provider: 'stripe',
          action: 'refund',
          payload: { amount: 1500, currency: 'usd' },
          approval: 'TICKET-1',
        },
        ['stripe'],
      ),
    ]);
    const err = await submitOperation(w.ctx, w.stripe, 'refund:bad_1').catch((e) => e);
    expect(err).toBeInstanceOf(UsageError);
    expect(err.message).toMatch(/payment_intent/);
    expect(await getOperation(w.db, 'refund:bad_1')).toMatchObject({ state: 'approved', attempt_count: 0 });
    expect(await attemptsOf(w.db, 'refund:bad_1')).toEqual([]);
    expect(w.sandbox.refunds()).toEqual([]);
  });
  it('a late response for an operation a person must now review links its refund as evidence and moves nothing', async () => {
    const w = await suite.stripeWorld();
    await w.recordRefunds([{ id: 'refund:late_2', amount: 1500 }]);
    const T0 = Date.now();
    const at = (ms: number) => ({ ...w.ctx, now: () => new Date(T0 + ms) });
    const claim = await claimAttempt(at(0), 'refund:late_2', {
      owner: 'A',
      leaseMs: 1000,
      from: 'approved',
      rule: 'submit.first_attempt',
    });
    // A's request outlives its lease; meanwhile someone escalates the operation.
    await escalate(at(2000), 'refund:late_2', { reason: 'customer called' });
    const err = await finishAttempt(at(2500), w.stripe, claim, {
      outcome: 'confirmed',
      txn: {
        provider_id: 're_late_2',
        status: 'succeeded',
        state: 'confirmed',
        amount: 1500,
        currency: 'usd',
        operation_id: 'refund:late_2',
        client_reference: null,
        created: new Date(T0),
      },
    }).catch((e) => e);
    expect(err).toBeInstanceOf(LeaseLostError);
    expect(await getOperation(w.db, 'refund:late_2')).toMatchObject({ state: 'needs_review' });
    expect(await transactionsOf(w.db, 'refund:late_2')).toEqual([
      expect.objectContaining({ provider_id: 're_late_2', linked_via: 'response' }),
    ]);
    expect((await eventsOf(w.db, 'refund:late_2')).at(-1)).toMatchObject({
      kind: 'late_response.received',
      to_state: 'needs_review',
    });
  });
  it('an answer that comes after the own lease ran out, with nobody else holding the operation, is applied and reported, not "result not written"', async () => {
    const w = await suite.stripeWorld();
    await w.recordRefunds([{ id: 'refund:late_3', amount: 1500 }]);
    const T0 = Date.now();
    const at = (ms: number) => ({ ...w.ctx, now: () => new Date(T0 + ms) });
    const claim = await claimAttempt(at(0), 'refund:late_3', {
      owner: 'A',
      leaseMs: 1000,
      from: 'approved',
      rule: 'submit.first_attempt',
    });
    // finishAttempt refuses (its lease is gone) after recording the answer as a late response;
    // submitOperation reports that answer (campaign-defects.test.ts checks the command's report).
    const finishing = finishAttempt(at(2000), w.stripe, claim, {
      outcome: 'confirmed',
      txn: {
        provider_id: 're_late_3',
        status: 'succeeded',
        state: 'confirmed',
        amount: 1500,
        currency: 'usd',
        operation_id: 'refund:late_3',
        client_reference: null,
        created: new Date(T0),
      },
    });
    await expect(finishing).rejects.toBeInstanceOf(LeaseLostError);
    expect(await getOperation(w.db, 'refund:late_3')).toMatchObject({ state: 'confirmed' });
    expect((await eventsOf(w.db, 'refund:late_3')).map((e) => e.kind).slice(-2)).toEqual([
      'lease.expired',
      'late_response.applied',
    ]);
  });

  /** `db`, with the text of every statement sent through it kept in `sent` (a transaction's own BEGIN: `(transaction)`). */
  const counted = (db: Db) => {
    const sent: string[] = [];
    const wrapped: Db = Object.create(db);
    wrapped.query = (sql, params) => (sent.push(sql), db.query(sql, params));
    wrapped.transaction = (fn) =>
      db.transaction((tx) => {
        sent.push('(transaction)');
        return fn({ query: (sql, params) => (sent.push(sql), tx.query(sql, params)) });
      });
    return { db: wrapped, sent };
  };

  it("an attempt's claim writes its attempt row in its move's statement, and its end, with nothing written since, is one statement: no row lock, no read", async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:end_1', amount: 1500 }]);
    const claiming = counted(w.db);
    const claim = await claimAttempt({ ...w.ctx, db: claiming.db }, 'refund:end_1', {
      owner: 'A',
      leaseMs: 60_000,
      from: 'approved',
      rule: 'submit.first_attempt',
    });
    // The claim: the row lock (with the payload hash recorded), the head and links, then the move with
    // the attempt's row and count in its statement.
    expect(claiming.sent.map((q) => q.trim().split(/\s+/).slice(0, 2).join(' '))).toEqual([
      '(transaction)',
      'SELECT o.id,',
      'SELECT h.seq',
      'WITH u',
    ]);
    const started = await w.db.query(
      'SELECT number, lease_owner, ended_at FROM recon.attempts WHERE operation_id = $1',
      ['refund:end_1'],
    );
    expect(started.rows).toEqual([{ number: 1, lease_owner: 'A', ended_at: null }]);
    expect(await getOperation(w.db, 'refund:end_1')).toMatchObject({ state: 'submitting', attempt_count: 1 });
    const answer = await w.stripe.submit(submitRequest(claim.op));
    const { db, sent } = counted(w.db);
    const op = await finishAttempt({ ...w.ctx, db }, w.stripe, claim, answer);
    expect(op.state).toBe('confirmed');
    // One statement, no transaction of its own: the move, with the attempt's end and the refund's link.
    expect(sent.map((q) => q.trim().split(/\s+/).slice(0, 2).join(' '))).toEqual(['WITH u']);
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
    expect(await transactionsOf(w.db, 'refund:end_1')).toHaveLength(1);
    expect(await attemptsOf(w.db, 'refund:end_1')).toMatchObject([{ number: 1, outcome: 'confirmed' }]);
    expect((await verifyChains(w.db)).ok).toBe(true);
  });

  it("an event written for the operation while its request is in flight (another caller's get_action): the end is written on the chain as it now stands", async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:end_2', amount: 1500 }]);
    const stripe = w.stripe;
    const noting: Provider = {
      ...stripe,
      async submit(req) {
        await w.db.transaction((tx) =>
          note(tx, req.operation_id, {
            actor: 'agent-2',
            now: new Date(),
            kind: 'mcp.call',
            detail: { tool: 'get_action' },
          }),
        );
        return stripe.submit(req);
      },
    };
    const r = await submitOperation(w.ctx, noting, 'refund:end_2');
    expect(r.operation.state).toBe('confirmed');
    expect(r.late_response).toBeUndefined();
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
    expect(await transactionsOf(w.db, 'refund:end_2')).toHaveLength(1);
    expect(await attemptsOf(w.db, 'refund:end_2')).toMatchObject([{ number: 1, outcome: 'confirmed' }]);
    const kinds = (await eventsOf(w.db, 'refund:end_2')).map((e) => e.kind);
    expect(kinds.slice(-3)).toEqual(['attempt.started', 'mcp.call', 'attempt.finished']);
    expect((await verifyChains(w.db)).ok).toBe(true);
  });

  it('an answer naming a refund linked to another operation: the end is written the long way, and the refund is not re-pointed', async () => {
    const w = await suite.stripeWorld();
    await w.recordRefunds([
      { id: 'refund:end_3a', amount: 1500 },
      { id: 'refund:end_3b', amount: 1500 },
    ]);
    const a = await submitOperation(w.ctx, w.stripe, 'refund:end_3a');
    expect(a.operation.state).toBe('confirmed');
    const stripe = w.stripe;
    // An adapter that answers with another operation's refund (a provider's bug, a replayed key).
    const other: Provider = {
      ...stripe,
      submit: async () => ({ ...a.result, replayed: true }),
    };
    const b = await submitOperation(w.ctx, other, 'refund:end_3b');
    expect(b.late_response).toBeUndefined();
    expect(await transactionsOf(w.db, 'refund:end_3a')).toMatchObject([{ provider_id: a.result.txn!.provider_id }]);
    expect(await transactionsOf(w.db, 'refund:end_3b')).toEqual([]);
    expect(b.txnIds).toEqual([]);
    expect(await attemptsOf(w.db, 'refund:end_3b')).toMatchObject([{ number: 1, outcome: 'confirmed' }]);
    expect((await eventsOf(w.db, 'refund:end_3b')).at(-1)).toMatchObject({ kind: 'attempt.finished' });
    expect(w.sandbox.refunds()).toHaveLength(1);
    expect((await verifyChains(w.db)).ok).toBe(true);
    // It carries the other operation's id: a person looks (classifyFound), as the long way always said.
    expect(b.operation.state).toBe('needs_review');
  });

  it('a claim on the operation as just read (execute_action): one statement, no transaction around it; an event written since the read sends it the long way', async () => {
    const w = await suite.stripeWorld();
    await w.recordRefunds([
      { id: 'refund:seen_1', amount: 1500 },
      { id: 'refund:seen_2', amount: 1500 },
    ]);
    const opts = { owner: 'A', leaseMs: 60_000, from: 'approved' as const, rule: 'submit.first_attempt' };
    const shape = (sent: string[]) => sent.map((q) => q.trim().split(/\s+/).slice(0, 2).join(' '));

    const one = counted(w.db);
    const seen1 = (await readForClaim(w.db, 'refund:seen_1'))!;
    const claim1 = await claimAttempt({ ...w.ctx, db: one.db }, 'refund:seen_1', { ...opts, seen: seen1 });
    expect(shape(one.sent)).toEqual(['WITH u']);
    expect(claim1.op).toMatchObject({ state: 'submitting', attempt_count: 1, lease_owner: 'A' });

    const two = counted(w.db);
    const seen2 = (await readForClaim(w.db, 'refund:seen_2'))!;
    await w.db.transaction((tx) =>
      note(tx, 'refund:seen_2', {
        actor: 'agent-2',
        now: new Date(),
        kind: 'mcp.call',
        detail: { tool: 'get_action' },
      }),
    );
    const claim2 = await claimAttempt({ ...w.ctx, db: two.db }, 'refund:seen_2', { ...opts, seen: seen2 });
    expect(shape(two.sent)).toEqual(['WITH u', '(transaction)', 'SELECT o.id,', 'SELECT h.seq', 'WITH u']);
    expect(claim2.op).toMatchObject({ state: 'submitting', attempt_count: 1 });
    expect((await eventsOf(w.db, 'refund:seen_2')).map((e) => e.kind).slice(-2)).toEqual([
      'mcp.call',
      'attempt.started',
    ]);
    expect(await attemptsOf(w.db, 'refund:seen_2')).toHaveLength(1);
    expect((await verifyChains(w.db)).ok).toBe(true);
  });

  it('a payload changed between the read and the claim is not sent: the long way records it (needs_review, payload_tampered)', async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:seen_3', amount: 1500 }]);
    const seen = (await readForClaim(w.db, 'refund:seen_3'))!;
    await tamper(w, 'refund:seen_3');
    const err = await submitOperation(w.ctx, w.stripe, 'refund:seen_3', { seen }).catch((e) => e);
    expect(err).toBeInstanceOf(RefusedError);
    expect(err.message).toMatch(/payload/);
    expect(w.sandbox.refunds({ payment_intent: pi })).toEqual([]);
    expect(await getOperation(w.db, 'refund:seen_3')).toMatchObject({
      state: 'needs_review',
      review_reason: 'payload_tampered',
      attempt_count: 0,
    });
    expect(await attemptsOf(w.db, 'refund:seen_3')).toEqual([]);
    expect((await verifyChains(w.db)).ok).toBe(true);
  });

  it("a payload_hash or idempotency key changed between the read and the claim: the long way decides, nothing is sent on the read's word", async () => {
    const w = await suite.stripeWorld();
    const [pi1, pi2] = await w.recordRefunds([
      { id: 'refund:seen_4', amount: 1500 },
      { id: 'refund:seen_5', amount: 1500 },
    ]);
    const seen4 = (await readForClaim(w.db, 'refund:seen_4'))!;
    await w.db.query(`UPDATE recon.operations SET payload_hash = repeat('0', 64) WHERE id = 'refund:seen_4'`);
    const err = await submitOperation(w.ctx, w.stripe, 'refund:seen_4', { seen: seen4 }).catch((e) => e);
    expect(err).toBeInstanceOf(RefusedError);
    expect(w.sandbox.refunds({ payment_intent: pi1 })).toEqual([]);
    expect(await getOperation(w.db, 'refund:seen_4')).toMatchObject({
      state: 'needs_review',
      review_reason: 'payload_tampered',
    });

    // A key changed behind recon's back: what is sent and what the attempt records are the same key.
    const seen5 = (await readForClaim(w.db, 'refund:seen_5'))!;
    await w.db.query(`UPDATE recon.operations SET idempotency_key = 'changed-key' WHERE id = 'refund:seen_5'`);
    const r = await submitOperation(w.ctx, w.stripe, 'refund:seen_5', { seen: seen5 });
    const [attempt] = await attemptsOf(w.db, 'refund:seen_5');
    expect(attempt.idempotency_key).toBe(r.operation.idempotency_key);
    const started = (await eventsOf(w.db, 'refund:seen_5')).find((e) => e.kind === 'attempt.started')!;
    expect(started.detail.idempotency_key).toBe(r.operation.idempotency_key);
    expect(w.sandbox.refunds({ payment_intent: pi2 })).toHaveLength(1);
  });

  it("a store error at the one-statement end is the caller's, as on the long way: not read as a lost lease, the operation left to its lease", async () => {
    const w = await suite.stripeWorld();
    const [pi] = await w.recordRefunds([{ id: 'refund:end_4', amount: 1500 }]);
    const claim = await claimAttempt(w.ctx, 'refund:end_4', {
      owner: 'A',
      leaseMs: 60_000,
      from: 'approved',
      rule: 'submit.first_attempt',
    });
    const answer = await w.stripe.submit(submitRequest(claim.op));
    const failing: Db = Object.create(w.db);
    failing.query = () => Promise.reject(Object.assign(new Error('terminating connection'), { code: '57P01' }));
    const err = await finishAttempt({ ...w.ctx, db: failing }, w.stripe, claim, answer).catch((e) => e);
    expect(err).not.toBeInstanceOf(LeaseLostError);
    expect(err.message).toMatch(/terminating connection/);
    expect(await getOperation(w.db, 'refund:end_4')).toMatchObject({ state: 'submitting', lease_owner: 'A' });
    expect(w.sandbox.refunds({ payment_intent: pi })).toHaveLength(1);
  });
});

describeWorld(
  'a late answer racing another writer',
  (suite) => {
    it('a late answer whose refund another operation linked meanwhile is recorded as linked there, not lost to a store error', async () => {
      const w = await suite.stripeWorld();
      await w.recordRefunds([
        { id: 'refund:late_4', amount: 1500 },
        { id: 'refund:late_5', amount: 1500 },
      ]);
      const T0 = Date.now();
      const at = (ms: number) => ({ ...w.ctx, now: () => new Date(T0 + ms) });
      const claim = await claimAttempt(at(0), 'refund:late_4', {
        owner: 'A',
        leaseMs: 1000,
        from: 'approved',
        rule: 'submit.first_attempt',
      });
      const txn: ProviderTxn = {
        provider_id: 're_late_4',
        status: 'succeeded',
        state: 'confirmed',
        amount: 1500,
        currency: 'usd',
        operation_id: 'refund:late_4',
        client_reference: null,
        created: new Date(T0),
      };
      // Another writer (a person attaching it to late_5) has linked the refund and not committed yet.
      let commit!: () => void;
      let attached!: () => void;
      const isAttached = new Promise<void>((resolve) => (attached = resolve));
      const attaching = w.db.transaction(async (tx) => {
        await lockOperation(tx, 'refund:late_5');
        await linkTransactions(tx, [{ provider: 'stripe', operationId: 'refund:late_5', txn }], {
          via: 'attach',
          by: 'person',
          at: new Date(T0),
        });
        attached();
        await new Promise<void>((resolve) => (commit = resolve));
      });
      await isAttached;
      // A's answer comes after its lease ran out: it reads the refund as free, then waits on the link.
      const finishing = finishAttempt(at(2000), w.stripe, claim, { outcome: 'confirmed', txn }).catch((e) => e);
      while (
        (
          await w.db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          )
        ).rows[0].n === 0
      ) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      commit();
      await attaching;
      expect(await finishing).toBeInstanceOf(LeaseLostError);
      expect(await transactionsOf(w.db, 'refund:late_4')).toEqual([]);
      expect(await transactionsOf(w.db, 'refund:late_5')).toEqual([
        expect.objectContaining({ provider_id: 're_late_4', linked_via: 'attach' }),
      ]);
      expect(await getOperation(w.db, 'refund:late_4')).toMatchObject({ state: 'submitting' });
      expect((await eventsOf(w.db, 'refund:late_4')).at(-1)).toMatchObject({
        kind: 'late_response.received',
        detail: expect.objectContaining({ provider_id: 're_late_4', linked: false, linked_to: 'refund:late_5' }),
      });
    });
  },
  { only: 'postgres' },
);
