/**
 * Issue 11, "output a person can read", under a pseudo-terminal (`script -q`) where it is about a
 * terminal and piped where it is about scripts: tables that fit the window, a run summarised by
 * decision, amounts in major units, Ctrl-C at a prompt, one error prefix, usage exit codes.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startStripeSandbox, type StripeSandbox } from '../../src/sandbox/stripe/server.js';
import { cleanEnv } from '../support/cli.js';
import {
  configDir,
  hasScript,
  plain,
  RECON_BIN,
  recon,
  reconTty,
  reconTtyEach,
  refund,
  removeTempDirs,
  sharedStore,
  STRIPE_ENV,
  withStore,
} from './oncall-support.js';

// Child processes on a shared, loaded machine: generous timeouts.
vi.setConfig({ testTimeout: 180_000, hookTimeout: 240_000 });

let sandbox: StripeSandbox;
let dir: string;
let pi: string;
let dashboardRefund: string;
const env = STRIPE_ENV;
let store: ReturnType<typeof sharedStore>;
// Piped commands run in process on the one store of `dir`; on a terminal, the built binary runs
// under a pseudo-terminal, after this process lets go of the store (one process at a time).
const run = (args: string[], input?: string) => store.recon(args, { env, input });
const tty = async (args: string[], o: Parameters<typeof reconTty>[1] = {}) => {
  await store.release();
  return reconTty(args, { cwd: dir, env, ...o });
};
/** Several commands on a terminal of one size, in one process (reconTtyEach): their screens and exit codes. */
const ttyEach = async (commands: Parameters<typeof reconTtyEach>[0], o: Parameters<typeof reconTtyEach>[1] = {}) => {
  await store.release();
  return reconTtyEach(commands, { cwd: dir, env, ...o });
};
const ndjson = (ops: unknown[]) => ops.map((o) => JSON.stringify(o)).join('\n') + '\n';

beforeAll(async () => {
  expect(hasScript(), 'util-linux `script` is needed for the terminal tests').toBe(true);
  sandbox = await startStripeSandbox({ apiKey: env.STRIPE_API_KEY, webhookSecret: env.STRIPE_WEBHOOK_SECRET });
  dir = await withStore(configDir(sandbox.url, { uncertaintyWindow: '1s' }));
  store = sharedStore(dir);
  pi = sandbox.seedPaymentIntent({ amount: 100_000, currency: 'usd' }).payment_intent;
  dashboardRefund = sandbox.seedRefund({ payment_intent: pi, amount: 4242, currency: 'usd' }).id;
  // Three refunds committed at Stripe whose responses were lost, and one next to a dashboard refund.
  const ops = [
    ...[1, 2, 3].map((n) =>
      refund(`refund:ord_30${n}_with_a_rather_long_identifier_for_wrapping`, {
        payload: { payment_intent: pi, amount: 2599, currency: 'usd' },
      }),
    ),
    refund('refund:ord_399', { payload: { payment_intent: pi, amount: 4242, currency: 'usd' } }),
  ];
  expect((await run(['ops', 'record', '-'], ndjson(ops))).code).toBe(0);
  sandbox.faults.inject({ kind: 'commit_then_drop' }, { times: 6 });
  for (const op of ops.slice(0, 3))
    expect((await run(['ops', 'submit', op.id, '--json'])).json.state).toBe('outcome_unknown');
  sandbox.faults.clear();
  sandbox.faults.inject({ kind: 'drop_before_commit' }, { times: 3 });
  expect((await run(['ops', 'submit', 'refund:ord_399', '--json'])).json.state).toBe('outcome_unknown');
  sandbox.faults.clear();
  // A yen refund for the amounts test (yen has no minor unit).
  expect(
    (
      await run(
        ['ops', 'record', '-'],
        JSON.stringify(
          refund('refund:ord_jpy', {
            approval: undefined,
            payload: { payment_intent: pi, amount: 1000, currency: 'jpy' },
          }),
        ),
      )
    ).code,
  ).toBe(0);
}, 240_000);
afterAll(async () => {
  await store?.release();
  await sandbox?.close();
  removeTempDirs();
});

/** The lines of a captured screen that belong to a box-drawn table. */
function tableLines(screen: string): string[] {
  return plain(screen)
    .split('\n')
    .filter((l) => /^[┌│├└]/.test(l));
}

describe('tables on a terminal', () => {
  it('have no rule between rows, wrap to the terminal width and never break the box', async () => {
    // Wide enough for the 57-character ids (narrower, the list is one record per block: issue 26 below).
    const r = await tty(['ops', 'list'], { cols: 200 });
    expect(r.code, r.screen).toBe(0);
    const lines = tableLines(r.screen);
    expect(lines.length).toBeGreaterThan(6);
    for (const l of lines) {
      expect([...l].length, l).toBeLessThanOrEqual(200);
      expect(l, l).toMatch(/^[┌│├└].*[┐│┤┘]$/);
    }
    expect(lines.filter((l) => l.startsWith('├'))).toHaveLength(1); // only under the header
    const widths = new Set(lines.map((l) => [...l].length));
    expect(widths.size).toBe(1);
  });
});

describe('the top-level help on a terminal', () => {
  it('is wrapped to the window, as commander wraps it (bin/recon prints it without commander)', async () => {
    // 0: a terminal that reports no size (commander then wraps nothing).
    for (const cols of [0, 90, 140]) {
      const fast = await tty(['--help'], { cols });
      const commander = await tty(['--no-color', '--help'], { cols });
      expect(fast.code).toBe(0);
      expect(fast.screen, `${cols} columns`).toBe(commander.screen);
      if (cols === 0) continue;
      const table = fast.screen.split('\nExamples:')[0].split('\n');
      expect(Math.max(...table.map((l) => l.length)), `${cols} columns`).toBeLessThanOrEqual(cols);
      expect(Math.max(...table.map((l) => l.length)), `${cols} columns`).toBeGreaterThan(cols - 5);
    }
  });
});

describe('recon run on a terminal', () => {
  it('summarises by decision and lists only what needs attention; --verbose lists every row', async () => {
    // Both in one process (reconTtyEach), the window resized between them.
    const [summary, wide] = await ttyEach([
      { args: ['run', '--dry-run'], cols: 120 },
      { args: ['run', '--dry-run', '--verbose'], cols: 200 },
    ]);
    expect(summary.code, summary.screen).toBe(0);
    const screen = plain(summary.screen);
    expect(screen).toMatch(/decisions: .*3 confirm/);
    expect(screen).toMatch(/1 review/);
    expect(screen).toContain('refund:ord_399');
    expect(screen).not.toContain('refund:ord_301');
    const verbose = plain(wide.screen);
    expect(verbose).toContain('refund:ord_301');
    expect(verbose).toContain('refund:ord_399');
  });
});

describe('amounts', () => {
  it('are shown in major units with the currency; JSON keeps minor units', async () => {
    const list = await run(['ops', 'list']);
    expect(list.stdout).toContain('25.99 USD');
    expect(list.stdout).toContain('1,000 JPY');
    const json = await run(['ops', 'list', '--json']);
    const jpy = json.json.operations.find((o: { id: string }) => o.id === 'refund:ord_jpy');
    expect(jpy).toMatchObject({ amount: 1000, currency: 'jpy' });
  });

  it('ages are short: 56s, 13m, 2h 5m', async () => {
    const list = await run(['ops', 'list']);
    const ages = list.stdout
      .split('\n')
      .slice(1)
      .filter(Boolean)
      .map((l) => /\s(\d+s|\d+m|\d+h( \d+m)?)\s/.exec(l)?.[1]);
    expect(
      ages.every((a) => a !== undefined),
      list.stdout,
    ).toBe(true);
  });
});

describe('a prompt', () => {
  it('Ctrl-C at a confirmation exits 130 with "cancelled"', async () => {
    expect((await run(['run'])).code).toBe(8); // refund:ord_399 → needs_review (ambiguous)
    const r = await tty(['attach', 'refund:ord_399', dashboardRefund], { keys: '\u0003', waitFor: /\(y\/N\)/ });
    expect(plain(r.screen)).toMatch(/Attach .* 42\.42 USD/);
    expect(plain(r.screen)).toContain('recon: cancelled');
    expect(plain(r.screen)).not.toContain('User force closed');
    expect(r.code).toBe(130);
    expect((await run(['ops', 'show', 'refund:ord_399', '--json'])).json.operation.state).toBe('needs_review');
  });
});

describe('errors', () => {
  it('have one prefix, recon:', async () => {
    for (const args of [['ops', 'list', '--bogus'], ['frobnicate'], ['ops', 'show', 'nope:1']]) {
      const r = await run(args);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/^recon: /);
      expect(r.stderr).not.toMatch(/^error:/m);
    }
  });

  it('a missing input file is exit 2, not 3', async () => {
    const rec = await run(['ops', 'record', 'no-such-file.json']);
    expect(rec.code).toBe(2);
    expect(rec.stderr).toMatch(/^recon: no-such-file\.json: no such file/);
    const ingest = await run(['webhook', 'ingest', 'no-such-event.json', '--provider', 'stripe']);
    expect(ingest.code).toBe(2);
  });

  it('sandbox on a taken port says so and suggests --port 0, which prints the chosen port', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const r = await recon(['sandbox', 'stripe', '--port', String(port)]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`port ${port} on 127.0.0.1 is already taken`);
      expect(r.stderr).toContain('--port 0');
      expect(r.stderr).not.toContain('EADDRINUSE');
    } finally {
      blocker.close();
    }
    const child = spawn(process.execPath, [RECON_BIN, 'sandbox', 'stripe', '--port', '0'], { env: cleanEnv() });
    let err = '';
    const chosen = await new Promise<string>((resolve) => {
      child.stderr.on('data', (d) => {
        err += d;
        const m = /^port (\d+)$/m.exec(err);
        if (m && err.includes('listening on')) resolve(m[1]);
      });
      child.on('close', () => resolve(''));
    });
    child.kill('SIGINT');
    expect(Number(chosen)).toBeGreaterThan(0);
    expect(err).toContain(`http://127.0.0.1:${chosen}`);
  });
});

/**
 * Issue 26: at 60, 80 and 120 columns, ids, amounts, states and times are never split, the box
 * never breaks (a CJK client reference is two columns a character), empty columns are dropped,
 * and when the atoms do not fit the table becomes one record per block. Run after the tests above:
 * refund:ord_399 is in review, the three long ids confirmed.
 */
describe('issue 26: tables at 60, 80 and 120 columns', () => {
  const cjk = 'refund:ord_cjk';
  const atoms = [
    'refund:ord_399',
    'refund:ord_cjk',
    'outcome_unknown',
    'needs_review',
    '25.99 USD',
    '42.42 USD',
    '返金注文テスト',
  ];
  const screens: string[] = [];
  const piped = new Map<string, string>();

  beforeAll(async () => {
    const op = refund(cjk, {
      client_reference: '返金注文テスト',
      payload: { payment_intent: pi, amount: 2599, currency: 'usd' },
    });
    expect((await run(['ops', 'record', '-'], JSON.stringify(op))).code).toBe(0);
    sandbox.faults.inject({ kind: 'drop_before_commit' }, { times: 3 });
    expect((await run(['ops', 'submit', cjk, '--json'])).json.state).toBe('outcome_unknown');
    sandbox.faults.clear();
    // What each (read-only) command prints piped, once, while the store is open in this process: the
    // terminal runs below release it, and reading it again after each cost a reopen of the store.
    // (`run` on a terminal lists only what needs attention: its piped rows are not all on screen.)
    for (const args of commands) if (args[0] !== 'run') piped.set(args.join(' '), (await run(args)).stdout);
  });
  afterAll(() => {
    if (process.env.RECON_SCREENS) fs.writeFileSync(process.env.RECON_SCREENS, screens.join('\n'));
  });

  const commands = [
    ['ops', 'list', '--unresolved'],
    ['ops', 'show', 'refund:ord_399'],
    ['review', 'list'],
    ['run', '--dry-run'],
  ];
  for (const cols of [60, 80, 120]) {
    it(`at ${cols} columns, no line is wider than the window and no atom is split`, async () => {
      // The four commands in one process under one terminal (each opens the store as the binary does).
      const results = await ttyEach(commands, { cols });
      for (const [i, args] of commands.entries()) {
        const r = results[i];
        expect([0, 5, 8], r.screen).toContain(r.code);
        const screen = plain(r.screen);
        screens.push(`$ recon ${args.join(' ')}    # ${cols} columns\n${screen}`);
        const tables = tableLines(screen);
        const width = (l: string) => [...l].reduce((w, c) => w + (/[\u3000-\u9fff\uff00-\uffef]/.test(c) ? 2 : 1), 0);
        for (const l of tables) {
          expect(width(l), `${args.join(' ')} at ${cols}:\n${screen}`).toBeLessThanOrEqual(cols);
          expect(l, `${args.join(' ')} at ${cols}:\n${screen}`).toMatch(/^[┌│├└].*[┐│┤┘]$/);
        }
        // Every line of one table (from ┌ to └) is as wide as the others: the box is whole.
        const boxes: string[][] = [];
        for (const l of tables) (l.startsWith('┌') ? boxes[boxes.push([]) - 1] : boxes[boxes.length - 1]).push(l);
        for (const box of boxes) expect(new Set(box.map(width)).size, screen).toBe(1);
        // Every id, amount, state and time the same command prints piped is on the screen whole.
        const pipedOut = piped.get(args.join(' ')) ?? '';
        expect(pipedOut !== '', args.join(' ')).toBe(args[0] !== 'run');
        for (const atom of atoms.filter((x) => pipedOut.includes(x)))
          expect(screen, `${atom} split at ${cols}`).toContain(atom);
        for (const time of pipedOut.match(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/g) ?? [])
          expect(screen, `${time} split at ${cols}`).toContain(time);
        const ids = screen.match(/re_[A-Za-z0-9]+/g) ?? [];
        const full = sandbox.refunds().map((x) => x.id);
        for (const id of ids) expect(full, `${id} is cut at ${cols}:\n${screen}`).toContain(id);
      }
    });
  }

  it('ops list at 120 columns shows the CJK client reference inside a whole box and drops empty columns', async () => {
    const screen = plain((await tty(['ops', 'list', '--unresolved'], { cols: 120 })).screen);
    expect(screen).toContain('返金注文テスト');
    expect(screen).toMatch(/│ attempts/);
    // No unresolved operation has a linked provider transaction: the column is left out.
    expect(screen).not.toContain('provider txn');
    expect(screen).toMatch(/refund:ord_cjk/);
  });

  it('piped, a table is tab-separated columns, every column kept', async () => {
    const r = await run(['ops', 'list', '--unresolved']);
    const [head, ...rows] = r.stdout.trim().split('\n');
    expect(head.split('\t')).toEqual([
      'id',
      'provider',
      'action',
      'state',
      'amount',
      'attempts',
      'age',
      'provider txn',
      'review',
      'client ref',
    ]);
    for (const row of rows) expect(row.split('\t')).toHaveLength(10);
    expect(r.stdout).not.toMatch(/[┌│]/);
  });

  it('long output goes through $PAGER on a terminal; --no-pager and a pipe print it directly', async () => {
    // The three in one process (reconTtyEach), the window resized before the last.
    const screens = await ttyEach(
      [
        { args: ['ops', 'show', 'refund:ord_399'], cols: 80, rows: 10 },
        { args: ['--no-pager', 'ops', 'show', 'refund:ord_399'], cols: 80, rows: 10 },
        { args: ['ops', 'list', '--unresolved'], cols: 120, rows: 50 },
      ],
      { env: { ...env, PAGER: 'sed s/^/PAGED:/' } },
    );
    const [paged, direct, short] = screens.map((r) => plain(r.screen));
    expect(paged).toMatch(/^PAGED:refund:ord_399/m);
    expect(direct).not.toContain('PAGED:');
    expect(direct).toContain('refund:ord_399');
    expect(short).toContain('refund:ord_cjk');
    expect(short).not.toContain('PAGED:');
  });
});
