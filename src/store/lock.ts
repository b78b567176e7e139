/**
 * The embedded store's exclusive lock file (SPEC §5). PGlite does not stop two processes from
 * opening one data folder: both run without error and one silently loses committed writes.
 * So before opening, recon creates `PATH.lock` atomically, holding the owner's pid, host and start
 * time; a lock left by a dead process on this host is cleared.
 *
 * The lock appears whole or not at all: its content is written to a temp file first, which is then
 * hard-linked to the lock's name (`link()` fails with EEXIST when the name is taken, so taking it
 * stays exclusive, unlike rename()). A disk that fills while writing leaves no lock behind; an
 * empty or unparseable lock (an older recon's, written in place) with no live holder is stale.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { StoreLockedError } from '../errors.js';

export interface LockRecord {
  pid: number;
  host: string;
  started_at: string;
}

export interface StoreLock {
  readonly path: string;
  readonly record: LockRecord;
  /** Removes the lock file if it is still ours. Idempotent. */
  release(): void;
}

/**
 * Takes the lock at `lockPath` for the store named `storeName` (used in messages).
 * Throws StoreLockedError (exit 6) naming the holder when a live process holds it.
 */
export function acquireLock(lockPath: string, storeName: string): StoreLock {
  const record: LockRecord = { pid: process.pid, host: os.hostname(), started_at: new Date().toISOString() };
  const content = JSON.stringify(record) + '\n';
  // Two tries: the second follows a lock that vanished or was cleared as stale; if it fails
  // too, another process took the lock in between and is alive.
  for (let attempt = 0; ; attempt++) {
    if (tryCreate(lockPath, content)) break;
    const holder = readSettledLock(lockPath);
    const stale = holder.raw === null || (holder.record ? isStale(holder.record) : !holder.fresh);
    const retry = attempt === 0 && stale && (holder.raw === null || clearStale(lockPath, holder.raw));
    if (!retry) throw lockedError(lockPath, storeName, holder.record);
  }
  return newLock(lockPath, record, content);
}

function newLock(lockPath: string, record: LockRecord, content: string): StoreLock {
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    process.removeListener('exit', release);
    try {
      // Only remove our own lock: after a stale clear by someone else the file may be theirs.
      if (fs.readFileSync(lockPath, 'utf8') === content) fs.unlinkSync(lockPath);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  };
  // 'exit' handlers must be synchronous; a crash that skips them leaves a lock that the
  // liveness check clears on the next open.
  process.on('exit', release);
  return { path: lockPath, record, release };
}

function tryCreate(lockPath: string, content: string): boolean {
  const tmp = path.join(
    path.dirname(lockPath),
    `.${path.basename(lockPath)}.${process.pid}.${Math.random().toString(36).slice(2, 10)}.tmp`,
  );
  let fd: number;
  try {
    fd = fs.openSync(tmp, 'wx', 0o600);
  } catch (err) {
    throw lockWriteError(lockPath, err);
  }
  try {
    try {
      fs.writeSync(fd, content);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    try {
      fs.linkSync(tmp, lockPath);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw err;
    }
    return true;
  } catch (err) {
    throw lockWriteError(lockPath, err);
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

/** Cannot write beside the data folder (read-only, full disk): exit 6 with what to check, not a raw errno. */
function lockWriteError(lockPath: string, err: unknown): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  const hints: Record<string, string> = {
    EACCES: 'permission denied; use a folder you can write, or fix its permissions',
    EPERM: 'operation not permitted; use a folder you can write, or fix its permissions',
    EROFS: 'the file system is read-only; put the store on a writable one',
    ENOSPC: 'no space left on the device; free some space',
    EDQUOT: 'disk quota exceeded; free some space',
  };
  if (!code || !(code in hints)) return err;
  return new StoreLockedError(`cannot write the store's lock file ${lockPath}: ${hints[code]} (${code})`, {
    cause: err,
  });
}

interface LockFile {
  raw: string | null;
  record: LockRecord | null;
  /** Modified within the last FRESH_MS: an unparseable lock this young may still be being written. */
  fresh: boolean;
}

/**
 * An older recon created the lock and then wrote it, so for an instant it could be seen empty. An
 * unparseable lock younger than this is given time to settle; older, nobody is writing it.
 */
const FRESH_MS = 2_000;

function readSettledLock(lockPath: string): LockFile {
  for (let waited = 0; ; waited += 50) {
    const lock = readLock(lockPath);
    if (lock.raw === null || lock.record !== null || !lock.fresh || waited >= FRESH_MS) return lock;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
  }
}

function readLock(lockPath: string): LockFile {
  let raw: string;
  let fresh = false;
  try {
    raw = fs.readFileSync(lockPath, 'utf8');
    fresh = Date.now() - fs.statSync(lockPath).mtimeMs < FRESH_MS;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { raw: null, record: null, fresh };
    // Unreadable (EACCES, EISDIR…): judged like an unparseable one, by its age.
    if (code === 'EACCES' || code === 'EPERM' || code === 'EISDIR' || code === 'EIO') {
      try {
        fresh = Date.now() - fs.lstatSync(lockPath).mtimeMs < FRESH_MS;
      } catch {
        return { raw: null, record: null, fresh: false };
      }
      return { raw: `unreadable:${code}`, record: null, fresh };
    }
    throw err;
  }
  try {
    const parsed = JSON.parse(raw) as Partial<LockRecord>;
    if (Number.isInteger(parsed.pid) && typeof parsed.host === 'string') {
      return {
        raw,
        record: { pid: parsed.pid!, host: parsed.host, started_at: String(parsed.started_at ?? '?') },
        fresh,
      };
    }
  } catch {
    // Unparseable: empty (a disk that filled, an older recon mid-write) or debris.
  }
  return { raw, record: null, fresh };
}

/**
 * Stale only when provably dead: same host and no such process, or a zombie (exited, waiting for
 * its parent to reap it: it will never release the lock). Another host cannot be checked.
 */
export function isStale(record: LockRecord): boolean {
  if (record.host !== os.hostname()) return false;
  try {
    process.kill(record.pid, 0);
  } catch (err) {
    // EPERM: the process exists but belongs to another user, so it is alive (unless a zombie).
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return true;
  }
  return isZombie(record.pid);
}

/** Linux: state `Z` in /proc/PID/stat (the field after the parenthesised command name). */
function isZombie(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
  } catch {
    // No /proc (macOS, BSD): ask ps; if that fails too, assume alive, the safe side.
    try {
      const out = execFileSync('ps', ['-o', 'stat=', '-p', String(pid)], { stdio: ['ignore', 'pipe', 'ignore'] });
      return out.toString().trim().startsWith('Z');
    } catch {
      return false;
    }
  }
}

/**
 * Removes a stale lock without racing another process that clears it too: the rename is atomic,
 * so only one process moves the file; if what it moved is not the stale content it judged (someone
 * already replaced it with a live lock), it puts it back and reports the store as locked.
 */
function clearStale(lockPath: string, staleContent: string | null): boolean {
  const aside = `${lockPath}.stale-${process.pid}-${Date.now()}`;
  try {
    fs.renameSync(lockPath, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw err;
  }
  let moved: string;
  try {
    moved = fs.readFileSync(aside, 'utf8');
  } catch (err) {
    moved = `unreadable:${(err as NodeJS.ErrnoException).code}`;
  }
  if (moved !== staleContent) {
    try {
      fs.linkSync(aside, lockPath);
    } catch {
      // Only three processes racing on one stale lock get here; accepted as vanishingly rare.
    }
    fs.unlinkSync(aside);
    return false;
  }
  fs.unlinkSync(aside);
  return true;
}

function lockedError(lockPath: string, storeName: string, holder: LockRecord | null): StoreLockedError {
  if (!holder) {
    return new StoreLockedError(
      `store ${storeName} is locked (lock file ${lockPath} exists but cannot be read); ` +
        `if no recon process is using it, remove ${lockPath}`,
    );
  }
  return new StoreLockedError(
    `store ${storeName} is locked by pid ${holder.pid} on host ${holder.host} (since ${holder.started_at}); ` +
      `wait for it to finish or stop it`,
  );
}
