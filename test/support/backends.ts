/**
 * The store backends a suite runs over, pg-boss style:
 *
 *   describe.each(backends)('store on $name', ({ open }) => { ... })
 *
 * RECON_TEST_BACKEND=pglite|postgres selects one; default both.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { inject } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { openStore, type OpenStoreOptions } from '../../src/store/open.js';
import { atFileEnd } from './file-end.js';
import { smallBufferPool } from './pglite-conf.js';
import { createDatabase } from './postgres.js';

export interface Backend {
  name: 'pglite' | 'postgres';
  /** The URL of a new, empty store (a temp folder, or a fresh database on the run's server). */
  url(): Promise<string>;
  /**
   * The URL of a new store without recon's schema, ready at once: on PGlite a copy of a data folder
   * that has been through initdb only (url() names a folder that does not exist yet, and its first
   * open runs initdb, which takes seconds). For migration tests; url() for tests of store creation.
   */
  emptyUrl(): Promise<string>;
  /** The URL of a new store already at the latest schema (closed; open it yourself or pass it to the CLI). */
  migratedUrl(): Promise<string>;
  /** Opens a new store at the latest schema; with `opts`, opens a new empty store with those options. */
  open(opts?: OpenStoreOptions): Promise<Db>;
}

const tempDirs: string[] = [];

/** Temp folders of stores still open for later tests (world.ts's pool): removeTempStores leaves them. */
const held = new Set<string>();

/**
 * Removes the temp folders of the embedded stores this file created, after closing them. Runs after
 * every file (file-end.ts); a file may call it earlier, e.g. in an afterAll of its own.
 */
export function removeTempStores(): void {
  const keep = tempDirs.filter((dir) => held.has(dir));
  for (const dir of tempDirs.splice(0)) if (!held.has(dir)) fs.rmSync(dir, { recursive: true, force: true });
  tempDirs.push(...keep);
}
atFileEnd(removeTempStores);
// What is still held when the worker ends (world.ts's pool, handed from file to file): the store
// dies with the process, its folder goes here. vitest ends a worker with SIGTERM, which ends a Node
// process without its 'exit' event unless the signal is handled: handled, it exits as it would.
process.once('exit', () => {
  for (const dir of tempDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});
if (process.listenerCount('SIGTERM') === 0) process.once('SIGTERM', () => process.exit(143));

/**
 * Keeps the temp folder of the store at `url` (if it is one) from removeTempStores while that store
 * stays open for later tests; call the function returned to let removeTempStores take it again.
 */
export function holdTempStore(url: string): () => void {
  const dir = url.startsWith('pglite:') ? path.dirname(url.slice('pglite:'.length)) : '';
  held.add(dir);
  return () => held.delete(dir);
}

function tempStoreFolder(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-store-'));
  tempDirs.push(dir);
  return path.join(dir, 'db');
}

// Creating a PGlite data folder (its initdb) and migrating it takes seconds; copying a closed,
// migrated one takes milliseconds. global-setup.ts makes one per run; without it (a file run
// with another config), one per worker, made on first use and kept (not a temp store of the file:
// the worker may run other files after this one) until the worker exits. Either one has a small
// buffer pool (pglite-conf.ts).
let pgliteTemplate: Promise<string> | undefined;
function migratedPgliteTemplate(): Promise<string> {
  pgliteTemplate ??= (async () => {
    const made = inject('pgliteTemplate');
    if (made) return made;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-template-'));
    process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
    const folder = path.join(dir, 'db');
    await (await openStore(`pglite:${folder}`)).close();
    smallBufferPool(folder);
    return folder;
  })();
  return pgliteTemplate;
}

/**
 * Puts a closed embedded store at the latest schema at `folder` (a copy of the run's migrated
 * template): what `recon init` or the first `ops record` leaves in `.recon/db`, without the seconds
 * of PGlite's initdb and the migrations. For tests where the store's creation is not the point.
 */
export async function migratedStoreAt(folder: string): Promise<void> {
  const template = await migratedPgliteTemplate();
  fs.mkdirSync(path.dirname(folder), { recursive: true });
  fs.cpSync(template, folder, { recursive: true });
}

const pglite: Backend = {
  name: 'pglite',
  async url() {
    return `pglite:${tempStoreFolder()}`;
  },
  async emptyUrl() {
    const template = inject('pgliteEmptyTemplate');
    if (!template) return this.url();
    const folder = tempStoreFolder();
    fs.cpSync(template, folder, { recursive: true });
    return `pglite:${folder}`;
  },
  async migratedUrl() {
    const folder = tempStoreFolder();
    await migratedStoreAt(folder);
    return `pglite:${folder}`;
  },
  async open(opts) {
    return openStore(opts ? await this.url() : await this.migratedUrl(), opts);
  },
};

function serverUrl(): string {
  const base = inject('pgUrl') || process.env.RECON_TEST_PG_URL;
  if (!base) throw new Error('no PostgreSQL server for this run: is test/support/global-setup.ts configured?');
  return base;
}

const postgres: Backend = {
  name: 'postgres',
  async url() {
    return createDatabase(serverUrl());
  },
  async emptyUrl() {
    return this.url();
  },
  async migratedUrl() {
    // A copy of the run's migrated template database, else a new database migrated here.
    const template = inject('pgTemplate');
    if (template) return createDatabase(serverUrl(), undefined, template);
    const url = await this.url();
    await (await openStore(url)).close();
    return url;
  },
  async open(opts) {
    return openStore(opts ? await this.url() : await this.migratedUrl(), opts);
  },
};

const selected = process.env.RECON_TEST_BACKEND;
if (selected && selected !== 'pglite' && selected !== 'postgres') {
  throw new Error(`RECON_TEST_BACKEND=${selected}: use pglite or postgres`);
}

export const backends: Backend[] = [pglite, postgres].filter((b) => !selected || b.name === selected);

/** Whether `b` is one of the run's own backends (not one a test made, e.g. through a pooler). */
export function isRunBackend(b: Backend): boolean {
  return b === pglite || b === postgres;
}

/**
 * Empties every recon table of an open store (the migrations' record stays), so that one store per
 * file can serve test after test as if each had a fresh one: opening a store costs ~0.5–1 s of CPU
 * on PGlite, a TRUNCATE milliseconds. The append-only triggers of the audit table are switched off
 * for the TRUNCATE only, in its transaction (the tests run as the tables' owner).
 */
export async function resetStore(db: Db): Promise<void> {
  const tables = await db.query<{ name: string }>(
    `SELECT quote_ident(tablename) AS name FROM pg_tables WHERE schemaname = 'recon' AND tablename <> 'schema_migrations'`,
  );
  await db.transaction(async (tx) => {
    // The append-only tables refuse TRUNCATE by trigger (audit_keying: migration 0004).
    const fixed = tables.rows.filter((t) => t.name === 'audit_events' || t.name === 'audit_keying');
    for (const t of fixed) await tx.query(`ALTER TABLE recon.${t.name} DISABLE TRIGGER USER`);
    await tx.query(`TRUNCATE ${tables.rows.map((t) => `recon.${t.name}`).join(', ')} RESTART IDENTITY CASCADE`);
    for (const t of fixed) await tx.query(`ALTER TABLE recon.${t.name} ENABLE TRIGGER USER`);
  });
}

/** The embedded backend whatever RECON_TEST_BACKEND says, for tests about the embedded store itself (its lock, `recon init`). */
export const embeddedBackend: Backend = pglite;
