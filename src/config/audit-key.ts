/**
 * Where the audit key comes from (SPEC §5 "Keyed chain"): `RECON_AUDIT_KEY`, else the config's
 * `auditKey`, either `{"file": PATH}` (relative to the config file; readable by its owner only) or
 * `{"command": [PROGRAM, ARG…]}` (run without a shell; what it prints is the key, as a KMS or
 * secret manager's CLI prints a secret). The key is registered as a secret, so no message shows it.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { auditKeyFrom, type AuditKey } from '../lib/keyed-hash.js';
import { UsageError } from '../errors.js';
import type { Env } from './env.js';
import type { Section } from './read.js';
import { registerSecret } from './redact.js';
import type { AuditKeySource } from './types.js';

const MAX_KEY_FILE_BYTES = 4096;
const COMMAND_TIMEOUT_MS = 30_000;

/** `auditKey` of the config file: exactly one of `file` and `command`. */
export function readAuditKeySource(root: Section, configDir: string): AuditKeySource | undefined {
  const s = root.optionalSection('auditKey', ['file', 'command']);
  if (!s) return undefined;
  if (s.has('file') === s.has('command'))
    throw new UsageError(
      `${s.path}: give either "file" (a file holding the key) or "command" (a program that prints it), e.g. {"file": "/etc/recon/audit.key"}`,
    );
  if (s.has('file')) return { file: path.resolve(configDir, s.string('file')) };
  const command = s.stringList('command');
  if (command.length === 0 || command[0].trim() === '')
    throw new UsageError(
      `${s.at('command')}: a program and its arguments, e.g. ["vault", "kv", "get", "-field=key", "secret/recon"]`,
    );
  return { command };
}

/** The audit key, or null when none is configured. */
export async function resolveAuditKey(env: Env, source: AuditKeySource | undefined): Promise<AuditKey | null> {
  const fromEnv = env['RECON_AUDIT_KEY'];
  if (fromEnv !== undefined && fromEnv !== '') return registered(fromEnv, 'RECON_AUDIT_KEY');
  if (!source) return null;
  const text = 'file' in source ? await readKeyFile(source.file) : await runKeyCommand(source.command);
  return registered(text.trim(), 'file' in source ? `auditKey.file ${source.file}` : 'auditKey.command');
}

/** Registered for redaction once it is long enough to be a key (a short one would redact ordinary words). */
function registered(secret: string, source: string): AuditKey {
  const key = auditKeyFrom(secret, source);
  registerSecret(secret);
  return key;
}

async function readKeyFile(file: string): Promise<string> {
  let stat;
  try {
    stat = await fs.stat(file);
  } catch (err) {
    throw new UsageError(`auditKey.file: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`, {
      cause: err,
    });
  }
  if (!stat.isFile() || stat.size > MAX_KEY_FILE_BYTES)
    throw new UsageError(`auditKey.file: ${file} is not a regular file of at most ${MAX_KEY_FILE_BYTES} bytes`);
  // As ssh does for a private key: whoever can read the key can forge the trail.
  if (process.platform !== 'win32' && (stat.mode & 0o077) !== 0)
    throw new UsageError(
      `auditKey.file: ${file} is readable or writable by group or others (mode ${(stat.mode & 0o777).toString(8)}); run \`chmod 600 ${file}\``,
    );
  return fs.readFile(file, 'utf8');
}

function runKeyCommand(command: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      command[0],
      command.slice(1),
      { timeout: COMMAND_TIMEOUT_MS, maxBuffer: 64 * 1024, encoding: 'utf8' },
      (err, stdout) => {
        if (!err) return resolve(stdout);
        // Its stderr is not repeated: a secret manager's messages may quote what they read.
        const why =
          (err as NodeJS.ErrnoException).code === 'ENOENT'
            ? 'not found'
            : `failed (${err.code ?? err.signal ?? 'error'})`;
        reject(
          new UsageError(`auditKey.command: ${command[0]} ${why}; run the command by hand to see why`, { cause: err }),
        );
      },
    );
  });
}
