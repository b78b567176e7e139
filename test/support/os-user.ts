/**
 * Running a program as an unprivileged OS user, for tests run as root: PostgreSQL and PgBouncer
 * refuse to run as root, and root ignores file modes (a test of a read-only folder needs someone
 * it applies to). One place for finding `runuser` and the user.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface OsUser {
  name: string;
  uid: number;
  gid: number;
}

export const asRoot = process.getuid?.() === 0;

/**
 * util-linux's `runuser` lives in /usr/sbin or /sbin, which a PATH limited to the basics
 * (`PATH=/usr/bin:/bin`, as in a fresh container shell or cron) leaves out.
 */
function runuserPath(): string {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  for (const dir of dirs) {
    if (dir && fs.existsSync(path.join(dir, 'runuser'))) return path.join(dir, 'runuser');
  }
  throw new Error(
    'running the tests as root needs util-linux runuser (in /usr/sbin or /sbin), to run a program as an unprivileged user',
  );
}

function lookup(name: string): OsUser | undefined {
  const id = (flag: string) =>
    Number(
      execFileSync('id', [flag, name], { stdio: ['ignore', 'pipe', 'ignore'] })
        .toString()
        .trim(),
    );
  try {
    return { name, uid: id('-u'), gid: id('-g') };
  } catch {
    return undefined;
  }
}

/** `nobody`, which every Linux system has: for a child that must not be root. */
export function unprivilegedUser(): OsUser {
  const user = lookup('nobody');
  if (!user) throw new Error('running the tests as root needs the OS user `nobody` (id nobody found none)');
  return user;
}

/**
 * Who runs the test servers (PostgreSQL, PgBouncer) when the tests run as root: `postgres` where
 * the Debian package made it, else `nobody` (a plain `node:20-bookworm` container has no
 * `postgres` user). `RECON_TEST_SERVER_USER` names another.
 */
export function serverUser(): OsUser {
  const wanted = process.env.RECON_TEST_SERVER_USER;
  if (wanted) {
    const user = lookup(wanted);
    if (!user) throw new Error(`RECON_TEST_SERVER_USER=${wanted}: no such OS user`);
    return user;
  }
  return lookup('postgres') ?? unprivilegedUser();
}

/** `[command, args]` that run `cmd args` as `user` when root, or as they are otherwise. */
export function runAs(user: OsUser | undefined, cmd: string, args: string[]): [string, string[]] {
  return user ? [runuserPath(), ['-u', user.name, '--', cmd, ...args]] : [cmd, args];
}

/** Whether `user` can run `binary --version` (it may sit in a folder the user cannot enter). */
export function canRunAs(user: OsUser, binary: string, args: string[] = ['--version']): boolean {
  const [cmd, argv] = runAs(user, binary, args);
  return spawnSync(cmd, argv, { stdio: 'ignore', cwd: os.tmpdir() }).status === 0;
}

/**
 * A copy of what the built CLI needs (`bin/`, `dist/`, `package.json`, the migrations and the
 * production dependencies, hard-linked where the file system allows) inside `into`, for a child
 * run as another user when the clone sits where that user cannot enter (e.g. /root). Returns the
 * copy's `bin/recon`.
 */
export function readableInstall(root: string, into: string): string {
  const copy = (rel: string) => linkTree(path.join(root, rel), path.join(into, rel));
  for (const rel of ['bin', 'dist', 'package.json', path.join('src', 'store', 'migrations')]) copy(rel);
  for (const dir of productionPackages(root)) copy(path.relative(root, dir));
  return path.join(into, 'bin', 'recon');
}

/** The folders of the packages `root`'s dependencies need, transitively, as Node resolves them. */
function productionPackages(root: string): Set<string> {
  const found = new Set<string>();
  const deps = (dir: string) => {
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as Record<string, unknown>;
    return Object.keys({ ...(pkg.dependencies as object), ...(pkg.optionalDependencies as object) });
  };
  const visit = (from: string, name: string) => {
    for (let dir = from; ; dir = path.dirname(dir)) {
      const candidate = path.join(dir, 'node_modules', name);
      if (fs.existsSync(path.join(candidate, 'package.json'))) {
        if (!found.has(candidate)) {
          found.add(candidate);
          for (const dep of deps(candidate)) visit(candidate, dep);
        }
        return;
      }
      if (dir === root || path.dirname(dir) === dir) return; // an optional dependency not installed here
    }
  };
  for (const dep of deps(root)) visit(root, dep);
  return found;
}

function linkTree(from: string, to: string): void {
  const stat = fs.statSync(from);
  if (!stat.isDirectory()) {
    fs.mkdirSync(path.dirname(to), { recursive: true, mode: 0o755 });
    try {
      fs.linkSync(from, to);
    } catch {
      fs.copyFileSync(from, to);
    }
    return;
  }
  fs.mkdirSync(to, { recursive: true, mode: 0o755 });
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    if (entry.isSymbolicLink()) continue; // node_modules/.bin
    linkTree(path.join(from, entry.name), path.join(to, entry.name));
  }
}
