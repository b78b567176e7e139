/**
 * Trust in what is found (SPEC §5), as git refuses a repository it does not trust
 * (`safe.directory`): a config file recon finds on its own (the upward search, `$XDG_CONFIG_HOME`)
 * decides which code runs as you (a `module` provider) and where your keys are sent, so a file
 * that someone else owns, or that group or others may write, is not used unless you vouch for it:
 * `--config`/`RECON_CONFIG` name it explicitly, or your own config lists it under `"trust"`.
 * A module provider's file, and the folder it is in, follow the same ownership rule.
 *
 * Every config file, vouched for or not, must be a regular file of at most 1 MiB: a FIFO would
 * block the read for ever and `/dev/urandom` would fill the memory.
 */
import fs from 'node:fs';
import path from 'node:path';
import { UsageError } from '../errors.js';
import type { TrustList } from './types.js';

const MAX_CONFIG_BYTES = 1024 * 1024;

/** What is wrong with a file's ownership or mode, or null when it may be trusted. */
function untrustedReason(st: fs.Stats, what = 'it'): string | null {
  const me = process.geteuid?.();
  // No POSIX owners (Windows): nothing to compare.
  if (me === undefined) return null;
  if (st.uid !== me && st.uid !== 0) {
    return `${what} is owned by ${userName(st.uid)}, not by you (${userName(me)}) or root`;
  }
  const writable = [st.mode & 0o020 ? 'group' : '', st.mode & 0o002 ? 'others' : ''].filter(Boolean).join(' and ');
  if (writable !== '' && !st.isSymbolicLink()) {
    return `${what} is writable by ${writable} (mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}, owner ${userName(st.uid)})`;
  }
  return null;
}

/**
 * Reads a config file after checking that it is a regular file of at most 1 MiB (stat before
 * opening, so a FIFO or a device is never opened; fstat after, on what was opened). Returns the
 * text and, separately, why its owner or mode makes it untrusted (the caller decides whether the
 * file was vouched for). Errors other than the type and size (ENOENT, EACCES) are thrown as they are.
 */
export async function readConfigFile(
  file: string,
  source: string,
): Promise<{ text: string; untrusted: string | null }> {
  const link = await fs.promises.lstat(file);
  checkShape(await fs.promises.stat(file), file, source);
  const handle = await fs.promises.open(file, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0));
  try {
    const st = await handle.stat();
    checkShape(st, file, source);
    const buffer = Buffer.alloc(Math.min(st.size, MAX_CONFIG_BYTES) + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length === buffer.length) break;
    }
    // Grew while being read: the same limit holds.
    if (length > MAX_CONFIG_BYTES) throw tooLarge(file, source);
    const untrusted =
      (link.isSymbolicLink() ? untrustedReason(link, 'its symbolic link') : null) ?? untrustedReason(st);
    return { text: buffer.subarray(0, length).toString('utf8'), untrusted };
  } finally {
    await handle.close();
  }
}

function checkShape(st: fs.Stats, file: string, source: string): void {
  if (!st.isFile()) {
    throw new UsageError(`${source}: ${file} is not a regular file (${kindOf(st)}); point it at a JSON file`);
  }
  if (st.size > MAX_CONFIG_BYTES) throw tooLarge(file, source);
}

function tooLarge(file: string, source: string): UsageError {
  return new UsageError(
    `${source}: ${file} is over 1 MiB, too large for a config file; point it at recon's JSON config`,
  );
}

function kindOf(st: fs.Stats): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'not a file';
}

/** Whether a `"trust"` entry (an absolute path, normalised) is the file or a folder above it. */
export function isCovered(trust: readonly string[], file: string): boolean {
  const candidates = [path.resolve(file)];
  try {
    candidates.push(fs.realpathSync(file));
  } catch {
    // Only the path as written.
  }
  return trust.some((entry) =>
    candidates.some((c) => c === entry || c.startsWith(entry.endsWith(path.sep) ? entry : entry + path.sep)),
  );
}

/**
 * The file a `module` provider names, resolved through symbolic links, after checking that it and
 * its folder are owned by you or root and not writable by group or others (unless a `"trust"`
 * entry covers it). A missing file is reported here: nothing could slip in between check and load.
 */
export function trustedModulePath(module: string, where: string, spec: string, trust: TrustList): string {
  let real: string;
  try {
    real = fs.realpathSync(module);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new UsageError(
      `${where}: cannot load ${spec} (${code === 'ENOENT' ? 'file not found' : (code ?? 'error')}); the path is relative to the config file`,
      { cause: err },
    );
  }
  const file = fs.statSync(real);
  if (!file.isFile())
    throw new UsageError(`${where}: ${spec} (${real}) is not a regular file; name a JavaScript module`);
  if (isCovered(trust.entries, module)) return real;
  const folder = path.dirname(real);
  const reason = untrustedReason(file) ?? untrustedReason(fs.statSync(folder), `its folder ${folder}`);
  if (reason === null) return real;
  throw new UsageError(
    `${where}: refusing to load ${real}: ${reason}; a module provider runs as you. ` +
      `Fix its ownership or run \`chmod go-w ${reason.startsWith('its folder') ? folder : real}\`, or, if you trust it, ` +
      `add ${JSON.stringify(folder)} to "trust" in ${trust.file ?? 'your own config ($XDG_CONFIG_HOME/recon/config.json)'}`,
  );
}

let passwd: Map<number, string> | null = null;

/** A user name for messages (`nobody (uid 65534)`); the uid alone when /etc/passwd does not list it. */
export function userName(uid: number): string {
  if (passwd === null) {
    passwd = new Map();
    try {
      for (const line of fs.readFileSync('/etc/passwd', 'utf8').split('\n')) {
        const [name, , id] = line.split(':');
        if (name && id && /^\d+$/.test(id) && !passwd.has(Number(id))) passwd.set(Number(id), name);
      }
    } catch {
      // No /etc/passwd (or not readable): uids only.
    }
  }
  const name = passwd.get(uid);
  return name !== undefined ? `${name} (uid ${uid})` : `uid ${uid}`;
}
