/**
 * Issue 10, Hostile input — secrets (SPEC §6: "Secrets are never printed, logged or stored").
 * A module provider whose errors, messages and request ids carry its `${MOD_TOKEN}`, and a store URL
 * with `?password=`: every output of every command (stdout, stderr, `--json`), the audit trail,
 * observations and attempts, and the metrics file are searched for each secret value.
 *
 * The commands run in this process (test/support/in-process.ts: the same main() and error mapping
 * as the binary; each command starts with no secret registered, as a new process does, and opens
 * the store its URL names), not as sixteen processes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { openStore } from '../../src/store/open.js';
import type { CliResult } from '../support/cli.js';
import { runInProcess } from '../support/in-process.js';
import { createDatabase } from '../support/postgres.js';
import fsp from 'node:fs/promises';
import os from 'node:os';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');
const TOKEN = 'modtok_9f8e7d6c5b4a';
const PASSWORD = 'pw_Zq81xLm0';

let dir: string;
let storeUrl: string;
const outputs: { what: string; text: string }[] = [];

async function cli(args: string[], opts: { input?: string } = {}): Promise<CliResult> {
  // The provider's retry back-off is not waited out (shortBackoff): the retries are made all the same.
  const r = await runInProcess(args, {
    cwd: dir,
    env: { MOD_TOKEN: TOKEN, RECON_DB: storeUrl, DEBUG: '1' },
    shortBackoff: true,
    ...opts,
  });
  outputs.push(
    { what: `recon ${args.join(' ')} (stdout)`, text: r.stdout },
    { what: `recon ${args.join(' ')} (stderr)`, text: r.stderr },
  );
  return r;
}

beforeAll(async () => {
  const base = inject('pgUrl') || process.env.RECON_TEST_PG_URL;
  if (!base) throw new Error('this test needs the run’s PostgreSQL server');
  // Trust authentication ignores the password, so the URL works and carries a secret all the same.
  const url = new URL(await createDatabase(base));
  url.searchParams.set('password', PASSWORD);
  storeUrl = url.toString();
  dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'recon-secrets-'));
  fs.copyFileSync(path.join(FIXTURES, 'providers', 'leaky.mjs'), path.join(dir, 'leaky.mjs'));
  fs.writeFileSync(
    path.join(dir, 'recon.config.json'),
    JSON.stringify({
      providers: {
        leaky: { type: 'module', module: './leaky.mjs', options: { token: '${MOD_TOKEN}' }, uncertaintyWindow: '1s' },
      },
    }),
  );
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('secrets are never printed or stored', () => {
  it('a module provider’s token (in errors, messages, request ids) and a ?password= in the store URL appear nowhere', async () => {
    const ops = [
      { id: 'inv:1', provider: 'leaky', action: 'invite', payload: { mode: 'answer' }, approval: 'T-1' },
      { id: 'inv:2', provider: 'leaky', action: 'invite', payload: { mode: 'throw' }, approval: 'T-1' },
    ];
    expect(
      (await cli(['ops', 'record', '-', '--json'], { input: ops.map((o) => JSON.stringify(o)).join('\n') })).code,
    ).toBe(0);
    await cli(['db', 'status', '--json']);
    await cli(['db', 'migrate', '--json']);
    await cli(['ops', 'submit', 'inv:1', '--json']);
    await cli(['ops', 'submit', 'inv:1']);
    await cli(['ops', 'submit', 'inv:2', '--json']);
    const metrics = path.join(dir, 'recon.prom');
    await cli(['run', '--json', '--metrics-file', metrics]);
    await cli(['run']);
    await cli(['lookup', 'inv:1', '--json']);
    await cli(['lookup', 'inv:1']);
    await cli(['ops', 'show', 'inv:1', '--json']);
    await cli(['ops', 'show', 'inv:1']);
    await cli(['ops', 'show', 'inv:2']);
    await cli(['ops', 'list']);
    await cli(['stats', '--json']);
    // The store unreachable: its URL (with the password) is in the message.
    const gone = new URL(storeUrl);
    gone.port = '1';
    const unreachable = await runInProcess(['--db', gone.toString(), 'ops', 'list', '--json'], { cwd: dir });
    outputs.push(
      { what: 'unreachable (stdout)', text: unreachable.stdout },
      { what: 'unreachable (stderr)', text: unreachable.stderr },
    );
    expect(unreachable.code).toBe(6);
    outputs.push({ what: 'metrics file', text: fs.readFileSync(metrics, 'utf8') });

    // What is stored: the attempts, the observations and the append-only audit trail, all of it.
    const direct = new URL(storeUrl);
    direct.searchParams.delete('password');
    const db = await openStore(direct.toString());
    try {
      for (const table of ['operations', 'attempts', 'observations', 'audit_events', 'provider_transactions']) {
        const rows = await db.query(`SELECT * FROM recon.${table}`);
        outputs.push({ what: `recon.${table}`, text: JSON.stringify(rows.rows) });
      }
      // The leaky adapter did answer: its message and request id were stored — redacted.
      const attempts = await db.query<{ provider_request_id: string | null }>(
        `SELECT provider_request_id FROM recon.attempts WHERE operation_id = 'inv:1'`,
      );
      expect(attempts.rows.map((a) => a.provider_request_id)).toContain('req_[redacted]_1');
      const observations = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM recon.observations WHERE result = 'unavailable'`,
      );
      expect(observations.rows[0].n).toBeGreaterThan(0);
    } finally {
      await db.close();
    }

    const leaks = outputs
      .filter((o) => o.text.includes(TOKEN) || o.text.includes(PASSWORD))
      .map(
        (o) =>
          `${o.what}: ${o.text.slice(Math.max(0, o.text.search(new RegExp(`${TOKEN}|${PASSWORD}`)) - 120), o.text.search(new RegExp(`${TOKEN}|${PASSWORD}`)) + 60)}`,
      );
    expect(leaks).toEqual([]);
    // And the redaction left a trace where the secret was, so the evidence still reads.
    expect(outputs.some((o) => o.text.includes('[redacted]'))).toBe(true);
  });
});
