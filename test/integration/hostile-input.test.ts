/**
 * Issue 10, Hostile input: what an operation may carry. NUL and control characters in the
 * idempotency key and the optional strings are refused when recorded (exit 2, naming the field,
 * nothing written) instead of reaching PostgreSQL (exit 1, raw error) or a terminal; `subject` has a
 * size cap like the payload's; stored text that holds control characters anyway (older rows,
 * provider data) is printed escaped, never as live terminal escapes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_SUBJECT_BYTES } from '../../src/core/intake/validate.js';
import { openStore } from '../../src/store/open.js';
import { backends, removeTempStores } from '../support/backends.js';
import { startWorld, type World } from '../support/world.js';
import { expectExit, refundOp } from './incidents-support.js';

const backend = backends.find((b) => b.name === 'postgres') ?? backends[0];
let world: World;
let pi: string;

beforeAll(async () => {
  world = await startWorld({ backend });
  pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' }).payment_intent;
});
afterAll(async () => {
  await world?.close();
  removeTempStores();
});

async function count(): Promise<number> {
  const r = expectExit(await world.recon(['ops', 'list', '--json']), 0);
  return r.json.operations.length;
}

describe('hostile operation input', () => {
  it.each([
    ['idempotency_key', { idempotency_key: 'key\u0000nul' }],
    ['idempotency_key', { idempotency_key: 'key\u001b[31mred' }],
    ['idempotency_key', { idempotency_key: 'key\nnewline' }],
    ['client_reference', { client_reference: 'ord\u0000' }],
    ['client_reference', { client_reference: 'ord\u001b]0;pwned\u0007' }],
    ['approval', { approval: 'TICKET\r-1' }],
    ['approval', { approval: 'TICKET\u009b2J' }],
    ['payload', { payload: { payment_intent: 'pi_x', amount: 100, currency: 'usd', reason: 'dup\u0000licate' } }],
    ['subject', { subject: { customer: 'cus\u0000_1' } }],
    ['subject', { subject: { 'cus\u0000tomer': 'cus_1' } }],
    [
      'payload.metadata.note',
      { payload: { payment_intent: 'pi_x', amount: 100, currency: 'usd', metadata: { note: 'half \uD800 a pair' } } },
    ],
    [
      'payload.metadata.recon_client_reference',
      { payload: { payment_intent: 'pi_x', amount: 100, currency: 'usd', metadata: { recon_client_reference: 'o' } } },
    ],
  ])(
    '%s with a NUL or control character (%j) is refused: exit 2 naming the field, nothing written',
    async (field, extra) => {
      const before = await count();
      const r = await world.record([
        refundOp(`refund:hostile_${Math.random().toString(36).slice(2, 8)}`, pi, 100, extra),
      ]);
      expectExit(r, 2);
      expect(r.stderr).toContain(field);
      expect(r.stderr).not.toMatch(/\u001b|\u0000/);
      expect(await count()).toBe(before);
    },
  );

  it(`a subject over ${MAX_SUBJECT_BYTES} bytes is refused (exit 2, naming subject); one under it is kept`, async () => {
    const big = { customer: 'cus_1', notes: 'x'.repeat(MAX_SUBJECT_BYTES) };
    const r = await world.record([refundOp('refund:big_subject', pi, 100, { subject: big })]);
    expectExit(r, 2);
    expect(r.stderr).toMatch(/subject: \d+ bytes is over the 16 KiB limit/);
    const ok = await world.record([
      refundOp('refund:ok_subject', pi, 100, { subject: { customer: 'cus_1', order: 'o_9' } }),
    ]);
    expectExit(ok, 0);
  });

  it('stored text with terminal escapes (an older row, provider data) is printed escaped by ops show and ops list', async () => {
    expectExit(await world.record([refundOp('refund:ansi', pi, 100)]), 0);
    // Rows written before validation refused control characters, or by another tool.
    await world.release(); // the embedded store admits one open instance at a time
    const db = await openStore(world.storeUrl);
    try {
      await db.query(`UPDATE recon.operations SET client_reference = $1, review_reason = $2 WHERE id = 'refund:ansi'`, [
        'ord\u001b[2J\u001b[31mPWNED',
        'dup\u0007\u009b1m',
      ]);
    } finally {
      await db.close();
    }
    const show = expectExit(await world.recon(['ops', 'show', 'refund:ansi']), 0);
    expect(show.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    expect(show.stdout).toContain('ord\\x1b[2J\\x1b[31mPWNED');
    const list = expectExit(await world.recon(['ops', 'list']), 0);
    expect(list.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    expect(list.stdout).toContain('dup\\x07\\x9b1m');
    // JSON keeps the stored value exactly (escaped by JSON itself).
    const json = expectExit(await world.recon(['ops', 'show', 'refund:ansi', '--json']), 0).json;
    expect(json.operation.client_reference).toBe('ord\u001b[2J\u001b[31mPWNED');
  });
});
