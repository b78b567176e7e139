/**
 * Issue 23: where the audit key comes from. RECON_AUDIT_KEY, else the config's `auditKey` naming a
 * file (its owner's alone, as ssh wants of a private key) or a command that prints the key; the
 * same key gives the same id whichever way it comes, and the key never appears in a message.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveAuditKey } from '../../src/config/audit-key.js';
import { parseConfig } from '../../src/config/load.js';
import { clearSecrets, redact } from '../../src/config/redact.js';
import { auditKeyFrom } from '../../src/lib/keyed-hash.js';

const KEY = '3f6c1d0e9b8a7f6e5d4c3b2a19081726354453627180a9b8c7d6e5f4a3b2c1d0';

describe('the audit key', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'recon-audit-key-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
    clearSecrets();
  });
  const configOf = (auditKey: unknown) =>
    parseConfig(JSON.stringify({ auditKey }), { path: path.join(dir, 'recon.config.json'), env: {} });

  it('from RECON_AUDIT_KEY, a file or a command: one key, one id, and the key is redacted from messages', async () => {
    const expected = auditKeyFrom(KEY, 'test').id;
    expect((await resolveAuditKey({ RECON_AUDIT_KEY: KEY }, undefined))!.id).toBe(expected);

    writeFileSync(path.join(dir, 'audit.key'), KEY + '\n', { mode: 0o600 });
    const file = configOf({ file: 'audit.key' });
    expect(file.auditKey).toEqual({ file: path.join(dir, 'audit.key') });
    expect((await resolveAuditKey({}, file.auditKey))!.id).toBe(expected);

    const command = configOf({
      command: [process.execPath, '-e', `process.stdout.write(${JSON.stringify(KEY)} + '\\n')`],
    });
    const fromCommand = (await resolveAuditKey({}, command.auditKey))!;
    expect(fromCommand.id).toBe(expected);
    expect(redact(`the key is ${KEY}`)).not.toContain(KEY);
    expect(JSON.stringify(fromCommand) + inspect(fromCommand)).not.toContain(KEY);

    // The variable wins over the config; none at all is no key.
    expect((await resolveAuditKey({ RECON_AUDIT_KEY: 'x'.repeat(40) }, file.auditKey))!.id).not.toBe(expected);
    expect(await resolveAuditKey({}, undefined)).toBeNull();
  });

  it('a key file others can read, a failing command, a short key or a half-written setting is a one-line usage error', async () => {
    const keyFile = path.join(dir, 'audit.key');
    writeFileSync(keyFile, KEY);
    chmodSync(keyFile, 0o644);
    await expect(resolveAuditKey({}, { file: keyFile })).rejects.toThrow(
      /auditKey.file: .*audit.key is readable or writable by group or others \(mode 644\); run `chmod 600/,
    );
    await expect(resolveAuditKey({}, { file: path.join(dir, 'missing') })).rejects.toThrow(/cannot read .*ENOENT/);
    await expect(resolveAuditKey({}, { command: [process.execPath, '-e', 'process.exit(3)'] })).rejects.toThrow(
      /auditKey.command: .* failed \(3\); run the command by hand/,
    );
    await expect(resolveAuditKey({}, { command: ['recon-no-such-kms'] })).rejects.toThrow(
      /recon-no-such-kms not found/,
    );
    await expect(resolveAuditKey({ RECON_AUDIT_KEY: 'short' }, undefined)).rejects.toThrow(
      /RECON_AUDIT_KEY: the audit key is too short \(5 characters\); use at least 32/,
    );
    expect(() => configOf({ file: 'a', command: ['b'] })).toThrow(/auditKey: give either "file" .* or "command"/);
    expect(() => configOf({})).toThrow(/auditKey: give either/);
    expect(() => configOf({ path: 'a' })).toThrow(/auditKey.path: unknown key/);
  });
});
