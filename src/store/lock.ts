/**
 * The embedded store's exclusive lock file (SPEC §5). PGlite does not stop two processes from
 * opening one data folder: both run without error and one silently loses committed writes.
 * So before opening, recon creates `PATH.lock` atomically (`open(..., 'wx')`), holding the
 * owner's pid, host and start time; a lock left by a dead process on this host is cleared.
 */
import fs from 'node:fs';
import os from 'node:os';
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
    const holder = readLock(lockPath);
    const retry =
      attempt === 0 &&
      (holder.raw === null || (holder.record !== null && isStale(holder.record) && clearStale(lockPath, holder.raw)));
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
  let fd: number;
  try {
    fd = fs.openSync(lockPath, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  try {
    fs.writeSync(fd, content);
  } finally {
    fs.closeSync(fd);
  }
  return true;
}

function readLock(lockPath: string): { raw: string | null; record: LockRecord | null } {
  let raw: string;
  try {
    raw = fs.readFileSync(lockPath, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { raw: null, record: null };
    throw err;
  }
  try {
    const parsed = JSON.parse(raw) as Partial<LockRecord>;
    if (Number.isInteger(parsed.pid) && typeof parsed.host === 'string') {
      return { raw, record: { pid: parsed.pid!, host: parsed.host, started_at: String(parsed.started_at ?? '?') } };
    }
  } catch {
    // Unparseable: a holder that is still writing it, or debris. Either way not provably stale.
  }
  return { raw, record: null };
}

/** Stale only when provably dead: same host and no such process. Another host cannot be checked. */
export function isStale(record: LockRecord): boolean {
  if (record.host !== os.hostname()) return false;
  try {
    process.kill(record.pid, 0);
    return false;
  } catch (err) {
    // EPERM: the process exists but belongs to another user, so it is alive.
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
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
  const moved = fs.readFileSync(aside, 'utf8');
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
