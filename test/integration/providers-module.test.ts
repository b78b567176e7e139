/** The module provider: a user's JavaScript module loaded relative to the config file and checked at load. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { UsageError } from '../../src/errors.js';
import { createProvider } from '../../src/providers/index.js';
import type { ProviderTxn } from '../../src/types.js';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');

function loadFrom(configDir: string, entry: Record<string, unknown>) {
  const text = JSON.stringify({ providers: { calendar: { type: 'module', ...entry } } });
  return parseConfig(text, { path: path.join(configDir, 'recon.config.json'), env: {} });
}

const made: string[] = [];
afterAll(() => {
  for (const folder of made.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function moduleFolder(): string {
  const folder = mkdtempSync(path.join(tmpdir(), 'recon-module-'));
  made.push(folder);
  return folder;
}

const invite = (id: string) => ({
  operation_id: id,
  action: 'invite',
  payload: { email: 'ada@example.com' },
  idempotency_key: id,
  client_reference: `meeting-${id}`,
});

describe('module provider', () => {
  it('loads the fixture relative to the config file; submits once per key; config overrides its capabilities', async () => {
    const loaded = loadFrom(FIXTURES, {
      module: './providers/calendar.mjs',
      maxAttempts: 5,
      options: { calendar: 'team' },
    });
    const calendar = await createProvider('calendar', loaded);
    expect(calendar).toMatchObject({ name: 'calendar', type: 'module' });
    // keyRetention and lookupAuthoritative from the module, maxAttempts from the config, the rest defaults.
    expect(calendar.capabilities).toMatchObject({
      keyRetentionMs: 7 * 86_400_000,
      lookupAuthoritative: true,
      maxAttempts: 5,
      timeoutMs: 20_000,
    });

    const first = await calendar.submit(invite('op_a'));
    expect(first).toMatchObject({
      outcome: 'confirmed',
      replayed: false,
      txn: { group: 'team', operation_id: 'op_a' },
    });
    expect(await calendar.submit(invite('op_a'))).toMatchObject({ outcome: 'confirmed', replayed: true });
    expect(await calendar.lookup({ operation_id: 'op_a', idempotency_key: 'op_a' })).toMatchObject({ result: 'found' });
    expect(await calendar.lookup({ idempotency_key: 'op_b' })).toMatchObject({ result: 'not_found' });
    expect(await calendar.get(first.txn!.provider_id)).toMatchObject({ provider_id: first.txn!.provider_id });
    expect(await calendar.get('inv_none')).toBeNull();

    const ledger: ProviderTxn[] = [];
    for await (const txn of calendar.list!({})) ledger.push(txn);
    expect(ledger).toHaveLength(1);
  });

  it('a module that lacks methods is refused at load, naming the key and what is missing', async () => {
    const folder = moduleFolder();
    writeFileSync(path.join(folder, 'x.mjs'), 'export default { capabilities: {}, async lookup() {} };\n');
    const err = await createProvider('calendar', loadFrom(folder, { module: './x.mjs' })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UsageError);
    expect((err as Error).message).toBe(
      'providers.calendar.module: ./x.mjs does not export submit(), get(); a module provider implements submit, lookup, get and capabilities',
    );
  });

  it('a provider object (not a factory) works too; its lease is checked against its timeout', async () => {
    const folder = moduleFolder();
    const body = (caps: string) =>
      `export default { capabilities: ${caps}, async submit() { return { outcome: 'failed' }; }, async lookup() { return { result: 'not_found', matches: [], candidates: [] }; }, async get() { return null; } };\n`;
    writeFileSync(path.join(folder, 'ok.mjs'), body('{ concurrency: 2 }'));
    writeFileSync(path.join(folder, 'slow.mjs'), body('{ timeoutMs: 600000 }'));
    const ok = await createProvider('calendar', loadFrom(folder, { module: './ok.mjs' }));
    expect(ok.capabilities.concurrency).toBe(2);
    expect(await ok.lookup({})).toMatchObject({ result: 'not_found' });
    await expect(createProvider('calendar', loadFrom(folder, { module: './slow.mjs' }))).rejects.toThrow(
      /providers\.calendar\.lease: 2m must exceed the timeout \(10m\)/,
    );
  });

  it('a module file that does not exist is a usage error naming the key', async () => {
    await expect(createProvider('calendar', loadFrom(FIXTURES, { module: './providers/nope.mjs' }))).rejects.toThrow(
      /^providers\.calendar\.module: cannot load \.\/providers\/nope\.mjs \(file not found\)/,
    );
  });
});
