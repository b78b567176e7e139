/**
 * vitest globalSetup, once per test run:
 * - one PostgreSQL server shared by every integration file (each file creates its own databases on
 *   it, as copies of a template database migrated here once). Tests read its URL with
 *   `inject('pgUrl')`; child processes (the CLI under test) see it as RECON_TEST_PG_URL.
 * - one migrated PGlite data folder that every embedded store of the run starts as a copy of
 *   (`inject('pgliteTemplate')`), and one without recon's schema for the migration tests
 *   (`inject('pgliteEmptyTemplate')`): creating a PGlite folder (its initdb) and migrating it
 *   costs seconds, copying one milliseconds.
 *
 * With RECON_TEST_BACKEND=pglite no server is started and `pgUrl` is ''; with =postgres no PGlite
 * template is made and `pgliteTemplate` is ''.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { openStore } from '../../src/store/open.js';
import { createDatabase, startPostgres } from './postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Base URL of the run's PostgreSQL server (database `postgres`); '' when not started. */
    pgUrl: string;
    /** Name of a migrated database on that server to create test databases from; '' when none. */
    pgTemplate: string;
    /** A closed, migrated PGlite data folder to copy; '' when none. */
    pgliteTemplate: string;
    /** A closed PGlite data folder without recon's schema (initdb only) to copy; '' when none. */
    pgliteEmptyTemplate: string;
  }
}

export const PG_TEMPLATE_DB = 'recon_template';

async function pgliteTemplates(): Promise<{ migrated: string; empty: string; remove: () => void }> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-template-'));
  const empty = path.join(root, 'empty');
  const migrated = path.join(root, 'migrated');
  await (await openStore(`pglite:${empty}`, { autoMigrate: false, requireCurrent: false })).close();
  fs.cpSync(empty, migrated, { recursive: true });
  await (await openStore(`pglite:${migrated}`)).close();
  return { migrated, empty, remove: () => fs.rmSync(root, { recursive: true, force: true }) };
}

async function postgresWithTemplate() {
  const server = await startPostgres();
  try {
    const url = await createDatabase(server.url, PG_TEMPLATE_DB);
    await (await openStore(url)).close();
  } catch (err) {
    await server.stop();
    throw err;
  }
  return server;
}

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  // Each vitest project (unit, integration) runs this setup; the first one does the work and the
  // others reuse it through the environment of this same main process.
  const existing = process.env.RECON_TEST_SETUP;
  if (existing) {
    const shared = JSON.parse(existing) as {
      pgUrl: string;
      pgTemplate: string;
      pgliteTemplate: string;
      pgliteEmptyTemplate: string;
    };
    project.provide('pgUrl', shared.pgUrl);
    project.provide('pgTemplate', shared.pgTemplate);
    project.provide('pgliteTemplate', shared.pgliteTemplate);
    project.provide('pgliteEmptyTemplate', shared.pgliteEmptyTemplate);
    return undefined;
  }
  const backend = process.env.RECON_TEST_BACKEND;
  const [server, template] = await Promise.all([
    backend === 'pglite' ? undefined : postgresWithTemplate(),
    backend === 'postgres' ? undefined : pgliteTemplates(),
  ]);
  const shared = {
    pgUrl: server?.url ?? '',
    pgTemplate: server ? PG_TEMPLATE_DB : '',
    pgliteTemplate: template?.migrated ?? '',
    pgliteEmptyTemplate: template?.empty ?? '',
  };
  process.env.RECON_TEST_SETUP = JSON.stringify(shared);
  if (server) process.env.RECON_TEST_PG_URL = server.url;
  project.provide('pgUrl', shared.pgUrl);
  project.provide('pgTemplate', shared.pgTemplate);
  project.provide('pgliteTemplate', shared.pgliteTemplate);
  project.provide('pgliteEmptyTemplate', shared.pgliteEmptyTemplate);
  return async () => {
    delete process.env.RECON_TEST_SETUP;
    delete process.env.RECON_TEST_PG_URL;
    template?.remove();
    await server?.stop();
  };
}
