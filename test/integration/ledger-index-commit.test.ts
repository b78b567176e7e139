/**
 * The ledger index is written without waiting for each WAL flush (`set_config('synchronous_commit',
 * 'off', true)` inside the INSERT): that must stay local to the statement's own transaction. A pooled
 * session left with synchronous_commit off would make every later write on it (decisions, the audit
 * trail) non-durable, so after an audit every session of the pool still has the database's setting.
 */
import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { scanLedger } from '../../src/core/audit/duplicates.js';
import { openStore } from '../../src/store/open.js';
import type { Provider } from '../../src/types.js';
import { listedRefund, listingProvider } from '../support/listing-provider.js';
import { backends } from '../support/backends.js';

const postgres = backends.find((b) => b.name === 'postgres');

function ledger(n: number): Provider {
  const t0 = Date.parse('2024-01-01T00:00:00Z');
  return listingProvider(
    Array.from({ length: n }, (_, i) => listedRefund(`re_${i}`, new Date(t0 + i * 1000), { group: `ch_${i}` })),
  );
}

describe.skipIf(!postgres)('ledger index writes on PostgreSQL', () => {
  it('leave synchronous_commit as the database sets it on every pooled session', async () => {
    const url = await postgres!.migratedUrl();
    // The test server runs with synchronous_commit off for speed; this database says on, as a user's would.
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`ALTER DATABASE "${new URL(url).pathname.slice(1)}" SET synchronous_commit = on`);
    await admin.end();
    const db = await openStore(url);
    try {
      const scan = await scanLedger({ db, actor: 'test', now: () => new Date() }, ledger(1200), { full: true });
      expect(scan.transactions).toBe(1200);
      const indexed = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM recon.ledger_index');
      expect(Number(indexed.rows[0].n)).toBe(1200);
      const settings = await Promise.all(
        Array.from({ length: 10 }, () => db.query<{ s: string }>("SELECT current_setting('synchronous_commit') AS s")),
      );
      expect(settings.map((r) => r.rows[0].s)).toEqual(Array.from({ length: 10 }, () => 'on'));
    } finally {
      await db.close();
    }
  });
});
