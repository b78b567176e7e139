/**
 * A PgBouncer in front of a test PostgreSQL server, in transaction pooling mode (how large
 * deployments run): consecutive transactions of one client may run on different server sessions,
 * so anything recon keeps in a session (advisory locks, named prepared statements, `SET`) would
 * leak to another client or be lost.
 *
 * The binary is the Debian package `pgbouncer` (`/usr/sbin/pgbouncer`), or `PGBOUNCER_BIN`. It is
 * not on npm: where it is missing, the tests that need it are skipped and the run's summary says
 * so in one line (`test/support/optional.ts`); with RECON_TEST_REQUIRE_PGBOUNCER=1 (CI) they run
 * and fail, naming the package. Like PostgreSQL, PgBouncer refuses to run as root; then it runs
 * as the same OS user as the server (`serverUser()`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { asRoot, runAs, serverUser } from './os-user.js';

export interface PgBouncer {
  /** `postgres://postgres@127.0.0.1:PORT/DATABASE`: the pooler, for the database of `serverUrl`. */
  url: string;
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  /** Server connections per (database, user); default 4, fewer than the clients the tests open. */
  poolSize?: number;
}

/** The pgbouncer binary, or an error naming the package and PGBOUNCER_BIN. */
export function findPgBouncer(): string {
  const missing = (where: string) =>
    new Error(
      `no pgbouncer binary (${where}): install the Debian package \`pgbouncer\` ` +
        '(apt-get install -y pgbouncer; .ci/run does it) or set PGBOUNCER_BIN to its path',
    );
  const fromEnv = process.env.PGBOUNCER_BIN;
  if (fromEnv) {
    if (!fs.existsSync(fromEnv)) throw missing(`PGBOUNCER_BIN=${fromEnv} does not exist`);
    return fromEnv;
  }
  const candidates = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'];
  for (const dir of (process.env.PATH ?? '').split(path.delimiter))
    if (dir) candidates.push(path.join(dir, 'pgbouncer'));
  const found = candidates.find((p) => fs.existsSync(p));
  if (!found) throw missing('looked in /usr/sbin, /usr/bin and PATH');
  return found;
}

/**
 * Starts PgBouncer (pool_mode = transaction) for the server and database of `serverUrl`. PgBouncer
 * cannot listen on port 0 and say which port it took, so the port is one that was free a moment
 * ago: if another process binds it first, PgBouncer exits, and it is started again on another.
 */
export async function startPgBouncer(serverUrl: string, opts: PgBouncerOptions = {}): Promise<PgBouncer> {
  let lastError: unknown;
  for (let i = 0; i < 3; i++) {
    try {
      return await startOn(await freePort(), serverUrl, opts);
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

async function startOn(port: number, serverUrl: string, opts: PgBouncerOptions): Promise<PgBouncer> {
  const bin = findPgBouncer();
  const server = new URL(serverUrl);
  const database = server.pathname.replace(/^\//, '') || 'postgres';
  const user = asRoot ? serverUser() : undefined;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-pgbouncer-'));
  const logFile = path.join(dir, 'pgbouncer.log');
  const ini = [
    '[databases]',
    `* = host=${server.hostname} port=${server.port || 5432} user=${decodeURIComponent(server.username || 'postgres')}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    "unix_socket_dir = ''",
    'auth_type = any',
    'pool_mode = transaction',
    `default_pool_size = ${opts.poolSize ?? 4}`,
    'max_client_conn = 500',
    // Never let a pooler hide a server session's leftovers: in transaction mode PgBouncer runs no
    // reset query between clients, so what one transaction leaves in a session, the next one sees.
    'server_reset_query =',
    `logfile = ${logFile}`,
    `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
    'ignore_startup_parameters = extra_float_digits,options',
  ].join('\n');
  const iniPath = path.join(dir, 'pgbouncer.ini');
  fs.writeFileSync(iniPath, ini + '\n');
  let child: ChildProcess;
  try {
    if (user) {
      fs.chownSync(dir, user.uid, user.gid);
      fs.chownSync(iniPath, user.uid, user.gid);
    }
    const [cmd, args] = runAs(user, bin, [iniPath]);
    child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: os.tmpdir() });
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  let exited = false;
  child.on('exit', () => (exited = true));
  const onExit = () => {
    child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', onExit);

  const log = () => output + (fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '');
  for (let i = 0; !(await canConnect(port)); i++) {
    if (exited || i > 200) {
      onExit();
      process.removeListener('exit', onExit);
      throw new Error(`could not start pgbouncer (${bin}) on port ${port}:\n${log().slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    url: `postgres://${server.username || 'postgres'}@127.0.0.1:${port}/${database}`,
    async stop() {
      process.removeListener('exit', onExit);
      if (!exited) {
        const gone = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        // runuser passes SIGTERM on; PgBouncer's SIGTERM is an immediate shutdown.
        await Promise.race([gone, new Promise((r) => setTimeout(r, 5000))]);
        if (!exited) child.kill('SIGKILL');
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
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
