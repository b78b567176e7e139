/**
 * Issue 23, secrets: an `http` provider's `baseUrl` with credentials (`http://svcuser:pw@host`)
 * was printed by `doctor` and `lookup` and stored in the append-only audit trail
 * (`attempt.finished`). The user-info is a secret like any other: it appears in no output and in
 * no table. (fetch refuses a URL with credentials, so they were also never sent: recon now sends
 * them as HTTP Basic authentication.)
 *
 * The commands run in this process (test/support/in-process.ts: the same main() and error mapping
 * as the binary, each command starting with no secret registered, as a new process does) on one
 * open embedded store, instead of seven processes each booting PGlite.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWarehouseSandbox, type WarehouseSandbox } from '../../src/sandbox/warehouse/server.js';
import { warehouseProviderConfig } from '../../src/sandbox/warehouse/provider-config.js';
import type { Db } from '../../src/store/db.js';
import { openStore } from '../../src/store/open.js';
import { migratedStoreAt } from '../support/backends.js';
import type { CliResult } from '../support/cli.js';
import { runInProcess } from '../support/in-process.js';

const PASSWORD = 'pw_Vx72mQa9';
let sandbox: WarehouseSandbox;
let dir: string;
let storeUrl: string;
let db: Db | undefined;
let closed = false;
const outputs: { what: string; text: string }[] = [];

async function cli(args: string[], input?: string): Promise<CliResult> {
  // The provider's retry back-off is not waited out (shortBackoff): the retries are made all the same.
  const r = await runInProcess(args, {
    cwd: dir,
    env: { RECON_DB: storeUrl, DEBUG: '1' },
    store: db,
    shortBackoff: true,
    ...(input ? { input } : {}),
  });
  outputs.push({ what: `recon ${args.join(' ')}`, text: r.stdout + r.stderr });
  return r;
}

beforeAll(async () => {
  sandbox = await startWarehouseSandbox();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-urlsecret-'));
  storeUrl = `pglite:${path.join(dir, 'db')}`;
  // The store a first `ops record` makes (its making is not the point here), open for every command.
  await migratedStoreAt(path.join(dir, 'db'));
  db = await openStore(storeUrl);
  const baseUrl = sandbox.url.replace('http://', `http://svcuser:${PASSWORD}@`);
  fs.writeFileSync(
    path.join(dir, 'recon.config.json'),
    JSON.stringify({ providers: { warehouse: { ...warehouseProviderConfig(baseUrl, 'unused'), headers: {} } } }),
  );
});
afterAll(async () => {
  await db?.close();
  if (!closed) await sandbox?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('credentials in a provider URL', () => {
  it('appear in no output and in no table, and the shipment is made once', async () => {
    const op = {
      id: 'ship:1',
      provider: 'warehouse',
      action: 'shipment.create',
      payload: { client_reference: 'order-1', sku: 'BOOK-1', quantity: 1, address: { city: 'Lyon' } },
      client_reference: 'order-1',
      approval: 'T-1',
    };
    expect((await cli(['ops', 'record', '-', '--json'], JSON.stringify(op))).code).toBe(0);
    const submitted = await cli(['ops', 'submit', 'ship:1', '--json']);
    expect(submitted.json.state).toBe('confirmed');
    await cli(['lookup', 'ship:1', '--json']);
    await cli(['lookup', 'ship:1']);
    await cli(['doctor']);
    expect(sandbox.shipments()).toHaveLength(1);
    // The service gone: the errors name the URL that could not be reached.
    await sandbox.close();
    closed = true;
    await cli(['lookup', '--client-ref', 'order-1', '--provider', 'warehouse', '--json']);
    const doctor = await cli(['doctor', '--json']);

    const leaks = outputs.filter((o) => o.text.includes(PASSWORD)).map((o) => `${o.what}: ${o.text}`);
    expect(leaks).toEqual([]);
    // The URL is still shown where it helps, without its user-info.
    expect(JSON.stringify(doctor.json)).toContain(`${sandbox.url}: unreachable`);

    for (const table of ['audit_events', 'attempts', 'observations', 'provider_transactions', 'operations']) {
      const { rows } = await db!.query<{ row: string }>(`SELECT t::text AS row FROM recon.${table} t`);
      expect(rows.length, table).toBeGreaterThan(0);
      expect(
        rows.filter((r) => r.row.includes(PASSWORD)),
        table,
      ).toEqual([]);
    }
  });
});
