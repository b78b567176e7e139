/**
 * Issue 10, Faults: the embedded store's lock file (src/store/lock.ts). A disk that fills while
 * the lock is written must not leave a lock that no one can ever clear; an empty or unreadable lock
 * with no live holder is stale; a symlink to the data folder is the same store; a zombie holder is
 * dead; PGlite's non-Error throws are reported with a real message.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { StoreLockedError } from '../../src/errors.js';
import { acquireLock, isStale } from '../../src/store/lock.js';
import { openStore } from '../../src/store/open.js';
import { pgliteError } from '../../src/store/pglite.js';
import { migratedStoreAt } from '../support/backends.js';

const dirs: string[] = [];
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-lock-'));
  dirs.push(dir);
  return dir;
}
const children: ChildProcess[] = [];
afterEach(() => vi.restoreAllMocks());
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

describe('the embedded store lock', () => {
  it('a disk that fills while the lock is written leaves no lock behind, and the next open succeeds', () => {
    const dir = tempDir();
    const lockPath = path.join(dir, 'db.lock');
    const enospc = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    const spy = vi.spyOn(fs, 'writeSync').mockImplementationOnce(() => {
      throw enospc;
    });
    expect(() => acquireLock(lockPath, 'pglite:db')).toThrow(/no space left|ENOSPC/);
    spy.mockRestore();
    expect(fs.existsSync(lockPath)).toBe(false);
    expect(fs.readdirSync(dir)).toEqual([]);
    const lock = acquireLock(lockPath, 'pglite:db');
    expect(JSON.parse(fs.readFileSync(lockPath, 'utf8')).pid).toBe(process.pid);
    lock.release();
  });

  it.each([
    ['empty', ''],
    ['unparseable', '{"pid": 12'],
  ])('an %s lock with no live holder is stale: cleared, and the store opens', (_kind, content) => {
    const dir = tempDir();
    const lockPath = path.join(dir, 'db.lock');
    fs.writeFileSync(lockPath, content);
    // Older than a writer could take to fill it in.
    const old = new Date(Date.now() - 60_000);
    fs.utimesSync(lockPath, old, old);
    const lock = acquireLock(lockPath, 'pglite:db');
    expect(JSON.parse(fs.readFileSync(lockPath, 'utf8'))).toMatchObject({ pid: process.pid, host: os.hostname() });
    lock.release();
    expect(fs.existsSync(lockPath)).toBe(false);
  });

  it('the lock file appears whole or not at all: taken by link() from a written temp file, still exclusive', () => {
    const dir = tempDir();
    const lockPath = path.join(dir, 'db.lock');
    const first = acquireLock(lockPath, 'pglite:db');
    // A second taker in this (live) process is refused and leaves no temp file behind.
    expect(() => acquireLock(lockPath, 'pglite:db')).toThrow(StoreLockedError);
    expect(fs.readdirSync(dir)).toEqual(['db.lock']);
    first.release();
  });

  it('a symlink to an open store is the same store: the second open is refused (exit 6)', async () => {
    const dir = tempDir();
    const real = path.join(dir, 'db');
    const link = path.join(dir, 'db-link');
    await migratedStoreAt(real); // a store that exists already: its creation is not the point
    const db = await openStore(`pglite:${real}`);
    try {
      fs.symlinkSync(real, link);
      const second = openStore(`pglite:${link}`);
      await expect(second).rejects.toBeInstanceOf(StoreLockedError);
      await expect(second).rejects.toThrow(new RegExp(`pid ${process.pid}`));
    } finally {
      await db.close();
    }
  });

  it('a zombie holder (exited, not yet reaped by its parent) counts as dead', async () => {
    // `sleep 1` exits after its parent has exec'd `sleep 30`, which never waits for it: a zombie.
    // (With `sleep 0` the child could exit before the exec and be reaped by sh: no zombie, a flaky test.)
    const parent = spawn('sh', ['-c', 'sleep 1 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
    children.push(parent);
    const pid = await new Promise<number>((resolve) =>
      parent.stdout.once('data', (d) => resolve(Number(String(d).trim()))),
    );
    let state = '';
    for (let i = 0; i < 250 && state !== 'Z'; i++) {
      await new Promise((r) => setTimeout(r, 20));
      state = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0] ?? '';
    }
    expect(state).toBe('Z');
    expect(isStale({ pid, host: os.hostname(), started_at: 'x' })).toBe(true);

    const dir = tempDir();
    const lockPath = path.join(dir, 'db.lock');
    fs.writeFileSync(lockPath, JSON.stringify({ pid, host: os.hostname(), started_at: new Date().toISOString() }));
    const lock = acquireLock(lockPath, 'pglite:db');
    lock.release();
  });

  it("PGlite's non-Error throws (emscripten's ResultExit) become errors with a real message, never [object Object]", () => {
    class ResultExit {
      name = 'ResultExit';
      message: string;
      constructor(readonly status: number) {
        this.message = `Program terminated with exit(${status})`;
      }
    }
    const e1 = pgliteError(new ResultExit(1), 'pglite:x');
    expect(e1).toBeInstanceOf(Error);
    expect(e1.message).toMatch(/Program terminated with exit\(1\)/);
    expect(String(e1.message)).not.toContain('[object Object]');
    const e2 = pgliteError({ status: 3 }, 'pglite:x');
    expect(e2.message).not.toContain('[object Object]');
    expect(e2.message).toMatch(/"status":3/);
    const e3 = pgliteError('plain text', 'pglite:x');
    expect(e3.message).toContain('plain text');
  });
});
