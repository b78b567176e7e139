/**
 * The command-line contract of SPEC §7: help and examples, exit codes, one-line errors naming the
 * field with nothing written, `--json` as one document, no colour off a TTY, the embedded store's
 * lock, and secrets never printed. Commands run in process (test/support/in-process.ts: the same
 * main(), commander and error mapping as the binary); the built binary runs as a child process
 * where a real process is the point: `--version`'s fast path, exit codes as the shell sees them,
 * colour decided from the process's environment, a TTY, the lock held by another process.
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStripeSandbox, type StripeSandbox } from '../../src/sandbox/stripe/server.js';
import { openStore } from '../../src/store/open.js';
import { LATE_TIERING_FLAGS } from '../../src/lib/tiering.js';
import { BASELINE_WASM_FLAGS } from '../../src/store/wasm-tier.js';
import { backends, embeddedBackend, removeTempStores } from '../support/backends.js';
import { BIN, cleanEnv, recon, ROOT, type CliOptions, type CliResult, type JsonDoc } from '../support/cli.js';
import { runInProcess } from '../support/in-process.js';

const ESC = '\u001b';
const tempDirs: string[] = [];
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-cli-'));
  tempDirs.push(dir);
  return dir;
}

afterAll(() => {
  for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
  removeTempStores();
});

const refund = (id: string, over: Record<string, unknown> = {}) => ({
  id,
  provider: 'stripe',
  action: 'refund',
  payload: { payment_intent: 'pi_1', amount: 1999, currency: 'usd' },
  ...over,
});
const ndjson = (...ops: unknown[]) => ops.map((o) => JSON.stringify(o)).join('\n') + '\n';

/** The error lines of stderr: everything but the "(run with --help for usage)" hint. */
function errorLines(r: CliResult): string[] {
  // (`recon: store URL · stripe test` names the store a changing command works on, issue 26: not an
  // error; `recon: store URL is locked by …` is one.)
  return r.stderr
    .split('\n')
    .filter((l) => l.trim() && !l.startsWith('(run with --help') && !/^recon: store \S+( · [^·]+)*$/.test(l));
}

/** stdout holds exactly one JSON document and nothing else. */
function oneJsonDocument(r: CliResult): JsonDoc {
  expect(r.stdout.trim(), `stdout of a --json command (stderr: ${r.stderr})`).not.toBe('');
  return JSON.parse(r.stdout);
}

describe('help and version', () => {
  it('--help and --version exit 0 and print to stdout', async () => {
    const help = await recon(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: recon /);
    expect(help.stdout).toMatch(/Exit codes:/);
    // bin/recon prints the top-level help without commander; with any other argument commander
    // prints it: the same text.
    const commander = await recon(['--no-color', '--help']);
    expect(commander.code).toBe(0);
    for (const args of [['--help'], ['-h'], ['help']]) {
      const r = args[0] === '--help' ? help : await recon(args);
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout, args.join(' ')).toBe(commander.stdout);
      expect(r.stderr, args.join(' ')).toBe('');
    }
    // bin/recon's fast path, and commander's answer when --version comes with other flags: the
    // package version, the store schema this binary expects, the Node version.
    const pkgVersion = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version;
    const latest = Math.max(
      ...fs.readdirSync(path.join(ROOT, 'src', 'store', 'migrations')).map((f) => Number(/^(\d+)_/.exec(f)?.[1] ?? 0)),
    );
    const expected = `recon ${pkgVersion}\nstore schema ${latest}\nnode ${process.version}\n`;
    for (const args of [['--version'], ['-V'], ['--version', '--no-color']]) {
      const version = await recon(args);
      expect(version.code, args.join(' ')).toBe(0);
      expect(version.stdout, args.join(' ')).toBe(expected);
    }
  });

  function subcommands(helpText: string): string[] {
    const section = helpText.split(/^Commands:\n/m)[1];
    if (!section) return [];
    const names: string[] = [];
    for (const line of section.split('\n')) {
      if (/^\S/.test(line)) break; // the next section ("Examples:")
      const m = /^ {2}(\S+)/.exec(line);
      if (m && m[1] !== 'help') names.push(m[1]);
    }
    return names;
  }

  it('every command and command group has --help with an example', async () => {
    const seen: string[] = [];
    const walk = async (cmd: string[]): Promise<void> => {
      const r = await runInProcess([...cmd, '--help']);
      expect(r.code, `recon ${cmd.join(' ')} --help: ${r.stderr}`).toBe(0);
      if (cmd.length) {
        seen.push(cmd.join(' '));
        expect(r.stdout, `recon ${cmd.join(' ')} --help has an example`).toMatch(/^Examples?:$/m);
        const example = r.stdout.split(/^Examples?:$/m)[1] ?? '';
        expect(example, `recon ${cmd.join(' ')} --help shows a command line`).toMatch(/^\s+\$ /m);
        expect(example).toMatch(new RegExp(`\\brecon ${cmd.join(' ')}\\b`));
      }
      for (const sub of subcommands(r.stdout)) await walk([...cmd, sub]);
    };
    await walk([]);
    const expected = [
      'init',
      'db',
      'db migrate',
      'db status',
      'ops',
      'ops record',
      'ops approve',
      'ops submit',
      'ops list',
      'ops show',
      'lookup',
      'attach',
      'retry',
      'escalate',
      'review',
      'review list',
      'review resolve',
      'run',
      'webhook',
      'webhook ingest',
      'webhook serve',
      'mcp',
      'audit',
      'audit duplicates',
      'audit verify',
      'stats',
      'sandbox',
      'demo',
    ];
    for (const c of expected) expect(seen).toContain(c);
  });

  it('an unknown flag is a usage error (exit 2) naming the flag', async () => {
    for (const args of [['--bogus'], ['ops', 'list', '--bogus'], ['run', '--frobnicate', '1']]) {
      const r = await runInProcess(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain(args.find((a) => a.startsWith('--'))!);
      expect(r.stdout).toBe('');
    }
  });

  it('an unknown command is a usage error, as the shell sees the real binary exit', async () => {
    const r = await recon(['frobnicate']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('frobnicate');
  });
});

describe('the CLI against a store and a Stripe sandbox', () => {
  let sandbox: StripeSandbox;
  let dir: string;
  let storeUrl: string;
  let cli: (args: string[], opts?: CliOptions) => Promise<CliResult>;
  const record = (input: string, args: string[] = []) => cli(['ops', 'record', '-', ...args], { input });
  const listIds = async () => {
    const r = await cli(['ops', 'list', '--json', '--limit', '1000']);
    expect(r.code, r.stderr).toBe(0);
    return (oneJsonDocument(r).operations as { id: string }[]).map((o) => o.id).sort();
  };

  beforeAll(async () => {
    sandbox = await startStripeSandbox();
    dir = tempDir();
    // PostgreSQL opens in milliseconds; a fresh embedded store takes seconds per process.
    const backend = backends.find((b) => b.name === 'postgres') ?? backends[0];
    storeUrl = await backend.migratedUrl();
    fs.writeFileSync(
      path.join(dir, 'recon.config.json'),
      JSON.stringify({
        db: storeUrl,
        providers: { stripe: { type: 'stripe', apiKey: '${STRIPE_API_KEY}', apiBase: sandbox.url } },
      }),
    );
    cli = (args, opts = {}) =>
      runInProcess(args, { cwd: dir, ...opts, env: { STRIPE_API_KEY: sandbox.apiKey, ...opts.env } });
  });
  afterAll(async () => {
    await sandbox?.close();
  });

  describe('bad input to ops record: exit 2, one line naming the field, nothing written', () => {
    const cases: [string, string, RegExp][] = [
      ['malformed JSON', '{"id": "bad_1", "provider": ', /^recon: stdin: malformed JSON/],
      ['malformed NDJSON line', ndjson(refund('bad_2')) + '{"id": "bad_3",\n', /^recon: stdin: line 2: malformed JSON/],
      [
        'unknown provider',
        ndjson(refund('bad_4', { provider: 'paypal' })),
        /^recon: provider: unknown provider "paypal"/,
      ],
      [
        'negative amount',
        ndjson(refund('bad_5', { payload: { payment_intent: 'pi_1', amount: -100, currency: 'usd' } })),
        /^recon: payload\.amount: -100/,
      ],
      [
        'non-integer amount',
        ndjson(refund('bad_6', { payload: { payment_intent: 'pi_1', amount: 19.99, currency: 'usd' } })),
        /^recon: payload\.amount: 19\.99/,
      ],
      [
        'unknown currency',
        ndjson(refund('bad_7', { payload: { payment_intent: 'pi_1', amount: 100, currency: 'usx' } })),
        /^recon: payload\.currency: "usx"/,
      ],
      ['bad id characters', ndjson(refund('bad id/8')), /^recon: id: "bad id\/8" is not a valid operation id/],
      ['id over 200 characters', ndjson(refund('b'.repeat(201))), /^recon: id: "b{201}"/],
      [
        'oversize payload',
        ndjson(refund('bad_9', { payload: { amount: 1, currency: 'usd', note: 'x'.repeat(70_000) } })),
        /^recon: payload: \d+ bytes is over the 64 KiB limit/,
      ],
      ['unknown field', ndjson(refund('bad_10', { amout: 5 })), /^recon: amout: unknown field/],
      // A good record before a bad one: the batch is refused whole.
      [
        'a bad record in a batch',
        ndjson(refund('bad_11'), refund('bad_12', { payload: { amount: -1 } })),
        /^recon: stdin\[1\]: payload\.amount: -1/,
      ],
      ['empty input', '', /^recon: stdin: no operations in input/],
    ];

    it.each(cases)('%s', async (_name, input, message) => {
      const r = await record(input);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stdout).toBe('');
      const lines = errorLines(r);
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(message);
      expect(lines[0].length).toBeLessThan(600);
    });

    it('with --json the error is one JSON document with the exit code', async () => {
      const r = await record(ndjson(refund('bad_13', { provider: 'paypal' })), ['--json']);
      expect(r.code).toBe(2);
      expect(oneJsonDocument(r).error).toMatchObject({
        exit_code: 2,
        type: 'UsageError',
        message: expect.stringMatching(/^provider: /),
      });
    });

    it('none of them was written', async () => {
      // Each bad input is sent here, not left to the tests above: run alone (vitest -t), this test
      // would otherwise find nothing written because nothing was sent.
      for (const [name, input] of cases) expect((await record(input)).code, name).toBe(2);
      // A control under the same prefix: what is written is listed, so the filter below can see it.
      expect((await record(ndjson(refund('bad_control')))).code).toBe(0);
      expect((await listIds()).filter((id) => id.startsWith('bad') || id.startsWith('bbb'))).toEqual(['bad_control']);
    });
  });

  it('records, refuses a changed payload (exit 4) and keeps the first one', async () => {
    const first = await record(ndjson(refund('cli_a', { client_reference: 'ord_a' })), ['--json']);
    expect(first.code, first.stderr).toBe(0);
    expect(oneJsonDocument(first)).toEqual({ operations: [{ id: 'cli_a', state: 'proposed', created: true }] });

    const again = await record(ndjson(refund('cli_a', { client_reference: 'ord_a' })), ['--json']);
    expect(again.code).toBe(0);
    expect(oneJsonDocument(again)).toEqual({ operations: [{ id: 'cli_a', state: 'proposed', created: false }] });

    const changed = await record(
      ndjson(
        refund('cli_b'),
        refund('cli_a', {
          client_reference: 'ord_a',
          payload: { payment_intent: 'pi_1', amount: 2999, currency: 'usd' },
        }),
      ),
    );
    expect(changed.code).toBe(4);
    expect(errorLines(changed)).toHaveLength(1);
    expect(changed.stderr).toMatch(/cli_a: payload differs/);
    const shown = await cli(['ops', 'show', 'cli_a', '--json']);
    expect(oneJsonDocument(shown).operation).toMatchObject({ amount: 1999, state: 'proposed' });
    expect(await listIds()).not.toContain('cli_b');
  });

  it('ops approve moves proposed to approved; approving again is refused (exit 4)', async () => {
    await record(ndjson(refund('cli_appr')));
    const ok = await cli(['ops', 'approve', 'cli_appr', '--ref', 'TICKET-7', '--json']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(oneJsonDocument(ok)).toMatchObject({ id: 'cli_appr', state: 'approved' });
    const twice = await cli(['ops', 'approve', 'cli_appr', '--ref', 'TICKET-8']);
    expect(twice.code).toBe(4);
    expect(errorLines(twice)).toHaveLength(1);
    const shown = oneJsonDocument(await cli(['ops', 'show', 'cli_appr', '--json']));
    expect(shown.operation.approval).toBe('TICKET-7');
    expect(shown.events.map((e: { kind: string }) => e.kind)).toEqual(['recorded', 'approved']);
  });

  it.each<[string, string[], number]>([
    ['an unknown state', ['ops', 'list', '--state', 'bogus'], 2],
    ['a state list with an unknown name', ['ops', 'list', '--state', 'pending,unresolved'], 2],
    ['a duration with words', ['ops', 'list', '--older-than', '10 minutes'], 2],
    ['a zero limit', ['ops', 'list', '--limit', '0'], 2],
    ['a missing operation', ['ops', 'show', 'missing'], 3],
    ['a bad id', ['ops', 'show', 'no such id'], 2],
    ['approving a missing operation', ['ops', 'approve', 'missing', '--ref', 'T'], 3],
    ['approve without --ref', ['ops', 'approve', 'cli_a'], 2],
  ])('%s exits %i with one error line', async (_name, args, code) => {
    const r = await cli(args);
    expect(r.code, r.stderr).toBe(code);
    expect(r.stdout).toBe('');
    expect(errorLines(r)).toHaveLength(1);
  });

  it('--json prints exactly one JSON document on stdout, and progress only on stderr', async () => {
    await record(ndjson(refund('cli_json', { approval: 'T-1' })));
    const commands = [
      ['ops', 'record', '-'],
      ['ops', 'list'],
      ['ops', 'list', '--unresolved'],
      ['ops', 'show', 'cli_json'],
      ['db', 'status'],
      ['audit', 'verify'],
      ['stats'],
      ['review', 'list'],
      ['ops', 'show', 'missing'],
    ];
    for (const args of commands) {
      const r = await cli(['--json', ...args], { input: ndjson(refund('cli_json', { approval: 'T-1' })) });
      expect([0, 3], `${args.join(' ')}: ${r.stderr}`).toContain(r.code);
      const doc = oneJsonDocument(r);
      expect(typeof doc, args.join(' ')).toBe('object');
      expect(r.stdout).not.toContain(ESC);
    }
    const verify = oneJsonDocument(await cli(['audit', 'verify', '--json']));
    expect(verify).toMatchObject({ ok: true, broken: [] });
    expect(verify.operations_checked).toBeGreaterThan(0);
  });

  it('writes no ANSI colour when stdout is not a TTY, even without NO_COLOR', async () => {
    await record(ndjson(refund('cli_colour', { approval: 'T' })));
    const env = { NO_COLOR: undefined, FORCE_COLOR: '3' };
    for (const args of [
      ['ops', 'list'],
      ['ops', 'show', 'cli_colour'],
      ['--help'],
      ['ops', 'show', 'missing'],
      ['ops', 'list', '--state', 'bogus'],
    ]) {
      // A child process: chalk decides colour support from the real process's environment.
      const r = await recon(args, { cwd: dir, env: { STRIPE_API_KEY: sandbox.apiKey, ...env } });
      expect(r.stdout + r.stderr, args.join(' ')).not.toContain(ESC);
    }
  });

  const hasScript = (() => {
    try {
      execFileSync('script', ['--version'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();

  /** Runs the CLI on a pseudo-terminal (util-linux `script`), so stdout is a TTY. */
  function onTty(args: string[], env: Record<string, string | undefined>): Promise<string> {
    const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    const command = [process.execPath, BIN, ...args].map(quote).join(' ');
    return new Promise((resolve, reject) => {
      const child = spawn('script', ['-qec', command, '/dev/null'], {
        cwd: dir,
        // No pager waiting for a key (issue 26: long output on a terminal is paged).
        env: cleanEnv({ STRIPE_API_KEY: sandbox.apiKey, PAGER: 'cat', ...env }),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (out += d));
      child.on('error', reject);
      child.on('close', () => resolve(out));
    });
  }

  it.runIf(hasScript)('colours only on a TTY, and never with NO_COLOR or --no-color', async () => {
    await record(ndjson(refund('cli_tty', { approval: 'T' })));
    const coloured = await onTty(['ops', 'list'], { NO_COLOR: undefined });
    expect(coloured).toContain('cli_tty');
    expect(coloured).toContain(ESC); // the check below can fail
    const noColor = await onTty(['ops', 'list'], { NO_COLOR: '1' });
    expect(noColor).toContain('cli_tty');
    expect(noColor).not.toContain(ESC);
    const flag = await onTty(['--no-color', 'ops', 'list'], { NO_COLOR: undefined });
    expect(flag).toContain('cli_tty');
    expect(flag).not.toContain(ESC);
    const json = await onTty(['ops', 'list', '--json'], { NO_COLOR: undefined });
    expect(json).toContain('cli_tty');
    expect(json).not.toContain(ESC);
  });
});

describe.each(backends)('ops record → list → show on $name', (backend) => {
  it('works with --db URL and no config store', async () => {
    const url = await backend.migratedUrl();
    const dir = tempDir();
    const env = { STRIPE_API_KEY: 'sk_test_unused' };
    const op = refund('flow:1', { client_reference: 'ord_flow', subject: { customer: 'cus_1' } });
    const rec = await runInProcess(['--db', url, 'ops', 'record', '-', '--json'], {
      cwd: dir,
      env,
      input: JSON.stringify(op),
    });
    expect(rec.code, rec.stderr).toBe(0);
    expect(oneJsonDocument(rec)).toEqual({ operations: [{ id: 'flow:1', state: 'proposed', created: true }] });

    const list = await runInProcess(['--db', url, 'ops', 'list', '--json'], { cwd: dir, env });
    expect(list.code, list.stderr).toBe(0);
    const ops = oneJsonDocument(list).operations;
    expect(ops).toHaveLength(1);
    expect(ops[0]).toMatchObject({
      id: 'flow:1',
      provider: 'stripe',
      action: 'refund',
      state: 'proposed',
      idempotency_key: 'flow:1',
      client_reference: 'ord_flow',
      amount: 1999,
      currency: 'usd',
      attempt_count: 0,
      provider_txn_ids: [],
      review_reason: null,
    });
    expect(Date.parse(ops[0].created_at)).not.toBeNaN();

    const show = await runInProcess(['--db', url, 'ops', 'show', 'flow:1', '--json'], { cwd: dir, env });
    expect(show.code, show.stderr).toBe(0);
    const detail = oneJsonDocument(show);
    expect(Object.keys(detail).sort()).toEqual([
      'attempts',
      'events',
      'observations',
      'operation',
      'provider_transactions',
    ]);
    expect(detail.operation).toMatchObject({ id: 'flow:1', state: 'proposed' });
    expect(detail.events).toHaveLength(1);

    const human = await runInProcess(['--db', url, 'ops', 'show', 'flow:1'], { cwd: dir, env });
    expect(human.code).toBe(0);
    expect(human.stdout).toContain('flow:1');
    expect(human.stdout).toContain('recorded');
    // Nothing was created in the working folder: the store is the one --db named.
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});

describe('recon init', () => {
  it('in an empty folder writes recon.config.json and migrates the default store; later commands work', async () => {
    const dir = tempDir();
    const r = await runInProcess(['init', '--json'], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    const doc = oneJsonDocument(r);
    expect(doc).toMatchObject({ config_written: true, schema_version: expect.any(Number) });
    expect(doc.schema_version).toBeGreaterThan(0);
    expect(fs.existsSync(path.join(dir, 'recon.config.json'))).toBe(true);
    expect(fs.existsSync(path.join(dir, '.recon', 'db'))).toBe(true);

    const env = { STRIPE_API_KEY: 'sk_test_x' };
    const status = await runInProcess(['db', 'status', '--json'], { cwd: dir, env });
    expect(status.code, status.stderr).toBe(0);
    expect(oneJsonDocument(status)).toMatchObject({ schema_version: doc.schema_version, pending_migrations: [] });
    const rec = await runInProcess(['ops', 'record', '-', '--json'], {
      cwd: dir,
      env,
      input: JSON.stringify(refund('init_1')),
    });
    expect(rec.code, rec.stderr).toBe(0);

    const again = await runInProcess(['init', '--json'], { cwd: dir, env });
    expect(again.code, again.stderr).toBe(0);
    expect(oneJsonDocument(again)).toMatchObject({ config_written: false, applied: [] });
  });

  it('migrates the store the existing config names', async () => {
    const dir = tempDir();
    // A store without recon's schema (initdb done: that part is PGlite's, and takes seconds).
    const storeDir = (await embeddedBackend.emptyUrl()).slice('pglite:'.length);
    fs.writeFileSync(path.join(dir, 'recon.config.json'), JSON.stringify({ db: `pglite:${storeDir}`, providers: {} }));
    const r = await runInProcess(['init', '--json'], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(oneJsonDocument(r)).toMatchObject({ config_written: false, store: `pglite:${storeDir}` });
    expect(fs.existsSync(storeDir)).toBe(true);
    expect(fs.existsSync(path.join(dir, '.recon'))).toBe(false);
  });
});

describe('the embedded store lock', () => {
  it('a second process gets exit 6 naming the holder while one holds the store', async () => {
    const dir = tempDir();
    const url = await embeddedBackend.migratedUrl();
    const db = await openStore(url);
    try {
      const r = await recon(['--db', url, 'ops', 'list', '--json'], { cwd: dir });
      expect(r.code, r.stderr).toBe(6);
      expect(errorLines(r)).toHaveLength(1);
      expect(r.stderr).toContain(`pid ${process.pid}`);
      expect(r.stderr).toContain(os.hostname());
      expect(oneJsonDocument(r).error.exit_code).toBe(6);
    } finally {
      await db.close();
    }
    // Closed, the holder has removed its lock: the next command takes the store. In this process (a
    // lock file left behind names this live process, and would be refused just the same), where
    // PGlite is already loaded: a child would boot it, ~1 s of CPU, to see the same.
    const after = await runInProcess(['--db', url, 'ops', 'list', '--json'], { cwd: dir });
    expect(after.code, after.stderr).toBe(0);
    expect(oneJsonDocument(after).operations).toEqual([]);
  });
});

describe("the embedded store's WebAssembly tier", () => {
  // A preload in the child records every V8 flag the process sets (src/store/pglite.ts sets them
  // with v8.setFlagsFromString before PGlite compiles): the same hook on both commands, so the
  // server's empty record means it set none, not that the hook missed it.
  const hook = (dir: string) => {
    const file = path.join(dir, 'flags.txt');
    const preload = path.join(dir, 'record-flags.mjs');
    fs.writeFileSync(
      preload,
      `import fs from 'node:fs';\nimport v8 from 'node:v8';\nconst set = v8.setFlagsFromString;\n` +
        `v8.setFlagsFromString = (flags) => { fs.appendFileSync(${JSON.stringify(file)}, flags + '\\n'); set(flags); };\n`,
    );
    return {
      env: { NODE_OPTIONS: `--import ${preload}` },
      flags: () => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : ''),
    };
  };

  it("a one-shot command runs the store on the baseline tier only (recon run its JavaScript's tier-up late too); recon mcp keeps V8's default", async () => {
    const url = await embeddedBackend.migratedUrl();
    const once = hook(tempDir());
    const list = await recon(['--db', url, 'ops', 'list', '--json'], { env: once.env });
    expect(list.code, list.stderr).toBe(0);
    expect(oneJsonDocument(list).operations).toEqual([]);
    expect(once.flags()).toBe(`${BASELINE_WASM_FLAGS}\n`);
    // recon run, a batch, also tiers its JavaScript up late (src/lib/tiering.ts).
    const batch = hook(tempDir());
    const run = await recon(['--db', url, 'run', '--json'], { env: batch.env });
    expect(run.code, run.stderr).toBe(0);
    expect(batch.flags()).toBe(`${BASELINE_WASM_FLAGS}\n${LATE_TIERING_FLAGS}\n`);
    // recon mcp over stdio ends when its host closes stdin: it opened the store without the setting.
    const server = hook(tempDir());
    const mcp = await recon(['--db', url, 'mcp'], { env: server.env, input: '' });
    expect(mcp.code, mcp.stderr).toBe(0);
    expect(server.flags()).toBe('');
  });

  // A preload in the child asks each store PGlite starts for its buffer pool, as PostgreSQL has it.
  const pool = (dir: string) => {
    const file = path.join(dir, 'pool.txt');
    const preload = path.join(dir, 'record-pool.mjs');
    const pglite = new URL(import.meta.resolve('@electric-sql/pglite')).href;
    fs.writeFileSync(
      preload,
      `import fs from 'node:fs';\nimport { PGlite } from ${JSON.stringify(pglite)};\nconst create = PGlite.create;\n` +
        `PGlite.create = async function (...args) { const pg = await create.apply(this, args);\n` +
        `  const { rows } = await pg.query('SHOW shared_buffers');\n` +
        `  fs.appendFileSync(${JSON.stringify(file)}, rows[0].shared_buffers + '\\n'); return pg; };\n`,
    );
    return {
      env: { NODE_OPTIONS: `--import ${preload}` },
      pools: () => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : ''),
    };
  };

  it("a one-shot command starts an existing store with a 16MB buffer pool, not the 128MB zeroed at every start; recon mcp keeps the store's", async () => {
    const folder = path.join(tempDir(), 'db');
    const made = await recon(['--db', `pglite:${folder}`, 'ops', 'record', '-', '--json'], { input: '[]' });
    expect(made.code, made.stderr).toBe(0);
    // A store recon made (the tests' own copies are set to 16MB in their postgresql.conf).
    const once = pool(tempDir());
    const list = await recon(['--db', `pglite:${folder}`, 'ops', 'list', '--json'], { env: once.env });
    expect(list.code, list.stderr).toBe(0);
    expect(once.pools()).toBe('16MB\n');
    // The store's own setting is initdb's, left as it was: the servers use it.
    expect(fs.readFileSync(path.join(folder, 'postgresql.conf'), 'utf8')).toMatch(/^shared_buffers = 128MB/m);
    const server = pool(tempDir());
    const mcp = await recon(['--db', `pglite:${folder}`, 'mcp'], { env: server.env, input: '' });
    expect(mcp.code, mcp.stderr).toBe(0);
    expect(server.pools()).toBe('128MB\n');
  });
});

describe('secrets are never printed', () => {
  const SECRET = 'sk_test_SECRET123';
  let server: http.Server;
  let dir: string;
  let storeUrl: string;
  let hits = 0;

  beforeAll(async () => {
    // A provider that fails and echoes the credentials it was sent, as some error pages do.
    server = http.createServer((req, res) => {
      hits++;
      const status = req.url?.startsWith('/v1/refunds?') ? 500 : 401;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: {
            type: status === 401 ? 'invalid_request_error' : 'api_error',
            message: `rejected ${req.headers.authorization} (key ${SECRET})`,
          },
        }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    dir = tempDir();
    const backend = backends.find((b) => b.name === 'postgres') ?? backends[0];
    storeUrl = await backend.migratedUrl();
    fs.writeFileSync(
      path.join(dir, 'recon.config.json'),
      JSON.stringify({
        db: storeUrl,
        providers: {
          stripe: { type: 'stripe', apiKey: SECRET, apiBase: `http://127.0.0.1:${port}`, timeout: '2s', lease: '4s' },
        },
      }),
    );
    const ids = ['sec_1', 'sec_2', 'sec_s0', 'sec_s1', 'sec_j0', 'sec_j1'];
    const rec = await runInProcess(['ops', 'record', '-'], {
      cwd: dir,
      input: ndjson(...ids.map((id) => refund(id, { approval: 'T' }))),
    });
    expect(rec.code, rec.stderr).toBe(0);
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
  });
  // recon retries each read of a provider that answers 500 (~1 s of back-off a read); here the
  // back-off waits at most 1 ms (shortBackoff): the retries are made all the same, only not waited out.

  // Each command runs twice (without and with DEBUG); `n` gives a submit a fresh operation each time.
  it.each<[string, (n: number) => string[], (() => Promise<void>)?]>([
    ['ops submit', (n) => ['ops', 'submit', `sec_s${n}`]],
    ['ops submit, with --json', (n) => ['ops', 'submit', `sec_j${n}`, '--json']],
    ['lookup', () => ['lookup', 'sec_s0']],
    ['lookup by client reference', () => ['lookup', '--client-ref', 'ord_x', '--provider', 'stripe']],
    [
      'run',
      () => ['run', '--json'],
      async () => {
        // `unavailable` backs an operation off; make them due again so the second pass reaches the provider.
        const db = await openStore(storeUrl);
        await db.query('UPDATE recon.operations SET next_check_at = NULL').finally(() => db.close());
      },
    ],
    ['attach', () => ['attach', 'sec_s0', 're_1', '--yes']],
    ['audit duplicates', () => ['audit', 'duplicates', '--json']],
  ])('%s: not on stdout or stderr, with or without DEBUG', async (_name, argsFor, before_) => {
    for (const [n, env] of [{}, { DEBUG: '1' }].entries()) {
      await before_?.();
      const args = argsFor(n);
      const before = hits;
      const r = await runInProcess(args, { cwd: dir, env, shortBackoff: true });
      expect(hits, `${args.join(' ')} reached the provider`).toBeGreaterThan(before);
      expect(r.stdout + r.stderr).not.toContain('SECRET123');
      // An error that reached bin/main.ts: with DEBUG its stack was printed too.
      if ('DEBUG' in env && /^recon: (?!store )/m.test(r.stderr)) expect(r.stderr).toMatch(/\n\s+at /);
    }
  });

  it('a provider that errors is "provider unavailable" (exit 5) for lookups and audits, with or without --json', async () => {
    for (const args of [
      ['lookup', 'sec_s0'],
      ['lookup', '--client-ref', 'ord_x', '--provider', 'stripe'],
      ['lookup', 'sec_s0', '--json'],
      ['lookup', '--client-ref', 'ord_x', '--provider', 'stripe', '--json'],
      ['audit', 'duplicates', '--json'],
    ]) {
      const r = await runInProcess(args, { cwd: dir, shortBackoff: true });
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(5);
      if (args[0] === 'lookup' && args.includes('--json'))
        expect((JSON.parse(r.stdout) as { result: string }).result).toBe('unavailable');
    }
  });

  it('not in what was stored either', async () => {
    // What stores the provider's answers is done here, not left to the tests above: run alone
    // (vitest -t) this test looked at tables nothing had been written to, and passed.
    const before = hits;
    for (const args of [
      ['ops', 'submit', 'sec_1'],
      ['lookup', 'sec_2'],
      ['run', '--json'],
    ]) {
      await runInProcess(args, { cwd: dir, shortBackoff: true });
    }
    expect(hits, 'the commands reached the provider').toBeGreaterThan(before);
    const db = await openStore(storeUrl);
    try {
      const stored: Record<string, string> = {};
      for (const table of ['operations', 'attempts', 'observations', 'audit_events']) {
        const rows = await db.query(`SELECT * FROM recon.${table}`);
        stored[table] = JSON.stringify(rows.rows);
        expect(stored[table], table).not.toContain('SECRET123');
      }
      // The provider's answers were stored (its error text with them), so the check above had
      // something to find: sec_1's attempt and the lookups' observations of sec_2.
      expect(stored.attempts).toContain('sec_1');
      expect(stored.observations).toContain('sec_2');
      expect(Object.values(stored).join('\n')).toContain('rejected');
    } finally {
      await db.close();
    }
    // Nor in what shows it.
    for (const id of ['sec_1', 'sec_2']) {
      const r = await runInProcess(['ops', 'show', id, '--json'], { cwd: dir });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).not.toContain('SECRET123');
    }
  });
});
