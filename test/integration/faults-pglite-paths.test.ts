/**
 * Issue 10, Faults: a `pglite:` path that cannot be a store — a file, a folder under a file, a
 * read-only folder, a non-empty folder that is not a recon store — is exit 2 or 6 with a hint,
 * never exit 1 with a raw EEXIST/EACCES/EROFS, and nothing is created in someone else's folder.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { BIN, cleanEnv, collect, recon, ROOT } from '../support/cli.js';
import { asRoot, canRunAs, readableInstall, runAs, unprivilegedUser } from '../support/os-user.js';

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
