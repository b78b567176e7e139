/**
 * Statements whose plan a PostgreSQL session keeps (src/store/db.ts keepPlan; postgres.ts
 * namedStatements): sent named once the pool's connections are found to be sessions of their own,
 * so the server parses and plans them once per session (execute_action's move statement spent 2 of
 * its 3 ms there: npm run bench, agents). Never named behind a transaction-mode pooler (PgBouncer
 * before 1.21 gives each transaction any session: faults-pgbouncer.test.ts counts the prepared
 * statements left on every session, 0). And a session that refuses a name (the statement gone, or
 * its table changed shape since it was prepared, as after a migration) costs no answer: the pool
 * sends it again unnamed, and unnamed from then on.
 */
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { recordOperations } from '../../src/core/intake/record.js';
import { validateOperation } from '../../src/core/intake/validate.js';
import { lockOperation, operationColumns } from '../../src/core/journal/operations.js';
import { keepPlan, type Db } from '../../src/store/db.js';
import { openPostgres } from '../../src/store/postgres.js';
import { openStore } from '../../src/store/open.js';
import { createDatabase } from '../support/postgres.js';

const base = inject('pgUrl') || process.env.RECON_TEST_PG_URL || '';

describe.skipIf(!base)('named statements on PostgreSQL', () => {
  let url: string;
  const opened: Db[] = [];
  const open = async (o: { namedStatements?: boolean } = {}) => {
    // One connection: the session the statements are prepared in is the one asked about.
    const db = await openPostgres(url, { max: 1, ...o });
    opened.push(db);
    return db;
  };
  const kept = (n: number) => keepPlan(`SELECT $1::int + ${n} AS v, count(*)::int AS rows FROM named_t`);
  const prepared = async (db: Db) =>
    (await db.query<{ statement: string }>('SELECT statement FROM pg_prepared_statements')).rows.map(
      (r) => r.statement,
    );
  /** Runs `sql` until the session holds it prepared (the sessions' probe runs in the background). */
  const untilPrepared = async (db: Db, sql: string) => {
    for (let i = 0; i < 200; i++) {
      await db.query(sql, [1]);
      if ((await prepared(db)).includes(sql)) return true;
      await new Promise((r) => setTimeout(r, 10));
    }
    return false;
  };

  beforeAll(async () => {
    url = await createDatabase(base);
    const db = await openPostgres(url);
    await db.query('CREATE TABLE named_t (a int)');
    await db.query('INSERT INTO named_t VALUES (1), (2)');
    await db.close();
  });
  afterAll(async () => {
    for (const db of opened) await db.close();
  });

  it('a keepPlan statement is prepared in the session once its connections are its own; others never are', async () => {
    const db = await open();
    const sql = kept(1);
    expect(await untilPrepared(db, sql)).toBe(true);
    expect((await db.query<{ v: number; rows: number }>(sql, [41])).rows[0]).toEqual({ v: 42, rows: 2 });
    const plain = 'SELECT $1::int + 100 AS v';
    await db.query(plain, [1]);
    expect(await prepared(db)).not.toContain(plain);
    // In a transaction too.
    const inTx = kept(2);
    for (let i = 0; i < 3; i++) await db.transaction((tx) => tx.query(inTx, [1]));
    expect(await prepared(db)).toContain(inTx);
  });

  it('with namedStatements: false nothing is prepared', async () => {
    const db = await open({ namedStatements: false });
    const sql = kept(3);
    for (let i = 0; i < 20; i++) await db.query(sql, [1]);
    await new Promise((r) => setTimeout(r, 100));
    for (let i = 0; i < 5; i++) await db.query(sql, [1]);
    expect(await prepared(db)).toEqual([]);
  });

  it('a session that lost the statement still answers: sent again unnamed, and unnamed from then on', async () => {
    const db = await open();
    const sql = kept(4);
    expect(await untilPrepared(db, sql)).toBe(true);
    // Behind pg's back (as a pooler handing over another session would): the session forgets it.
    await db.query('DEALLOCATE ALL');
    expect((await db.query<{ v: number }>(sql, [1])).rows[0].v).toBe(5);
    const after = kept(5);
    for (let i = 0; i < 5; i++) await db.query(after, [1]);
    expect(await prepared(db)).toEqual([]);
  });

  it('a column added to recon.operations while recon runs (a migration meanwhile): a transaction that locks an operation still answers', async () => {
    // Refused in a transaction, a kept statement would fail the caller's transaction: the kept
    // statements that return operations name their columns (operations.ts operationColumns), so
    // a new column changes nothing of what they return.
    const template = inject('pgTemplate');
    const migrated = await createDatabase(base, undefined, template || undefined);
    const db = await openPostgres(migrated, { max: 1 });
    opened.push(db);
    if (!template) {
      const { migrate } = await import('../../src/store/migrate.js');
      await migrate(db);
    }
    const op = validateOperation(
      {
        id: 'refund:named_1',
        provider: 'stripe',
        action: 'refund',
        payload: { amount: 100, currency: 'usd', payment_intent: 'pi_n1' },
      },
      ['stripe'],
    );
    await recordOperations({ db, actor: 'test', now: () => new Date() }, [op]);
    const lockPrepared = async () =>
      (await prepared(db)).some((sql) => /FROM recon\.operations WHERE id = \$1 FOR UPDATE/.test(sql));
    for (let i = 0; i < 200 && !(await lockPrepared()); i++) {
      await db.transaction((tx) => lockOperation(tx, 'refund:named_1'));
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(await lockPrepared()).toBe(true);
    const other = await openPostgres(migrated);
    try {
      await other.query('ALTER TABLE recon.operations ADD COLUMN added_later int');
    } finally {
      await other.close();
    }
    const locked = await db.transaction((tx) => lockOperation(tx, 'refund:named_1'));
    expect(locked.id).toBe('refund:named_1');
    expect(await lockPrepared()).toBe(true);
  });

  it("the kept statements' column list of recon.operations is the migrated table's, in its order", async () => {
    const template = inject('pgTemplate');
    const migrated = await createDatabase(base, undefined, template || undefined);
    const db = await openPostgres(migrated);
    opened.push(db);
    if (!template) {
      const { migrate } = await import('../../src/store/migrate.js');
      await migrate(db);
    }
    const r = await db.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns
        WHERE table_schema = 'recon' AND table_name = 'operations' ORDER BY ordinal_position`,
    );
    expect(operationColumns().split(', ')).toEqual(r.rows.map((c) => c.column_name));
  });

  it('a transaction whose failed statement was caught inside it is reported as not committed', async () => {
    // PostgreSQL ends such a transaction in a rollback and answers its COMMIT with the tag ROLLBACK,
    // not an error: without a look at the tag, the caller heard "committed" of writes that never were.
    const db = await open();
    await expect(
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO named_t (a) VALUES (100)');
        await tx.query('SELECT 1 / 0').catch(() => undefined);
        return 'done';
      }),
    ).rejects.toThrow(/rolled back/);
    expect((await db.query('SELECT a FROM named_t WHERE a = 100')).rows).toEqual([]);
    // The connection is usable after it.
    expect((await db.query<{ v: number }>('SELECT 1 AS v')).rows[0].v).toBe(1);
  });

  it('a table changed shape since the statement was prepared (a migration meanwhile): the answer has the new shape', async () => {
    const db = await open();
    const sql = keepPlan('SELECT * FROM named_t WHERE a = $1::int');
    expect(await untilPrepared(db, sql)).toBe(true);
    const other = await openPostgres(url);
    try {
      await other.query('ALTER TABLE named_t ADD COLUMN b int DEFAULT 7');
    } finally {
      await other.close();
    }
    expect((await db.query(sql, [1])).rows).toEqual([{ a: 1, b: 7 }]);
  });
});

/**
 * PGlite's own `query` sends every statement unnamed: PostgreSQL parsed, analysed and planned the move
 * statement at each of its executions (~5 ms of its ~10 ms in `recon mcp` on an embedded store).
 * src/store/pglite.ts sends keepPlan's statements named through PGlite's protocol module: the answers
 * must be what PGlite's `query` gives, errors included, in and out of transactions.
 */
describe('named statements on PGlite', () => {
  const opened: Db[] = [];
  const open = async () => {
    const db = await openStore('memory:');
    opened.push(db);
    await db.query('CREATE TABLE named_t (a int PRIMARY KEY, j jsonb, at timestamptz, n numeric, big bigint)');
    return db;
  };
  afterAll(async () => {
    for (const db of opened) await db.close();
  });
  const prepared = async (db: Db) =>
    (await db.query<{ statement: string }>('SELECT statement FROM pg_prepared_statements')).rows.map(
      (r) => r.statement,
    );
  /** The same statement, unnamed: its text is not keepPlan's (a comment makes it another text). */
  const unkept = (sql: string) => `${sql} -- unnamed`;

  it('a keepPlan statement is prepared in the session, and answers as the same statement unnamed', async () => {
    const db = await open();
    const insert = keepPlan(
      'INSERT INTO named_t (a, j, at, n, big) VALUES ($1::int, $2::jsonb, $3::timestamptz, $4::numeric, $5::bigint) RETURNING *',
    );
    const at = new Date('2026-12-08T01:02:03.456Z');
    const r = await db.query<Record<string, unknown>>(insert, [1, { k: ['v', 1, null] }, at, 12.5, 2 ** 40]);
    expect(await prepared(db)).toContain(insert);
    const u = await db.query<Record<string, unknown>>(unkept(insert), [2, { k: ['v', 1, null] }, at, 12.5, 2 ** 40]);
    expect(r).toEqual({ ...u, rows: [{ ...u.rows[0], a: 1 }] });
    expect(r.rows[0]).toEqual({ a: 1, j: { k: ['v', 1, null] }, at, n: 12.5, big: 2 ** 40 });
    // Arrays, NULLs and a statement that returns no rows.
    const select = keepPlan(
      'SELECT a, j, at FROM named_t WHERE a = ANY($1::int[]) AND ($2::text IS NULL OR j->>$2::text IS NOT NULL) ORDER BY a',
    );
    for (const params of [
      [[1, 2], null],
      [[2], 'k'],
      [[], null],
      [[3], 'x'],
    ]) {
      expect(await db.query(select, params)).toEqual(await db.query(unkept(select), params));
    }
    expect(await prepared(db)).toContain(select);
    const update = keepPlan('UPDATE named_t SET n = n + $2::numeric WHERE a = $1::int');
    expect(await db.query(update, [1, 1])).toEqual({ rows: [], rowCount: 1 });
    expect(await db.query(update, [9, 1])).toEqual({ rows: [], rowCount: 0 });
  });

  it('an error keeps its code, the statement runs again after it, and a transaction it fails leaves nothing', async () => {
    const db = await open();
    const insert = keepPlan('INSERT INTO named_t (a) VALUES ($1::int)');
    await db.query(insert, [1]);
    await expect(db.query(insert, [1])).rejects.toMatchObject({ code: '23505' });
    await db.query(insert, [2]);
    await expect(
      db.transaction(async (tx) => {
        await tx.query(insert, [3]);
        await tx.query(insert, [3]);
      }),
    ).rejects.toMatchObject({ code: '23505' });
    const count = keepPlan('SELECT count(*)::int AS n FROM named_t WHERE a >= $1::int');
    expect((await db.query<{ n: number }>(count, [1])).rows[0].n).toBe(2);
    await db.transaction(async (tx) => {
      await tx.query(insert, [3]);
      expect((await tx.query<{ n: number }>(count, [1])).rows[0].n).toBe(3);
    });
    expect((await db.query<{ n: number }>(count, [1])).rows[0].n).toBe(3);
    // Statements of several callers at once: each answer is its own.
    const one = keepPlan('SELECT $1::int AS v, pg_sleep(0) IS NULL AS slept');
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        i % 2 ? db.query<{ v: number }>(one, [i]) : db.transaction((tx) => tx.query<{ v: number }>(one, [i])),
      ),
    );
    expect(answers.map((a) => a.rows[0].v)).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });

  it('a session that lost the statement still answers: sent again unnamed, and unnamed from then on', async () => {
    const db = await open();
    const sql = keepPlan('SELECT $1::int + 1 AS v');
    expect((await db.query<{ v: number }>(sql, [1])).rows[0].v).toBe(2);
    expect(await prepared(db)).toContain(sql);
    await db.query('DEALLOCATE ALL');
    expect((await db.query<{ v: number }>(sql, [4])).rows[0].v).toBe(5);
    const after = keepPlan('SELECT $1::int + 2 AS v');
    expect((await db.query<{ v: number }>(after, [1])).rows[0].v).toBe(3);
    expect(await prepared(db)).toEqual([]);
  });
});
