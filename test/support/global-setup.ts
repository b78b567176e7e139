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
 *
 * The run gets a temporary folder of its own (`TMPDIR`, which the workers and every child process
 * inherit), so other runs on the same machine do not count: at the end it must be empty (a test
 * removes what it creates). If not, the run fails naming what was left, and the folder is
 * removed either way, leaving /tmp as the run found it. It is made in RAM (/dev/shm) where there
 * is room (runTempBase): the stores the tests copy, write and delete are disk work that no test is about.
 *
 * A run of the unit project alone (`vitest run --project unit`) starts no server and makes no
 * template: no unit file uses a store.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { openStore } from '../../src/store/open.js';
import { templatePath } from '../../src/store/template.js';
import { smallBufferPool } from './pglite-conf.js';
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
  const remove = () => fs.rmSync(root, { recursive: true, force: true });
  try {
    fs.cpSync(await initdbFolder(), empty, { recursive: true });
    // The migrated one is what recon makes of a new folder: a copy of the store template that
    // `npm test` builds (scripts/store-template.mjs), else the initdb copy, migrated here.
    if (!fs.existsSync(templatePath())) fs.cpSync(empty, migrated, { recursive: true });
    await (await openStore(`pglite:${migrated}`)).close();
    smallBufferPool(empty);
    smallBufferPool(migrated);
  } catch (err) {
    remove();
    throw err;
  }
  return { migrated, empty, remove };
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
  // others reuse it through the environment of this same main process. The stores are for the
  // integration files: a run of the unit project alone gets the run's temporary folder only.
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
  const runTmp = runTempFolder();
  const stores = project.vitest.projects.some((p) => p.name !== 'unit');
  const backend = process.env.RECON_TEST_BACKEND;
  const [started, made] = await Promise.allSettled([
    !stores || backend === 'pglite' ? undefined : postgresWithTemplate(),
    !stores || backend === 'postgres' ? undefined : pgliteTemplates(),
  ]);
  if (started.status === 'rejected' || made.status === 'rejected') {
    // One failed: undo what the other made.
    if (made.status === 'fulfilled') made.value?.remove();
    if (started.status === 'fulfilled') await started.value?.stop();
    runTmp.remove();
    throw started.status === 'rejected' ? started.reason : (made as PromiseRejectedResult).reason;
  }
  const server = started.value;
  const template = made.value;
  runTmp.removeOnExit();
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
    const left = runTmp.remove();
    if (left.length > 0) {
      // vitest prints a teardown's error but keeps the run's exit code: fail it here.
      process.exitCode = 1;
      throw new Error(
        `the tests left ${left.length} entr${left.length === 1 ? 'y' : 'ies'} in the temporary folder (removed now; ` +
          `a test removes what it creates): ${left.join(', ')}`,
      );
    }
  };
}

/**
 * A temporary folder for the run, made the `TMPDIR` of this process (and so of the workers and
 * child processes it starts). Readable by all: as root the PostgreSQL server runs as another user
 * in a folder inside it. `remove()` restores `TMPDIR`, deletes the folder, and returns what it held.
 */
function runTempFolder(): { removeOnExit: () => void; remove: () => string[] } {
  const previous = process.env.TMPDIR;
  const folder = fs.mkdtempSync(path.join(runTempBase(), 'recon-test-run-'));
  fs.chmodSync(folder, 0o755);
  process.env.TMPDIR = folder;
  const onExit = () => fs.rmSync(folder, { recursive: true, force: true });
  return {
    // After the server's own 'exit' listener, which stops it and removes its folder inside this one.
    removeOnExit: () => process.once('exit', onExit),
    remove: () => {
      process.removeListener('exit', onExit);
      if (previous === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = previous;
      const left = fs.existsSync(folder) ? fs.readdirSync(folder).sort() : [];
      fs.rmSync(folder, { recursive: true, force: true });
      return left;
    },
  };
}

/** statfs's f_type of a tmpfs (linux/magic.h TMPFS_MAGIC). */
const TMPFS_MAGIC = 0x01021994;
/** Room the run's folder may take: the PostgreSQL server's databases (one per store a test makes) and the stores. */
const RUN_ROOM = 4 * 2 ** 30;

/**
 * Where the run's temporary folder is made: `TMPDIR` when set; else /dev/shm when it is a tmpfs
 * with RUN_ROOM free; else the system's temporary folder. The tests copy a 30 MB data folder
 * for most stores they make, PGlite and the server write to them, and every file's stores are
 * deleted after it; on a disk that is seconds of waiting per file (a copy ~0.3–3 s, a delete
 * ~1 s with `discard`, on a busy machine), in RAM a tenth of it. A container's small /dev/shm
 * (Docker's default 64 MB) is not used.
 */
function runTempBase(): string {
  if (process.env.TMPDIR) return os.tmpdir();
  const shm = '/dev/shm';
  try {
    const fsStat = fs.statfsSync(shm);
    fs.accessSync(shm, fs.constants.W_OK);
    if (fsStat.type === TMPFS_MAGIC && fsStat.bavail * fsStat.bsize >= RUN_ROOM) return shm;
  } catch {
    // No /dev/shm here, or not one this user may write.
  }
  return os.tmpdir();
}
