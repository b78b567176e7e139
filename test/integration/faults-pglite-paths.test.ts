/**
 * Issue 10, Faults: a `pglite:` path that cannot be a store — a file, a folder under a file, a
 * read-only folder, a non-empty folder that is not a recon store — is exit 2 or 6 with a hint,
 * never exit 1 with a raw EEXIST/EACCES/EROFS, and nothing is created in someone else's folder.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync, spawn } from 'node:child_process';
import { BIN, cleanEnv, collect, recon, ROOT } from '../support/cli.js';
import { asRoot, canRunAs, readableInstall, runAs, unprivilegedUser, type OsUser } from '../support/os-user.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-paths-'));
fs.chmodSync(root, 0o755);
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

function noRawErrno(stderr: string): void {
  expect(stderr).not.toMatch(/^recon: (EEXIST|EACCES|EROFS|ENOTDIR|EPERM)/m);
  expect(stderr).not.toContain('[object Object]');
}

describe('pglite: paths that cannot be a store', () => {
  it('a file: exit 2, naming the path and saying it is not a folder', async () => {
    const file = path.join(root, 'afile');
    fs.writeFileSync(file, 'not a store\n');
    const r = await recon(['--db', `pglite:${file}`, 'ops', 'list', '--json'], { cwd: root });
    expect(r.code, r.stderr).toBe(2);
    noRawErrno(r.stderr);
    expect(r.json.error.message).toMatch(/is a file, not a folder/);
    expect(fs.readFileSync(file, 'utf8')).toBe('not a store\n');
  });

  it('a folder under a file: exit 2 with the same hint', async () => {
    const file = path.join(root, 'afile2');
    fs.writeFileSync(file, 'x');
    const r = await recon(['--db', `pglite:${file}/db`, 'ops', 'list', '--json'], { cwd: root });
    expect(r.code, r.stderr).toBe(2);
    noRawErrno(r.stderr);
    expect(r.json.error.message).toMatch(/is a file, not a folder/);
  });

  it('a non-empty folder that is not a recon store: exit 2, and nothing is written into it', async () => {
    const folder = path.join(root, 'documents');
    fs.mkdirSync(folder);
    fs.writeFileSync(path.join(folder, 'notes.txt'), 'mine\n');
    const r = await recon(['--db', `pglite:${folder}`, 'ops', 'list', '--json'], { cwd: root });
    expect(r.code, r.stderr).toBe(2);
    noRawErrno(r.stderr);
    expect(r.json.error.message).toMatch(/not empty and is not a recon store/);
    expect(fs.readdirSync(folder)).toEqual(['notes.txt']);
    expect(fs.existsSync(`${folder}.lock`)).toBe(false);
  });

  it('a read-only folder: exit 6 with a hint about permissions, not a raw EACCES', async () => {
    const parent = path.join(root, 'readonly');
    // The (empty) store folder exists: a command that does not create stores stops at a missing one
    // (exit 6, "no recon store at …") before it would try to write.
    fs.mkdirSync(path.join(parent, 'db'), { recursive: true });
    fs.chmodSync(path.join(parent, 'db'), 0o555);
    fs.chmodSync(parent, 0o555);
    // root ignores file modes: run the CLI as an unprivileged user then, from a copy it can read
    // when the clone sits where that user cannot enter (e.g. /root).
    const user = asRoot ? unprivilegedUser() : undefined;
    const bin =
      user && !canRunAs(user, process.execPath, [BIN, '--version'])
        ? readableInstall(ROOT, path.join(root, 'app'))
        : BIN;
    const args = [bin, '--db', `pglite:${path.join(parent, 'db')}`, 'ops', 'list', '--json'];
    const [cmd, argv] = runAs(user, process.execPath, args);
    const r = await collect(spawn(cmd, argv, { cwd: root, env: cleanEnv() }));
    expect(r.code, r.stderr).toBe(6);
    noRawErrno(r.stderr);
    expect(r.json.error.message).toMatch(/cannot write|permission/i);
    expect(r.json.error.message).toMatch(/readonly/);
  });

  it('a folder holding a damaged or foreign data directory: exit 6 with a hint, not exit 1', async () => {
    const folder = path.join(root, 'damaged');
    fs.mkdirSync(folder);
    fs.writeFileSync(path.join(folder, 'PG_VERSION'), '99\n');
    const r = await recon(['--db', `pglite:${folder}`, 'ops', 'list', '--json'], { cwd: root });
    expect(r.code, r.stderr).toBe(6);
    noRawErrno(r.stderr);
    expect(r.json.error.message).toMatch(/cannot open the embedded store/);
  });
});

/**
 * Issue 23, store edges: a store that exists but cannot be written here, and a full disk. Each is
 * exit 6 saying what to fix (permissions, space), never "restore it from a backup" or exit 1 with a
 * raw EACCES or emscripten's `ErrnoError 51`, and nothing is half-written.
 */
describe('pglite: a store this user cannot write, and a full disk', () => {
  const asRoot = process.getuid?.() === 0;
  let template: string | undefined;
  /** A migrated store, made once, copied for each case. */
  async function storeCopy(dest: string): Promise<void> {
    if (!template) {
      template = path.join(root, 'template');
      // `ops record` creates a missing store (SPEC §5; `db migrate` exits 6 there): an empty batch records nothing.
      const made = await recon(['--db', `pglite:${template}`, 'ops', 'record', '-', '--json'], {
        cwd: root,
        input: '[]',
      });
      expect(made.code, made.stderr).toBe(0);
    }
    fs.cpSync(template, dest, { recursive: true });
  }
  /** As `nobody` or `daemon` when the tests run as root (root ignores file modes). */
  function reconAs(user: string, args: string[]) {
    const argv = [BIN, ...args];
    const [cmd, cmdArgs] = runAs(asRoot ? ({ name: user } as OsUser) : undefined, process.execPath, argv);
    const child = spawn(cmd, cmdArgs, { cwd: root, env: cleanEnv() });
    return collect(child);
  }

  it.skipIf(!asRoot)(
    'an existing store whose folder is read-only: exit 6 about permissions, not a backup',
    async () => {
      const store = path.join(root, 'ro-store');
      await storeCopy(store);
      execFileSync('chown', ['-R', 'nobody', store]);
      execFileSync('chmod', ['-R', 'a-w', store]);
      const r = await reconAs('nobody', ['--db', `pglite:${store}`, 'ops', 'list', '--json']);
      expect(r.code, r.stderr).toBe(6);
      noRawErrno(r.stderr);
      expect(r.json.error.message).toMatch(/cannot be read and written by you .*EACCES/);
      expect(r.json.error.message).toMatch(/fix its permissions/);
      expect(r.json.error.message).not.toMatch(/backup|compatible version/);
    },
  );

  it.skipIf(!asRoot)(
    'another user’s 0700 store folder: exit 6 naming its owner, not exit 1 EACCES scandir',
    async () => {
      const store = path.join(root, 'nobodys-store');
      await storeCopy(store);
      execFileSync('chown', ['-R', 'nobody', store]);
      fs.chmodSync(store, 0o700);
      const r = await reconAs('daemon', ['--db', `pglite:${store}`, 'ops', 'list', '--json']);
      expect(r.code, r.stderr).toBe(6);
      noRawErrno(r.stderr);
      expect(r.json.error.message).toContain(`${store} cannot be read and written by you`);
      expect(r.json.error.message).toContain('it belongs to nobody (uid 65534): run recon as that user');
    },
  );

  /** A tmpfs of `size` at a fresh mount point, or null where mounting is not allowed. */
  function tmpfs(name: string, size: string): string | null {
    const dir = path.join(root, name);
    fs.mkdirSync(dir);
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'ignore' });
    } catch {
      return null;
    }
    mounts.push(dir);
    return dir;
  }
  const mounts: string[] = [];
  afterAll(() => {
    for (const dir of mounts) execFileSync('umount', [dir]);
  });

  it.skipIf(!asRoot)(
    'a full disk: exit 6 about space, at creation and during ops record, and nothing half-written',
    async (ctx) => {
      const small = tmpfs('full-at-create', '2m');
      if (!small) return ctx.skip();
      // A command that creates a missing store (SPEC §5).
      const created = await recon(['--db', `pglite:${path.join(small, 'db')}`, 'ops', 'record', '-', '--json'], {
        cwd: root,
        input: '[]',
      });
      expect(created.code, created.stderr).toBe(6);
      expect(created.stderr).not.toMatch(/ErrnoError|errno 51/);
      expect(created.json.error.message).toMatch(/is out of disk space \(ENOSPC\); nothing was kept; free some space/);
      // No half-made store left to be taken for a damaged one later.
      expect(fs.readdirSync(small)).toEqual([]);

      const disk = tmpfs('full-later', '64m');
      const store = path.join(disk!, 'db');
      await storeCopy(store);
      const env = { STRIPE_API_KEY: 'sk_test_full_disk', RECON_DB: `pglite:${store}` };
      const filler = path.join(disk!, 'filler');
      const free = Number(execFileSync('df', ['-k', '--output=avail', disk!]).toString().trim().split('\n').pop());
      execFileSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=1k', `count=${free - 8}`], { stdio: 'ignore' });
      const ops = Array.from({ length: 50 }, (_, i) => ({
        id: `refund:full_${i}`,
        provider: 'stripe',
        action: 'refund',
        payload: { payment_intent: `pi_full_${i}`, amount: 100, currency: 'usd' },
      }));
      const recorded = await recon(['ops', 'record', '-', '--json'], { cwd: root, env, input: JSON.stringify(ops) });
      expect(recorded.code, recorded.stderr).toBe(6);
      expect(recorded.json.error.message).toMatch(
        /is out of disk space .*No space left on device.*; recon could not open it, so nothing was changed; free some space/,
      );
      // A command that only reads meets the same full disk (PostgreSQL writes as it starts): words true for it too.
      const listedFull = await recon(['ops', 'list', '--json'], { cwd: root, env });
      expect(listedFull.code, listedFull.stderr).toBe(6);
      expect(listedFull.json.error.message).toMatch(
        /is out of disk space .*No space left on device.*; recon could not open it, so nothing was changed; free some space/,
      );
      fs.rmSync(filler);
      const listed = await recon(['ops', 'list', '--json'], { cwd: root, env });
      expect(listed.code, listed.stderr).toBe(0);
      expect(listed.json.total).toBe(0);
    },
  );
});
