/**
 * Issue 10: the README's "Running with a role that does not own recon's tables", run as written
 * on the real PostgreSQL (roles are per server, so each run makes its own). The plain role does
 * recon's work and cannot disable the audit triggers, nor bypass them, nor change audit rows.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { auditKeyFrom } from '../../src/lib/keyed-hash.js';
import { verifyChains } from '../../src/core/audit/verify.js';
import type { CoreContext } from '../../src/core/journal/context.js';
import { recordOperations } from '../../src/core/intake/record.js';
import { transition } from '../../src/core/journal/transition.js';
import { validateOperation } from '../../src/core/intake/validate.js';
import { openStore } from '../../src/store/open.js';
import { ROOT } from '../support/cli.js';
import { createDatabase } from '../support/postgres.js';

const selected = process.env.RECON_TEST_BACKEND;

/** The ```sql blocks of the README's section on roles, in order. */
function readmeRoleSql(): string[] {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf("### Running with a role that does not own recon's tables");
  if (start < 0) throw new Error('README.md has no section "Running with a role that does not own recon\'s tables"');
  const section = readme.slice(start, readme.indexOf('\n## ', start));
  return [...section.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]);
}

async function exec(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

function as(url: string, user: string): string {
  const u = new URL(url);
  u.username = user;
  return u.toString();
}

describe.skipIf(selected === 'pglite')('recon with a role that does not own its tables (PostgreSQL)', () => {
  const suffix = randomBytes(4).toString('hex');
  const owner = `recon_owner_${suffix}`;
  const worker = `recon_worker_${suffix}`;
  let dbUrl: string | undefined;
  const base = () => inject('pgUrl') || process.env.RECON_TEST_PG_URL!;

  afterAll(async () => {
    if (!dbUrl) return;
    const name = new URL(dbUrl).pathname.slice(1);
    await exec(base(), `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await exec(base(), `DROP ROLE IF EXISTS ${worker}; DROP ROLE IF EXISTS ${owner}`);
  });

  it('the plain role records and moves operations, and cannot disable, bypass or edit the audit trail', async () => {
    const blocks = readmeRoleSql().map((sql) =>
      sql.replaceAll(/\brecon_owner\b/g, owner).replaceAll(/\brecon_worker\b/g, worker),
    );
    expect(blocks).toHaveLength(2);
    dbUrl = await createDatabase(base());
    await exec(dbUrl, blocks[0].replaceAll(/\bops\b/g, new URL(dbUrl).pathname.slice(1)));
    // `recon db migrate` as the owner (the store migrates itself on first use).
    await (await openStore(as(dbUrl, owner))).close();
    await exec(as(dbUrl, owner), blocks[1]);

    const db = await openStore(as(dbUrl, worker));
    try {
      const ctx: CoreContext = { db, actor: 'worker', now: () => new Date() };
      await recordOperations(ctx, [
        validateOperation(
          {
            id: 'op_role',
            provider: 'stripe',
            action: 'refund',
            payload: { charge: 'ch_1', amount: 100, currency: 'usd' },
            approval: 'T',
          },
          ['stripe'],
        ),
      ]);
      await db.transaction((tx) =>
        transition(tx, 'op_role', 'submitting', { actor: 'worker', now: new Date(), kind: 'k', rule: 'r' }),
      );
      expect((await verifyChains(db)).ok).toBe(true);

      await expect(db.query('ALTER TABLE recon.audit_events DISABLE TRIGGER USER')).rejects.toThrow(/must be owner/);
      await expect(db.query('ALTER TABLE recon.audit_events DISABLE TRIGGER ALL')).rejects.toThrow(/must be owner/);
      await expect(db.query("SET session_replication_role = 'replica'")).rejects.toThrow(/permission denied/);
      await expect(db.query('DELETE FROM recon.audit_events')).rejects.toThrow(/permission denied/);
      await expect(db.query(`UPDATE recon.audit_events SET detail = '{}'`)).rejects.toThrow(/permission denied/);
      await expect(db.query('TRUNCATE recon.audit_events')).rejects.toThrow(/permission denied/);
      await expect(db.query('DROP TABLE recon.audit_events')).rejects.toThrow(/must be owner/);
      expect((await verifyChains(db)).ok).toBe(true);

      // Keyed (issue 23): once the trail is keyed, the plain role cannot append a sha256-chained
      // event, nor move or remove where keying began.
      const auditKey = auditKeyFrom('r'.repeat(48), 'test');
      await recordOperations({ ...ctx, auditKey }, [
        validateOperation(
          {
            id: 'op_keyed',
            provider: 'stripe',
            action: 'refund',
            payload: { charge: 'ch_2', amount: 100, currency: 'usd' },
            approval: 'T',
          },
          ['stripe'],
        ),
      ]);
      await expect(
        db.transaction((tx) =>
          transition(tx, 'op_keyed', 'submitting', { actor: 'person:alice', now: new Date(), kind: 'k', rule: 'r' }),
        ),
      ).rejects.toThrow(/audit trail is keyed/);
      await expect(db.query('ALTER TABLE recon.audit_keying DISABLE TRIGGER USER')).rejects.toThrow(/must be owner/);
      await expect(db.query('DELETE FROM recon.audit_keying')).rejects.toThrow(/permission denied/);
      await expect(db.query(`UPDATE recon.audit_keying SET key_id = 'x'`)).rejects.toThrow(/permission denied/);
      const report = await verifyChains(db, { key: auditKey });
      expect(report).toMatchObject({ ok: true, keying: { hmac: 'checked', key_id: auditKey.id, keyed_events: 1 } });
    } finally {
      await db.close();
    }
  });
});
