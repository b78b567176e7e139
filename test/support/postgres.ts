/**
 * A real PostgreSQL server for the test run, from the distribution's binaries
 * (`/usr/lib/postgresql/<newest>/bin`, or `PG_BIN`). It listens on 127.0.0.1 only, on a free
 * port, with trust auth and durability switched off for speed. Tests never skip when it cannot
 * start: the error says why, and CI fails.
 *
 * PostgreSQL refuses to run as root, and CI runs as root: then the server runs as the
 * `postgres` OS user (`runuser`), in a temporary folder that user owns.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface PostgresServer {
  /** `postgres://postgres@127.0.0.1:PORT/postgres` */
  url: string;
  stop(): Promise<void>;
}

export function findPgBin(): string {
  const fromEnv = process.env.PG_BIN;
  if (fromEnv) {
    if (!fs.existsSync(path.join(fromEnv, 'postgres'))) throw new Error(`PG_BIN=${fromEnv} has no postgres binary`);
    return fromEnv;
  }
  const root = '/usr/lib/postgresql';
  const versions = fs.existsSync(root)
    ? fs.readdirSync(root).filter((v) => fs.existsSync(path.join(root, v, 'bin', 'postgres')))
    : [];
  versions.sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0) {
    throw new Error(
      'no PostgreSQL server binaries in /usr/lib/postgresql/*/bin: install them ' +
        '(apt-get install postgresql, or run .ci/run) or set PG_BIN to the folder holding initdb and pg_ctl',
    );
  }
  return path.join(root, versions[0]!, 'bin');
}

export interface StartOptions {
  /**
   * Default durability (fsync, synchronous_commit and full_page_writes on), as users run it: the
   * bench measures with it. Tests run without, for speed.
   */
  durable?: boolean;
}

export async function startPostgres(o: StartOptions = {}): Promise<PostgresServer> {
  const bin = findPgBin();
  const asRoot = process.getuid?.() === 0;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-pg-'));
  const data = path.join(dir, 'data');
  const logFile = path.join(dir, 'server.log');
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    fs.chownSync(dir, uid, gid);
  }
  const run = (cmd: string, args: string[]) =>
    asRoot
      ? runCommand('runuser', ['-u', 'postgres', '--', path.join(bin, cmd), ...args])
      : runCommand(path.join(bin, cmd), args);

  try {
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
          const [cmd, args] = asRoot
            ? ['runuser', ['-u', 'postgres', '--', path.join(bin, 'pg_ctl'), ...stopArgs]]
            : [path.join(bin, 'pg_ctl'), stopArgs];
          spawnSync(cmd as string, args as string[], { stdio: 'ignore', cwd: os.tmpdir() });
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
    throw new Error(`could not start PostgreSQL from ${bin}: ${(err as Error).message}\n${log}`, { cause: err });
  }
}

/** Creates an empty database on the server at `baseUrl` and returns its URL. */
export async function createDatabase(
  baseUrl: string,
  name = `recon_t_${randomBytes(6).toString('hex')}`,
): Promise<string> {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`bad test database name ${name}`);
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: baseUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
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
