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
import { createDatabase } from './postgres.js';

export interface Backend {
  name: 'pglite' | 'postgres';
  /** A store URL for a new, empty store (a temp folder, or a fresh database on the run's server). */
  url(): Promise<string>;
  /** Opens (and by default migrates) a new, empty store. */
  open(opts?: OpenStoreOptions): Promise<Db>;
}

const tempDirs: string[] = [];

/** Removes the temp folders of the embedded stores this file created; call in afterAll, after closing them. */
export function removeTempStores(): void {
  for (const dir of tempDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
}

const pglite: Backend = {
  name: 'pglite',
  async url() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-store-'));
    tempDirs.push(dir);
    return `pglite:${path.join(dir, 'db')}`;
  },
  async open(opts) {
    return openStore(await this.url(), opts);
  },
};

const postgres: Backend = {
  name: 'postgres',
  async url() {
    const base = inject('pgUrl') || process.env.RECON_TEST_PG_URL;
    if (!base) throw new Error('no PostgreSQL server for this run: is test/support/global-setup.ts configured?');
    return createDatabase(base);
  },
  async open(opts) {
    return openStore(await this.url(), opts);
  },
};

const selected = process.env.RECON_TEST_BACKEND;
if (selected && selected !== 'pglite' && selected !== 'postgres') {
  throw new Error(`RECON_TEST_BACKEND=${selected}: use pglite or postgres`);
}

export const backends: Backend[] = [pglite, postgres].filter((b) => !selected || b.name === selected);
