/**
 * vitest globalSetup, once per test run:
 * - one PostgreSQL server shared by every integration file (each file creates its own databases on
 *   it, as copies of a template database migrated here once). Tests read its URL with
 *   `inject('pgUrl')`; child processes (the CLI under test) see it as RECON_TEST_PG_URL.
 * - one migrated PGlite data folder that every embedded store of the run starts as a copy of
 *   (`inject('pgliteTemplate')`), and one without recon's schema for the migration tests
 *   (`inject('pgliteEmptyTemplate')`): creating a PGlite folder (its initdb) and migrating it
 *   costs seconds, copying one milliseconds. The initdb output is cached per PGlite version.
 * The server and the PGlite templates are made at the same time.
 *
 * With RECON_TEST_BACKEND=pglite no server is started and `pgUrl` is ''; with =postgres no PGlite
 * template is made and `pgliteTemplate` is ''.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { openStore } from '../../src/store/open.js';
import { templatePath } from '../../src/store/template.js';
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
  fs.cpSync(await initdbFolder(), empty, { recursive: true });
  // The migrated one is what recon makes of a new folder: a copy of the store template that
  // `npm test` builds (scripts/store-template.mjs), else the initdb copy, migrated here.
  if (!fs.existsSync(templatePath())) fs.cpSync(empty, migrated, { recursive: true });
  await (await openStore(`pglite:${migrated}`)).close();
  return { migrated, empty, remove: () => fs.rmSync(root, { recursive: true, force: true }) };
}

/**
 * A closed PGlite data folder that has been through initdb only: what PGlite's first open of an
 * empty folder writes, seconds of CPU (the WebAssembly initdb), the same every time for one PGlite
 * version. So it is made once per installed version, in `node_modules/.cache/recon-test-pglite/
 * <version>` (`npm ci` starts the cache afresh), and each run copies it. The migrated template is
 * still made by every run, from the current migrations.
 */
async function initdbFolder(): Promise<string> {
  // The package's root (its exports leave out package.json): the folder above its entry point.
  let pkgRoot = path.dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite'));
  while (!fs.existsSync(path.join(pkgRoot, 'package.json'))) pkgRoot = path.dirname(pkgRoot);
  const pkg = JSON.parse(fs.readFileSync(path.join(pkgRoot, 'package.json'), 'utf8')) as { version: string };
  const version = pkg.version;
  // pkgRoot is <node_modules>/@electric-sql/pglite
  const cacheRoot = path.join(path.resolve(pkgRoot, '../..'), '.cache', 'recon-test-pglite');
  const target = path.join(cacheRoot, version);
  const folder = path.join(target, 'db');
  if (fs.existsSync(path.join(target, '.done'))) return folder;
  fs.mkdirSync(cacheRoot, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(cacheRoot, `${version}.tmp-`));
  try {
    await (await openStore(`pglite:${path.join(tmp, 'db')}`, { autoMigrate: false, requireCurrent: false })).close();
    fs.writeFileSync(path.join(tmp, '.done'), `@electric-sql/pglite@${version}\n`);
    fs.renameSync(tmp, target);
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    // Another run made it meanwhile: theirs is as good as ours.
    if (!fs.existsSync(path.join(target, '.done'))) throw err;
  }
  return folder;
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
