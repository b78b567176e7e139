/**
 * Issue 23, "An audit trail the database role cannot forge": a state changed through SQL cannot be
 * laundered by a note (a read-only MCP `get_action` wrote an `mcp.call` event copying the row's
 * state, and `audit verify` then said ok), and each event starts where the previous one ended.
 */
import { expect, it } from 'vitest';
import { eventHash } from '../../src/core/journal/chain.js';
import type { Db } from '../../src/store/db.js';
import type { State } from '../../src/types.js';
import { describeWorld } from '../support/describe-world.js';
import { expectExit, recordOk, refundOp, show } from './incidents-support.js';
import { httpAgent, startInProcessHttpServer, mcpWorld } from './mcp-support.js';

describeWorld('a state changed behind recon stays visible to audit verify', (suite) => {
  it('UPDATE … SET state = cancelled, then a read-only get_action: verify still reports the mismatch, and the mcp.call event holds the chain’s state', async () => {
    const world = await suite.world(mcpWorld());
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:ord_23', pi.payment_intent, 1000)]);
    await (await world.db()).query(`UPDATE recon.operations SET state = 'cancelled' WHERE id = 'refund:ord_23'`);
    const before = expectExit(await world.recon(['audit', 'verify', '--json']), 4).json;
    expect(before.broken).toEqual([
      expect.objectContaining({ operation_id: 'refund:ord_23', problem: 'state_mismatch', expected: 'cancelled' }),
    ]);

    const server = suite.closeAfter(await startInProcessHttpServer(world));
    const agent = await httpAgent(server, 'support-bot');
    try {
      const got = await agent.call('get_action', { operation_id: 'refund:ord_23' });
      expect(got.isError).toBeFalsy();
    } finally {
      await agent.close();
    }
    const events = (await show(world, 'refund:ord_23')).events;
    expect(events.map((e) => [e.kind, e.from_state, e.to_state])).toEqual([
      ['recorded', null, 'approved'],
      ['mcp.call', 'approved', 'approved'],
    ]);

    const after = expectExit(await world.recon(['audit', 'verify', '--json']), 4).json;
    expect(after.ok).toBe(false);
    expect(after.broken).toEqual([
      expect.objectContaining({
        operation_id: 'refund:ord_23',
        seq: 2,
        problem: 'state_mismatch',
        expected: 'cancelled',
        found: 'approved',
      }),
    ]);
    expect(world.stripe.refunds()).toHaveLength(0);
  });

  it('a move that starts from a state changed behind recon is a state_gap, even once the chain ends in the row’s state', async () => {
    const world = await suite.world(mcpWorld());
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    await recordOk(world, [refundOp('refund:ord_24', pi.payment_intent, 1000, { approval: undefined })]);
    expectExit(await world.recon(['ops', 'approve', 'refund:ord_24', '--ref', 'FIN-1', '--actor', 'alice']), 0);
    // Back to proposed behind recon's back, then approved again through recon: the chain now ends in
    // the row's state, and only the step from approved to "proposed → approved" shows the change.
    await (await world.db()).query(`UPDATE recon.operations SET state = 'proposed' WHERE id = 'refund:ord_24'`);
    expectExit(await world.recon(['ops', 'approve', 'refund:ord_24', '--ref', 'FIN-2', '--actor', 'alice']), 0);
    const verify = expectExit(await world.recon(['audit', 'verify', '--json']), 4).json;
    expect(verify.broken).toEqual([
      {
        operation_id: 'refund:ord_24',
        seq: 3,
        problem: 'state_gap',
        expected: 'approved',
        found: 'proposed',
      },
    ]);
    const human = expectExit(await world.recon(['audit', 'verify']), 4);
    expect(human.stdout).toMatch(/refund:ord_24\s+3\s+state_gap\s+approved\s+proposed/);
  });
});

const KEY = 'k'.repeat(8) + '0123456789abcdef0123456789abcdef';
const withKey = { env: { RECON_AUDIT_KEY: KEY } };

/**
 * What a role that may insert audit rows (the README's plain worker role) can write: the next event
 * of a chain with the public algorithm, here a `review.resolved` by person:alice, and the row's
 * state to match. Without the key it can only compute the sha256 chain.
 */
async function forgeResolved(db: Db, id: string, keyId: string | null): Promise<number> {
  const last = (
    await db.query<{ seq: number; hash: string; to_state: State }>(
      'SELECT seq, hash, to_state FROM recon.audit_events WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1',
      [id],
    )
  ).rows[0];
  const ev = {
    operation_id: id,
    seq: last.seq + 1,
    at: new Date(),
    actor: 'person:alice',
    kind: 'review.resolved',
    from_state: last.to_state,
    to_state: 'cancelled' as State,
    rule: 'human',
    detail: { reason: 'customer withdrew' },
  };
  await db.transaction(async (tx) => {
    await tx.query(
      `INSERT INTO recon.audit_events (operation_id, seq, at, actor, kind, from_state, to_state, rule, detail, prev_hash, hash, key_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
      [
        id,
        ev.seq,
        ev.at,
        ev.actor,
        ev.kind,
        ev.from_state,
        ev.to_state,
        ev.rule,
        ev.detail,
        last.hash,
        eventHash(last.hash, ev),
        keyId,
      ],
    );
    await tx.query(`UPDATE recon.operations SET state = 'cancelled' WHERE id = $1`, [id]);
  });
  return ev.seq;
}

describeWorld('a keyed audit trail', (suite) => {
  it('a review.resolved forged by a role that may insert audit rows: refused unkeyed by the database; keyed, verify with the key finds it and without the key says it checked the chain only', async () => {
    const world = await suite.world(mcpWorld());
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    expectExit(
      await world.recon(['ops', 'record', '-', '--json'], {
        ...withKey,
        input: JSON.stringify(refundOp('refund:ord_25', pi.payment_intent, 1000)),
      }),
      0,
    );
    const events = (await show(world, 'refund:ord_25')).events as unknown as { key_id: string | null }[];
    expect(events.map((e) => e.key_id)).toEqual([expect.stringMatching(/^[0-9a-f]{16}$/)]);
    const keyId = events[0].key_id!;
    const intact = expectExit(await world.recon(['audit', 'verify', '--json'], withKey), 0).json;
    expect(intact.keying).toMatchObject({ hmac: 'checked', key_id: keyId, keyed_events: 1, unkeyed_events: 0 });

    const db = await world.db();
    // The public sha256 chain, unkeyed: the database refuses it once the trail is keyed.
    await expect(forgeResolved(db, 'refund:ord_25', null)).rejects.toThrow(/audit trail is keyed .*RECON_AUDIT_KEY/);
    // Marked keyed (the key id is no secret), with a hash it can compute: accepted by the database…
    const seq = await forgeResolved(db, 'refund:ord_25', keyId);

    // …passes a verify without the key, which says plainly what it did not check…
    const blind = expectExit(await world.recon(['audit', 'verify', '--json']), 0).json;
    expect(blind).toMatchObject({ ok: true, keying: { hmac: 'not_checked', keyed_events: 2, key_id: keyId } });
    const blindHuman = expectExit(await world.recon(['audit', 'verify']), 0);
    expect(blindHuman.stderr).toMatch(/NOT authenticated: no audit key given, so the unkeyed chain only was checked/);

    // …and is found with the key.
    const keyed = expectExit(await world.recon(['audit', 'verify', '--json'], withKey), 4).json;
    expect(keyed.ok).toBe(false);
    expect(keyed.broken).toEqual([
      expect.objectContaining({ operation_id: 'refund:ord_25', seq, problem: 'bad_hmac' }),
    ]);
    expect(keyed.keying.hmac).toBe('checked');
    const human = expectExit(await world.recon(['audit', 'verify'], withKey), 4);
    expect(human.stdout).toMatch(/refund:ord_25\s+2\s+bad_hmac/);
    expect(human.stdout + human.stderr).not.toContain(KEY);
    expect(world.stripe.refunds()).toHaveLength(0);
  });

  it('an unkeyed event after keying began is unkeyed, with or without the key; a writer without the key is refused; a wrong key is exit 2', async () => {
    const world = await suite.world(mcpWorld());
    const pi = world.stripe.seedPaymentIntent({ amount: 5000, currency: 'usd' });
    expectExit(
      await world.recon(['ops', 'record', '-', '--json'], {
        ...withKey,
        input: JSON.stringify(refundOp('refund:ord_26', pi.payment_intent, 1000, { approval: undefined })),
      }),
      0,
    );
    // A person without the key cannot write to the keyed trail (nothing is written).
    const refused = await world.recon([
      'ops',
      'approve',
      'refund:ord_26',
      '--ref',
      'FIN-1',
      '--actor',
      'alice',
      '--json',
    ]);
    expect(refused.code).not.toBe(0);
    expect(refused.json.error.message).toMatch(/audit trail is keyed .*RECON_AUDIT_KEY/);
    expect((await show(world, 'refund:ord_26')).operation.state).toBe('proposed');
    expectExit(
      await world.recon(['ops', 'approve', 'refund:ord_26', '--ref', 'FIN-1', '--actor', 'alice'], withKey),
      0,
    );

    // The table's owner can switch the database's check off and append an unkeyed event.
    const db = await world.db();
    await db.query('ALTER TABLE recon.audit_events DISABLE TRIGGER USER');
    const seq = await forgeResolved(db, 'refund:ord_26', null);
    await db.query('ALTER TABLE recon.audit_events ENABLE TRIGGER USER');
    for (const opts of [{}, withKey]) {
      const r = expectExit(await world.recon(['audit', 'verify', '--json'], opts), 4).json;
      expect(r.broken).toEqual([expect.objectContaining({ operation_id: 'refund:ord_26', seq, problem: 'unkeyed' })]);
    }

    const wrong = await world.recon(['audit', 'verify', '--json'], { env: { RECON_AUDIT_KEY: 'w'.repeat(40) } });
    expect(wrong.code).toBe(2);
    expect(wrong.json.error.message).toMatch(
      /the audit key given \(key id [0-9a-f]{16}\) is not the one this store's trail is keyed with/,
    );
    const short = await world.recon(['audit', 'verify', '--json'], { env: { RECON_AUDIT_KEY: 'short' } });
    expect(short.code).toBe(2);
    expect(short.json.error.message).toMatch(/RECON_AUDIT_KEY: the audit key is too short/);
  });
});
