/**
 * Claims and leases (SPEC §3, §8 incident 7): several worker processes claiming the same backlog
 * each take every operation exactly once, and a worker whose lease was lost cannot write its
 * result over the newer claim.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { claimAttempt, claimForRun } from '../../src/core/attempt/claims.js';
import type { CoreContext } from '../../src/core/journal/context.js';
import { eventsOf } from '../../src/core/journal/chain.js';
import { recordOperations } from '../../src/core/intake/record.js';
import { findOperation } from '../../src/core/journal/operations.js';
import { finishAttempt } from '../../src/core/attempt/submit.js';
import { note } from '../../src/core/journal/note.js';
import { transition } from '../../src/core/journal/transition.js';
import { validateOperation } from '../../src/core/intake/validate.js';
import { LeaseLostError, RefusedError } from '../../src/errors.js';
import type { Db } from '../../src/store/db.js';
import type { Provider } from '../../src/types.js';
import { backends, removeTempStores } from '../support/backends.js';
import { ROOT } from '../support/cli.js';

const T0 = new Date('2025-03-01T10:00:00.000Z');
const ms = (n: number) => new Date(T0.getTime() + n);

function op(id: string, approval?: string) {
  return validateOperation(
    {
      id,
      provider: 'stripe',
      action: 'refund',
      payload: { payment_intent: 'pi_1', amount: 500, currency: 'usd' },
      approval,
    },
    ['stripe'],
  );
}

afterAll(() => removeTempStores());

const postgres = backends.find((b) => b.name === 'postgres');

/** A worker process: waits for "go" on stdin, then claims batches of 50 until none are left. */
const WORKER = `
const [claimsUrl, openUrl, storeUrl, owner] = process.argv.slice(1);
const { claimForRun } = await import(claimsUrl);
const { openStore } = await import(openUrl);
const db = await openStore(storeUrl);
process.stdout.write('ready\\n');
await new Promise((resolve) => process.stdin.once('data', resolve));
const claimed = [];
let batches = 0;
for (;;) {
  const ops = await claimForRun(db, { owner, leaseMs: 600000, now: new Date(), limit: 50 });
  if (ops.length === 0) break;
  batches++;
  for (const o of ops) {
    if (o.lease_owner !== owner) throw new Error('claimed row shows lease owner ' + o.lease_owner);
    claimed.push(o.id);
  }
}
await db.close();
process.stdout.write(JSON.stringify({ owner, batches, claimed }) + '\\n');
`;

describe.runIf(postgres)('claims on PostgreSQL from several processes', () => {
  it('four worker processes claiming 1,000 operations take each exactly once', async () => {
    const url = await postgres!.url();
    const { openStore } = await import('../../src/store/open.js');
    const db = await openStore(url);
    try {
      await db.query(
        `INSERT INTO recon.operations (id, provider, action, payload, payload_hash, idempotency_key, state, attempt_count,
                                       created_at, updated_at, first_attempt_at)
         SELECT 'op_' || lpad(g::text, 4, '0'), 'stripe', 'refund', '{}', 'h', 'op_' || g, 'outcome_unknown', 1,
                $1::timestamptz + g * interval '1 millisecond', $1::timestamptz, $1::timestamptz
           FROM generate_series(1, 1000) g`,
        [T0.toISOString()],
      );
    } finally {
      await db.close();
    }
    const claimsUrl = pathToFileURL(path.join(ROOT, 'dist/src/core/attempt/claims.js')).href;
    const openUrl = pathToFileURL(path.join(ROOT, 'dist/src/store/open.js')).href;
    const workers = Array.from({ length: 4 }, (_, i) => {
      const child = spawn(
        process.execPath,
        ['--input-type=module', '-e', WORKER, claimsUrl, openUrl, url, `worker-${i}`],
        {
          stdio: ['pipe', 'pipe', 'pipe'],
        },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      const ready = new Promise<void>((resolve, reject) => {
        const check = () => (stdout.startsWith('ready\n') ? resolve() : undefined);
        child.stdout.on('data', check);
        child.on('exit', (code) => reject(new Error(`worker ${i} exited ${code} before ready: ${stderr}`)));
      });
      const done = new Promise<{ owner: string; batches: number; claimed: string[] }>((resolve, reject) => {
        child.on('close', (code) => {
          if (code !== 0) return reject(new Error(`worker ${i} exited ${code}: ${stderr}`));
          resolve(JSON.parse(stdout.split('\n')[1]));
        });
      });
      return { child, ready, done };
    });
    await Promise.all(workers.map((w) => w.ready));
    // Start them together so they contend for the same rows.
    for (const w of workers) w.child.stdin.end('go\n');
    const results = await Promise.all(workers.map((w) => w.done));

    const all = results.flatMap((r) => r.claimed);
    expect(all).toHaveLength(1000);
    expect(new Set(all).size).toBe(1000);
    const expected = Array.from({ length: 1000 }, (_, i) => `op_${String(i + 1).padStart(4, '0')}`);
    expect([...all].sort()).toEqual(expected);
    // The store agrees with what each process says it claimed.
    const check = await openStore(url);
    try {
      const rows = await check.query<{ id: string; lease_owner: string }>(
        'SELECT id, lease_owner FROM recon.operations',
      );
      const ownerOf = new Map(rows.rows.map((r) => [r.id, r.lease_owner]));
      for (const r of results) for (const id of r.claimed) expect(ownerOf.get(id)).toBe(r.owner);
    } finally {
      await check.close();
    }
  });
});

describe.each(backends)('leases on $name', (backend) => {
  let db: Db;
  const ctxAt = (d: Date): CoreContext => ({ db, actor: 'test', now: () => d });
  const stripe = { name: 'stripe' } as Provider;

  beforeAll(async () => {
    db = await backend.open();
  });
  afterAll(async () => {
    await db?.close();
  });
  let n = 0;
  let id: string;
  beforeEach(() => {
    id = `op_${backend.name}_${++n}`;
  });

  async function unknownOp(): Promise<void> {
    await recordOperations(ctxAt(T0), [op(id)]);
    await db.query("UPDATE recon.operations SET state = 'outcome_unknown', attempt_count = 1 WHERE id = $1", [id]);
  }
  const claim = (owner: string, at: Date, leaseMs = 1000) =>
    claimForRun(db, { owner, leaseMs, now: at, limit: 10 }).then((ops) => ops.filter((o) => o.id === id));

  it('a lease held is not claimed again; an expired one is taken over, and the old worker cannot write', async () => {
    await unknownOp();
    const [a] = await claim('A', T0);
    expect(a).toMatchObject({ id, lease_owner: 'A', lease_expires_at: ms(1000) });
    expect(await claim('B', ms(500))).toEqual([]);
    const [b] = await claim('B', ms(1500), 60_000);
    expect(b).toMatchObject({ lease_owner: 'B', lease_expires_at: ms(61_500) });

    const before = await eventsOf(db, id);
    const lost = await db
      .transaction((tx) =>
        transition(tx, id, 'confirmed', {
          actor: 'A',
          now: ms(1600),
          kind: 'run.decision',
          rule: 'found.single',
          leaseOwner: 'A',
        }),
      )
      .catch((e) => e);
    expect(lost).toBeInstanceOf(LeaseLostError);
    const noted = await db
      .transaction((tx) => note(tx, id, { actor: 'A', now: ms(1600), kind: 'observation', leaseOwner: 'A' }))
      .catch((e) => e);
    expect(noted).toBeInstanceOf(LeaseLostError);

    const row = (await findOperation(db, id))!;
    expect(row).toMatchObject({
      state: 'outcome_unknown',
      lease_owner: 'B',
      lease_expires_at: ms(61_500),
      resolved_at: null,
    });
    expect(await eventsOf(db, id)).toEqual(before);

    // The new holder can write, and the move releases its lease.
    const { op: done } = await db.transaction((tx) =>
      transition(tx, id, 'confirmed', {
        actor: 'B',
        now: ms(1700),
        kind: 'run.decision',
        rule: 'found.single',
        leaseOwner: 'B',
      }),
    );
    expect(done).toMatchObject({ state: 'confirmed', lease_owner: null, lease_expires_at: null });
  });

  it('an expired lease that nobody took over is lost as well', async () => {
    await unknownOp();
    await claim('A', T0);
    const err = await db
      .transaction((tx) =>
        transition(tx, id, 'failed', { actor: 'A', now: ms(1000), kind: 'k', rule: 'r', leaseOwner: 'A' }),
      )
      .catch((e) => e);
    expect(err).toBeInstanceOf(LeaseLostError);
    expect((await findOperation(db, id))!.state).toBe('outcome_unknown');
  });

  it('a submit whose lease was lost does not write its result over the newer claim', async () => {
    await recordOperations(ctxAt(T0), [op(id, 'TICKET-1')]);
    const claimA = await claimAttempt(ctxAt(T0), id, {
      owner: 'A',
      leaseMs: 1000,
      from: 'approved',
      rule: 'submit.first_attempt',
    });
    expect(claimA).toMatchObject({ attempt: 1, owner: 'A', leaseExpiresAt: ms(1000) });
    expect((await findOperation(db, id))!).toMatchObject({ state: 'submitting', attempt_count: 1, lease_owner: 'A' });

    // A second submit while A holds the lease is refused.
    const busy = await claimAttempt(ctxAt(ms(10)), id, {
      owner: 'X',
      leaseMs: 1000,
      from: 'approved',
      rule: 'submit.first_attempt',
    }).catch((e) => e);
    expect(busy).toBeInstanceOf(RefusedError);

    // A's request outlives its lease; `recon run` (B) takes over the crashed-looking submit.
    const [b] = await claim('B', ms(2000), 60_000);
    expect(b).toMatchObject({ state: 'submitting', lease_owner: 'B' });

    const eventsBefore = await eventsOf(db, id);
    const err = await finishAttempt(ctxAt(ms(2500)), stripe, claimA, {
      outcome: 'confirmed',
      txn: {
        provider_id: 're_1',
        status: 'succeeded',
        state: 'confirmed',
        amount: 500,
        currency: 'usd',
        operation_id: id,
        client_reference: null,
        created: T0,
      },
      provider_request_id: 'req_1',
    }).catch((e) => e);
    expect(err).toBeInstanceOf(LeaseLostError);

    expect((await findOperation(db, id))!).toMatchObject({
      state: 'submitting',
      lease_owner: 'B',
      lease_expires_at: ms(62_000),
      resolved_at: null,
    });
    const attempt = await db.query(
      'SELECT ended_at, outcome, provider_request_id FROM recon.attempts WHERE operation_id = $1',
      [id],
    );
    expect(attempt.rows).toEqual([{ ended_at: null, outcome: null, provider_request_id: null }]);
    // The late response's refund is linked and recorded as evidence (SPEC §3); nothing else moves.
    const txns = await db.query(
      'SELECT provider_id, linked_via FROM recon.provider_transactions WHERE operation_id = $1',
      [id],
    );
    expect(txns.rows).toEqual([{ provider_id: 're_1', linked_via: 'response' }]);
    const events = await eventsOf(db, id);
    expect(events.slice(0, eventsBefore.length)).toEqual(eventsBefore);
    expect(events.slice(eventsBefore.length)).toEqual([
      expect.objectContaining({ kind: 'late_response.received', from_state: 'submitting', to_state: 'submitting' }),
    ]);
  });

  it('a submit that finishes within its lease writes the result and the attempt', async () => {
    await recordOperations(ctxAt(T0), [op(id, 'TICKET-1')]);
    const c = await claimAttempt(ctxAt(T0), id, {
      owner: 'A',
      leaseMs: 1000,
      from: 'approved',
      rule: 'submit.first_attempt',
    });
    const done = await finishAttempt(ctxAt(ms(900)), stripe, c, { outcome: 'unknown', error_class: 'timeout' });
    expect(done).toMatchObject({ state: 'outcome_unknown', lease_owner: null });
    const attempt = await db.query('SELECT outcome, error_class FROM recon.attempts WHERE operation_id = $1', [id]);
    expect(attempt.rows).toEqual([{ outcome: 'unknown', error_class: 'timeout' }]);
  });
});
