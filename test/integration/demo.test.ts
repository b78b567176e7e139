/**
 * `recon demo` is also a smoke test of recon: it plays incidents 1, 2, 3, 5, 6 and 9, and the agent's
 * afternoon (11, an agent through recon mcp), against the in-process sandboxes and checks each
 * claim against the store and the provider's ledger. The `--json` test runs the built CLI as a user
 * would, the human one runs it in process; both in an empty folder, with a store variable set that
 * the demo must not use.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { recon } from '../support/cli.js';
import { runInProcess } from '../support/in-process.js';

const EXPECTED_LEDGERS: Record<number, Record<string, number>> = {
  1: { refunds: 1 },
  2: { refunds: 1 },
  3: { shipments: 1 },
  5: { shipments: 1 },
  6: { refunds: 1 },
  9: { refunds: 2 },
  11: { refunds: 1 },
};

describe('recon demo', () => {
  let dir: string;
  let decoy: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-demo-test-'));
    decoy = path.join(dir, 'decoy-store');
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  // A store named by RECON_DB would be a real one: the demo must leave it (and ./.recon) alone.
  const run = (args: string[]) => recon(args, { cwd: dir, env: { RECON_DB: `pglite:${decoy}` }, timeoutMs: 120_000 });

  it(
    '--json: every check of every incident passes, and each provider holds exactly one side effect per action',
    { timeout: 150_000 },
    async () => {
      const r = await run(['demo', '--json']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.json, 'stdout is one JSON document').toBeDefined();
      expect(r.json.ok).toBe(true);
      expect(r.json.incidents.map((i: { number: number }) => i.number)).toEqual([1, 2, 3, 5, 6, 9, 11]);
      for (const incident of r.json.incidents) {
        expect(incident.title).toEqual(expect.any(String));
        expect(incident.checks.length, `incident ${incident.number} checks something`).toBeGreaterThan(0);
        expect(
          incident.checks.filter((c: { ok: boolean }) => !c.ok),
          `incident ${incident.number}`,
        ).toEqual([]);
        for (const c of incident.checks) expect(Object.keys(c).sort()).toEqual(['actual', 'expected', 'name', 'ok']);
        expect(incident.ledger, `incident ${incident.number} ledger`).toEqual(EXPECTED_LEDGERS[incident.number]);
      }
      expect(r.json.duration_ms).toEqual(expect.any(Number));
      expect(fs.readdirSync(dir), 'nothing written in the cwd: no .recon, no config, not the RECON_DB store').toEqual(
        [],
      );
    },
  );

  it(
    'human output: the steps, the ops list before and after the run, incident 1 timeline and the duplicate audit',
    { timeout: 150_000 },
    async () => {
      const r = await runInProcess(['demo'], { cwd: dir, env: { RECON_DB: `pglite:${decoy}` } });
      expect(r.code, r.stderr).toBe(0);
      const out = r.stdout;
      // No colour: NO_COLOR is set and stdout is not a terminal.
      expect(out).not.toContain('\u001b[');
      for (const n of [1, 2, 3, 5, 6, 9, 11]) expect(out).toContain(`[${n}]`);

      const before = section(out, 'recon ops list (before recon run)');
      const after = section(out, 'recon ops list (after recon run)');
      expect(rowOf(before, 'refund:ord_1001')).toMatch(/outcome_unknown/);
      expect(rowOf(after, 'refund:ord_1001')).toMatch(/confirmed/);
      expect(rowOf(before, 'ship:ord_1003')).toMatch(/outcome_unknown/);
      expect(rowOf(after, 'ship:ord_1003')).toMatch(/confirmed/);
      expect(rowOf(after, 'ship:ord_1005')).toMatch(/needs_review.*key_retention/);
      expect(before).toMatch(/^id\tprovider\taction\tstate/m);

      const show = section(out, 'recon ops show refund:ord_1001');
      expect(show).toContain('Timeline');
      expect(show).toMatch(/outcome_unknown → confirmed/);

      const audit = section(out, 'recon audit duplicates');
      expect(audit).toMatch(/same_charge_amount.*re_\w+\s+re_\w+/);
      expect(fs.readdirSync(dir)).toEqual([]);
    },
  );
});

/** One `$ title` block of the demo's output, up to the next block, phase or incident heading. */
function section(out: string, title: string): string {
  const start = out.indexOf(`$ ${title}\n`);
  expect(start, `output has a "${title}" block`).toBeGreaterThanOrEqual(0);
  const body = out.slice(start + title.length + 3);
  const end = body.search(/\n(\$ |== |\[\d+\] |✓|✗)/);
  return end === -1 ? body : body.slice(0, end);
}

function rowOf(table: string, id: string): string {
  // Piped, a table is tab-separated (issue 26).
  const row = table.split('\n').find((l) => l.startsWith(`${id}\t`));
  expect(row, `table has a row for ${id}`).toBeDefined();
  return row!;
}
