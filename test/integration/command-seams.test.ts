/**
 * Issue 25, "one seam per command": a command's work is a `run…(options, deps)` that returns data,
 * tested here without commander, a terminal or stdout — on a real embedded store and the Stripe
 * sandbox, asserting on the provider's ledger and the store.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { runAttach } from '../../commands/attach.js';
import { runVerify } from '../../commands/audit-verify.js';
import { runEscalate } from '../../commands/escalate.js';
import { runLookup } from '../../commands/lookup.js';
import { runList } from '../../commands/ops-list.js';
import { runApprove } from '../../commands/ops-approve.js';
import { runRecord } from '../../commands/ops-record.js';
import { runShow } from '../../commands/ops-show.js';
import { runRetry } from '../../commands/retry.js';
import { runCommand } from '../../commands/run.js';
import { runStats } from '../../commands/stats.js';
import { runSubmit } from '../../commands/ops-submit.js';
import { runResolve } from '../../commands/review.js';
import { createDeps, type Deps } from '../../commands/support/deps.js';
import { runIngest } from '../../commands/webhook.js';
import { getOperation, transactionsOf } from '../../src/core/journal/operations.js';
import { embeddedBackend, removeTempStores } from '../support/backends.js';
import { cleanEnv } from '../support/cli.js';
import { bufferIO } from '../support/in-process.js';
import type { World } from '../support/world.js';
import { signedEvent } from './integrity-support.js';
import { startWorld } from '../support/world.js';
import { expectExit, recordOk, refundOp } from './incidents-support.js';

const SLOW_STORE_TIMEOUT_MS = 150_000;

afterAll(() => removeTempStores());
vi.setConfig({ testTimeout: SLOW_STORE_TIMEOUT_MS, hookTimeout: SLOW_STORE_TIMEOUT_MS });

describe('run functions, called directly (store on pglite, Stripe sandbox)', () => {
  let world: World | undefined;
  let deps: Deps | undefined;
  afterEach(async () => {
    await deps?.close();
    await world?.close();
    [world, deps] = [undefined, undefined];
  });

  /** Deps as the CLI builds them, on the world's open store and clock, with --yes. */
  async function start(command: string): Promise<{ w: World; d: Deps; pi: string }> {
    world = await startWorld({ backend: embeddedBackend });
    const env = cleanEnv({ STRIPE_API_KEY: world.stripe.apiKey, STRIPE_WEBHOOK_SECRET: world.stripe.webhookSecret });
    deps = createDeps(bufferIO(), { json: false, color: false, yes: true, quiet: true }, env, world.dir, command);
    const db = await world.db();
    deps.store = () => Promise.resolve(db);
    deps.now = () => world!.now();
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' }).payment_intent;
    return { w: world, d: deps, pi };
  }

  /** An operation whose first attempt reached Stripe but whose answer was lost: outcome_unknown. */
  async function unknownOutcome(w: World, pi: string, id: string): Promise<string> {
    await recordOk(w, [refundOp(id, pi, 2500)]);
    w.stripe.faults.inject({ kind: 'commit_then_drop' }, { times: 2 });
    expectExit(await w.recon(['ops', 'submit', id]), 7);
    const [refund] = w.stripe.refunds({ payment_intent: pi });
    return refund.id;
  }

  it('runSubmit makes one refund at Stripe and returns the operation with its attempt', async () => {
    const { w, d, pi } = await start('ops submit');
    await recordOk(w, [refundOp('refund:seam_submit', pi, 2500)]);
    const r = await runSubmit({ id: 'refund:seam_submit' }, d);
    expect(r.json).toMatchObject({ id: 'refund:seam_submit', state: 'confirmed', attempt: 1, late_response: false });
    expect(r.json.result).toMatchObject({ outcome: 'confirmed', error_class: null, replayed: false });
    const ledger = w.stripe.refunds({ payment_intent: pi });
    expect(ledger).toHaveLength(1);
    expect(ledger[0].metadata).toMatchObject({ recon_operation_id: 'refund:seam_submit' });
    expect(r.json.provider_txn_ids).toEqual([ledger[0].id]);
    // Nothing printed: the command's render does that.
    expect((d.io.out as unknown as { text: string }).text).toBe('');
  });

  it('runAttach links the refund Stripe holds (nothing new at Stripe); a "no" attaches nothing', async () => {
    const { w, d, pi } = await start('attach');
    const txn = await unknownOutcome(w, pi, 'refund:seam_attach');
    d.confirm = () => Promise.resolve(false);
    expect(await runAttach({ id: 'refund:seam_attach', txn }, d)).toEqual({ attached: false });
    expect((await getOperation(await w.db(), 'refund:seam_attach')).state).toBe('outcome_unknown');
    d.confirm = () => Promise.resolve(true);
    const r = await runAttach({ id: 'refund:seam_attach', txn }, d);
    expect(r).toMatchObject({ attached: true, operation: { state: 'confirmed', provider_txn_ids: [txn] } });
    expect((await transactionsOf(await w.db(), 'refund:seam_attach')).map((t) => t.provider_id)).toEqual([txn]);
    expect(w.stripe.refunds({ payment_intent: pi })).toHaveLength(1);
  });

  it('runResolve records the decision on the refund Stripe holds, by the acting person', async () => {
    const { w, d, pi } = await start('review resolve');
    const txn = await unknownOutcome(w, pi, 'refund:seam_review');
    expectExit(await w.recon(['escalate', 'refund:seam_review', '--reason', 'customer called']), 0);
    const r = await runResolve(
      { id: 'refund:seam_review', outcome: 'confirmed', txn, note: 'one refund in the dashboard' },
      d,
    );
    expect(r).toEqual({ operation: expect.objectContaining({ state: 'confirmed' }), actor: 'test-suite' });
    expect((await getOperation(await w.db(), 'refund:seam_review')).state).toBe('confirmed');
    expect((await transactionsOf(await w.db(), 'refund:seam_review')).map((t) => t.provider_id)).toEqual([txn]);
    expect(w.stripe.refunds({ payment_intent: pi })).toHaveLength(1);
    // A bad outcome is a usage error before anything is read.
    await expect(runResolve({ id: 'refund:seam_review', outcome: 'done', note: 'x' }, d)).rejects.toThrow(
      /--outcome: "done"/,
    );
  });

  it('runIngest applies a signed event from a file once; the redelivery is a duplicate', async () => {
    const { w, d, pi } = await start('webhook ingest');
    const txn = await unknownOutcome(w, pi, 'refund:seam_hook');
    const { body, signature } = signedEvent(w.stripe, 'refund.updated', txn);
    const file = path.join(w.dir, 'event.json');
    fs.writeFileSync(file, body);
    const first = await runIngest({ file, provider: 'stripe', signature }, d);
    expect(first).toMatchObject({ operation_id: 'refund:seam_hook', duplicate: false, state: 'confirmed' });
    const again = await runIngest({ file, provider: 'stripe', signature }, d);
    expect(again).toMatchObject({ duplicate: true });
    expect((await transactionsOf(await w.db(), 'refund:seam_hook')).map((t) => t.provider_id)).toEqual([txn]);
    expect(w.stripe.refunds({ payment_intent: pi })).toHaveLength(1);
    await expect(runIngest({ file, provider: 'stripe', signature: 't=1,v1=00' }, d)).rejects.toThrow();
  });

  it('runApprove, runRetry, runEscalate, runShow, runStats and runVerify: one operation from proposed to review', async () => {
    const { w, d, pi } = await start('ops approve');
    const { approval: _none, ...proposed } = refundOp('refund:seam_life', pi, 2500);
    await recordOk(w, [proposed]);
    expect(await runApprove({ id: 'refund:seam_life', ref: 'TICKET-7' }, d)).toMatchObject({
      state: 'approved',
      approval: 'TICKET-7',
    });
    // The rule refuses a retry of what was never attempted; a dry run decides without writing.
    await expect(runRetry({ id: 'refund:seam_life', dryRun: true }, d)).rejects.toThrow();
    expect(w.stripe.refunds({ payment_intent: pi })).toHaveLength(0);
    const escalated = await runEscalate({ id: 'refund:seam_life', reason: 'customer called', assignee: 'finance' }, d);
    expect(escalated).toMatchObject({ operation: { state: 'needs_review', assignee: 'finance' }, wasInReview: false });
    const again = await runEscalate({ id: 'refund:seam_life', reason: 'still waiting' }, d);
    expect(again.wasInReview).toBe(true);
    const detail = await runShow({ id: 'refund:seam_life' }, d);
    expect(detail.operation.state).toBe('needs_review');
    expect(detail.events.map((e) => e.kind)).toContain('approved');
    expect((await runStats({}, d)).unresolved_total).toBe(1);
    const verified = await runVerify({}, d);
    expect(verified.report).toMatchObject({ ok: true, operations_checked: 1 });
    expect(verified.anchor).toBeUndefined();
    expect(w.stripe.refunds({ payment_intent: pi })).toHaveLength(0);
  });

  it('runRecord, runList, runLookup and runCommand: a refund whose answer was lost is found at Stripe, never made twice', async () => {
    const { w, d, pi } = await start('ops record');
    const file = path.join(w.dir, 'ops.ndjson');
    fs.writeFileSync(file, JSON.stringify(refundOp('refund:seam_found', pi, 2500)) + '\n');
    expect(await runRecord({ file }, d)).toEqual([{ id: 'refund:seam_found', state: 'approved', created: true }]);
    expect(await runRecord({ file }, d)).toEqual([{ id: 'refund:seam_found', state: 'approved', created: false }]);
    w.stripe.faults.inject({ kind: 'commit_then_drop' }, { times: 2 });
    expectExit(await w.recon(['ops', 'submit', 'refund:seam_found']), 7);
    const [refund] = w.stripe.refunds({ payment_intent: pi });
    const page = await runList({ limit: 50, unresolved: true }, d);
    expect(page).toMatchObject({ total: 1, more: false, operations: [{ id: 'refund:seam_found' }] });
    const found = await runLookup({ id: 'refund:seam_found' }, d);
    expect(found.by).toBe('operation');
    if (found.by === 'operation') expect(found.result.lookup.matches.map((t) => t.provider_id)).toEqual([refund.id]);
    const byRef = await runLookup({ clientRef: 'seam_found', provider: 'stripe' }, d);
    expect(byRef).toMatchObject({ by: 'reference', operations: [{ id: 'refund:seam_found' }] });
    w.advance(60_000);
    const summary = await runCommand({}, d);
    expect(summary.errors).toEqual([]);
    expect((await getOperation(await w.db(), 'refund:seam_found')).state).toBe('confirmed');
    expect(w.stripe.refunds({ payment_intent: pi })).toHaveLength(1);
  });
});
