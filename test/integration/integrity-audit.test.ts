/**
 * Issue 10, "`audit verify` cannot see deletions": with its triggers disabled (the table owner can),
 * a deleted tail event or a whole chain gave `ok: true`. Verify now checks that every operation has
 * a chain and that its last to_state is the operation's state, and `--anchor FILE` (SPEC §5) finds
 * a chain that ends before a head it was shown earlier. The roles the README documents are tested
 * on the real PostgreSQL: the plain role does recon's work and cannot disable the triggers.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { anchorDigest, readAnchor } from '../../src/core/audit/anchor.js';
import { verifyChains } from '../../src/core/audit/verify.js';
import type { CoreContext } from '../../src/core/journal/context.js';
import { recordOperations } from '../../src/core/intake/record.js';
import { transition } from '../../src/core/journal/transition.js';
import { validateOperation } from '../../src/core/intake/validate.js';
import type { Db } from '../../src/store/db.js';
import { openStore } from '../../src/store/open.js';
import { backends, removeTempStores, resetStore } from '../support/backends.js';
import { runInProcess } from '../support/in-process.js';

afterAll(() => removeTempStores());
vi.setConfig({ testTimeout: 150_000 });

const T0 = new Date('2025-03-01T10:00:00.000Z');

async function recordWithHistory(db: Db, ids: string[]): Promise<void> {
  const ctx: CoreContext = { db, actor: 'test', now: () => T0 };
  await recordOperations(
    ctx,
    ids.map((id) =>
      validateOperation(
        {
          id,
          provider: 'stripe',
          action: 'refund',
          payload: { charge: 'ch_1', amount: 100, currency: 'usd' },
          approval: 'T',
        },
        ['stripe'],
      ),
    ),
  );
  for (const id of ids)
    for (const to of ['submitting', 'outcome_unknown'] as const)
      await db.transaction((tx) => transition(tx, id, to, { actor: 'test', now: T0, kind: 'k', rule: 'r' }));
}

/** What the role that owns recon's tables can do: switch the append-only triggers off, edit, switch them on. */
async function asOwner(db: Db, sql: string, params: unknown[] = []): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query('ALTER TABLE recon.audit_events DISABLE TRIGGER USER');
    await tx.query(sql, params);
    await tx.query('ALTER TABLE recon.audit_events ENABLE TRIGGER USER');
  });
}

describe.each(backends)('audit verify sees deletions, store on $name', (backend) => {
  let db: Db;
  let url: string;
  let dir: string;
  // One store per backend, emptied before each test (opening a PGlite store costs ~1 s of CPU).
  beforeAll(async () => {
    url = await backend.migratedUrl();
    db = await openStore(url);
  });
  afterAll(async () => {
    await db?.close();
  });
  beforeEach(async () => {
    await resetStore(db);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-anchor-'));
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a deleted tail event is found: the chain no longer ends in the operation state', async () => {
    await recordWithHistory(db, ['op_a', 'op_b']);
    expect((await verifyChains(db)).ok).toBe(true);
    await asOwner(db, `DELETE FROM recon.audit_events WHERE operation_id = 'op_a' AND seq = 3`);
    const report = await verifyChains(db);
    expect(report.ok).toBe(false);
    expect(report.broken).toEqual([
      expect.objectContaining({
        operation_id: 'op_a',
        problem: 'state_mismatch',
        expected: 'outcome_unknown',
        found: 'submitting',
      }),
    ]);
  });

  it('a whole deleted chain is found: an operation without a chain', async () => {
    await recordWithHistory(db, ['op_a', 'op_b']);
    await asOwner(db, `DELETE FROM recon.audit_events WHERE operation_id = 'op_b'`);
    const report = await verifyChains(db);
    expect(report.ok).toBe(false);
    expect(report.broken).toEqual([expect.objectContaining({ operation_id: 'op_b', problem: 'missing_chain' })]);
  });

  it('--anchor: the first run writes the heads; a tail deleted together with a matching state edit is found against them', async () => {
    await recordWithHistory(db, ['op_a', 'op_b']);
    const anchor = path.join(dir, 'heads.json');
    // In process, on the test's open store (the command's own opening of --db is not the point).
    const verify = () => runInProcess(['audit', 'verify', '--db', url, '--anchor', anchor, '--json'], { store: db });

    const first = await verify();
    expect(first.code, first.stderr).toBe(0);
    expect(first.json).toMatchObject({ ok: true, anchor: { status: 'created', heads: 2 } });
    expect(first.stderr).toMatch(/no anchor at .*heads\.json: wrote one with 2 chain heads/);
    const written = await readAnchor(anchor);
    expect(written!.heads).toEqual(
      new Map([
        ['op_a', [3, expect.any(String)]],
        ['op_b', [3, expect.any(String)]],
      ]),
    );
    expect(written!.digest).toBe(anchorDigest(written!.heads));
    expect((await verify()).json).toMatchObject({ ok: true, anchor: { status: 'updated' } });

    // The owner deletes op_a's last event and puts the state back to what the chain now ends in.
    await asOwner(db, `DELETE FROM recon.audit_events WHERE operation_id = 'op_a' AND seq = 3`);
    await db.query(`UPDATE recon.operations SET state = 'submitting' WHERE id = 'op_a'`);
    expect((await verifyChains(db)).ok).toBe(true); // invisible without the anchor

    const caught = await verify();
    expect(caught.code).toBe(4);
    expect(caught.json.ok).toBe(false);
    expect(caught.json.broken).toEqual([
      expect.objectContaining({ operation_id: 'op_a', problem: 'truncated', seq: 3 }),
    ]);
    // A broken trail does not overwrite the heads that prove it.
    expect(caught.json.anchor.status).toBe('kept');
    expect((await readAnchor(anchor))!.heads).toEqual(written!.heads);
  });

  it('--anchor: operations named __proto__, constructor and hasOwnProperty are anchored like any other; a deleted tail on each is found', async () => {
    const ids = ['__proto__', 'constructor', 'hasOwnProperty', 'name:0'];
    await recordWithHistory(db, ids);
    const anchor = path.join(dir, 'heads.json');
    const verify = () => runInProcess(['audit', 'verify', '--db', url, '--anchor', anchor, '--json'], { store: db });
    const first = await verify();
    expect(first.code, first.stderr).toBe(0);
    expect(first.json).toMatchObject({ ok: true, operations_checked: 4, anchor: { status: 'created', heads: 4 } });
    const file = JSON.parse(fs.readFileSync(anchor, 'utf8'));
    expect(Object.keys(file.heads).sort()).toEqual([...ids].sort());
    expect(file.operations).toBe(4);
    expect([...(await readAnchor(anchor))!.heads.keys()].sort()).toEqual([...ids].sort());

    // The owner deletes each one's last event and puts its state back: only the anchor can tell.
    for (const id of ids) {
      await asOwner(db, `DELETE FROM recon.audit_events WHERE operation_id = $1 AND seq = 3`, [id]);
      await db.query(`UPDATE recon.operations SET state = 'submitting' WHERE id = $1`, [id]);
    }
    expect((await verifyChains(db)).ok).toBe(true);
    const caught = await verify();
    expect(caught.code).toBe(4);
    expect(
      caught.json.broken.map((b: { operation_id: string; problem: string }) => [b.operation_id, b.problem]),
    ).toEqual([...ids].sort().map((id) => [id, 'truncated']));
  });

  it('--anchor: a garbled or edited anchor file is a clear usage error, and it is left as it is', async () => {
    await recordWithHistory(db, ['op_a']);
    const anchor = path.join(dir, 'heads.json');
    fs.writeFileSync(anchor, '{"heads": {"op_a": [3, "abc"]');
    const verify = () => runInProcess(['audit', 'verify', '--db', url, '--anchor', anchor, '--json'], { store: db });
    const garbled = await verify();
    expect(garbled.code).toBe(2);
    expect(garbled.json.error.message).toMatch(/--anchor .*heads\.json: not a recon anchor file/);
    fs.writeFileSync(anchor, JSON.stringify({ heads: { op_a: [3, 'a'.repeat(64)] }, digest: '0'.repeat(64) }));
    const edited = await verify();
    expect(edited.code).toBe(2);
    expect(edited.json.error.message).toMatch(/digest/);
    expect(JSON.parse(fs.readFileSync(anchor, 'utf8')).digest).toBe('0'.repeat(64));
  });
});
