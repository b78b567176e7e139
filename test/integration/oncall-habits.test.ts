/**
 * Issue 11, "what users of gh, stripe and temporal CLIs expect": shell completion, `recon doctor`,
 * `recon init` with a webhook secret and next steps, `webhook serve` refusing to run blind and its
 * lock message on the embedded store, `ops list --csv` and `--after` paging.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startStripeSandbox, type StripeSandbox } from '../../src/sandbox/stripe/server.js';
import { warehouseProviderConfig } from '../../src/sandbox/warehouse/provider-config.js';
import { cleanEnv } from '../support/cli.js';
import {
  configDir,
  recon,
  RECON_BIN,
  refund,
  removeTempDirs,
  sharedStore,
  STRIPE_ENV,
  tempDir,
  withStore,
} from './oncall-support.js';

// Commands run in process (oncall-support.ts); a shared, loaded machine: generous timeouts.
vi.setConfig({ testTimeout: 180_000, hookTimeout: 240_000 });

let sandbox: StripeSandbox;
const env = STRIPE_ENV;
beforeAll(async () => {
  sandbox = await startStripeSandbox({ apiKey: env.STRIPE_API_KEY, webhookSecret: env.STRIPE_WEBHOOK_SECRET });
});
afterAll(async () => {
  await sandbox?.close();
  removeTempDirs();
});
const ndjson = (ops: unknown[]) => ops.map((o) => JSON.stringify(o)).join('\n') + '\n';

describe('recon completion', () => {
  it('bash: the script completes subcommands and options', async () => {
    const r = await recon(['completion', 'bash']);
    expect(r.code, r.stderr).toBe(0);
    const file = path.join(tempDir(), 'recon.bash');
    fs.writeFileSync(file, r.stdout);
    const complete = (...words: string[]) =>
      execFileSync(
        'bash',
        [
          '-c',
          `source ${file}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _recon; echo "\${COMPREPLY[@]}"`,
        ],
        { encoding: 'utf8' },
      ).trim();
    expect(complete('recon', 'loo')).toBe('lookup');
    expect(complete('recon', 'ops', 'l')).toBe('list');
    expect(complete('recon', '--json', 'ops', 'list', '--unr')).toBe('--unresolved');
    expect(complete('recon', 'review', 'l')).toBe('list');
  });

  it('zsh and fish scripts, and an unknown shell is a usage error', async () => {
    expect((await recon(['completion', 'zsh'])).stdout).toMatch(/^#compdef recon/);
    const fish = await recon(['completion', 'fish']);
    expect(fish.stdout).toContain(
      "complete -c recon -n '__fish_seen_subcommand_from ops; and __fish_seen_subcommand_from list' -l unresolved",
    );
    expect((await recon(['completion', 'tcsh'])).code).toBe(2);
  });

  it('--provider <TAB> offers the providers configured where the user is (issue 26)', async () => {
    const dir = tempDir();
    fs.writeFileSync(
      path.join(dir, 'recon.config.json'),
      JSON.stringify({
        providers: {
          stripe: { type: 'stripe', apiKey: '${STRIPE_API_KEY}', apiBase: sandbox.url },
          warehouse: warehouseProviderConfig('http://127.0.0.1:9', '${WAREHOUSE_TOKEN}'),
        },
      }),
    );
    const script = path.join(dir, 'recon.bash');
    fs.writeFileSync(script, (await recon(['completion', 'bash'])).stdout);
    const shellEnv = cleanEnv({ ...env, WAREHOUSE_TOKEN: 'wh_token', XDG_CONFIG_HOME: path.join(dir, 'no-xdg') });
    // The script asks the recon being completed (COMP_WORDS[0]): this build, run from `dir`.
    const complete = (...words: string[]) =>
      execFileSync(
        'bash',
        [
          '-c',
          `source ${script}; COMP_WORDS=(${[RECON_BIN, ...words].map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length}; _recon; echo "\${COMPREPLY[*]}"`,
        ],
        { encoding: 'utf8', cwd: dir, env: shellEnv },
      ).trim();
    expect(complete('run', '--provider', '')).toBe('stripe warehouse');
    expect(complete('ops', 'list', '--provider', 'wa')).toBe('warehouse');
    expect(complete('audit', 'duplicates', '--provider', 's')).toBe('stripe');
    // --provider=VALUE, as bash splits it at "=" (COMP_WORDBREAKS), and as one word where it does not.
    expect(complete('run', '--provider', '=')).toBe('stripe warehouse');
    expect(complete('run', '--provider', '=', 'wa')).toBe('warehouse');
    expect(complete('run', '--provider=st')).toBe('--provider=stripe');
    expect(complete('ops', 'list', '--state', '=', 'need')).toBe('needs_review');
    // --config on the command line is the config asked: one naming no provider offers none.
    const other = path.join(dir, 'other.json');
    fs.writeFileSync(other, JSON.stringify({ providers: {} }));
    expect(complete('--config', other, 'run', '--provider', '')).toBe('');
    // The hidden command: not a command of the script, and never a word on stderr, exit 0.
    expect(complete('__')).toBe('');
    for (const args of [['providers'], ['providers', '--config', path.join(dir, 'missing.json')], ['nothing']]) {
      const r = spawnSync(process.execPath, [RECON_BIN, '__complete', ...args], {
        cwd: dir,
        env: shellEnv,
        encoding: 'utf8',
      });
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
      expect(r.stdout).toBe(args.length === 1 && args[0] === 'providers' ? 'stripe\nwarehouse\n' : '');
    }
    const fish = (await recon(['completion', 'fish'])).stdout;
    expect(fish).toContain('$words[1] __complete $argv $config');
    expect(fish).toMatch(/__fish_seen_subcommand_from run' -l provider -xa '\(__recon_ask providers\)'/);
    expect((await recon(['completion', 'zsh'])).stdout).toContain('"$bin" __complete "$1"');
  });
});

describe('recon doctor', () => {
  it('passes on a ready machine: store, config, key, rate limit, clock, webhook secret', async () => {
    const dir = await withStore(configDir(sandbox.url));
    expect((await recon(['ops', 'record', '-'], { cwd: dir, env, input: ndjson([refund('refund:doc_1')]) })).code).toBe(
      0,
    );
    const r = await recon(['doctor'], { cwd: dir, env });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^ok +config: /m);
    expect(r.stdout).toMatch(/^ok +store: .*schema version \d+ of \d+/m);
    expect(r.stdout).toMatch(
      /^ok +provider stripe: key valid, reachable \(HTTP 200\); rate limit 200\/s.*clock skew -?\ds/m,
    );
    expect(r.stdout).toMatch(/^ok +provider stripe: webhook secret: set/m);
    expect(r.stdout).not.toContain(env.STRIPE_API_KEY);
  });

  it('fails with what to fix: a refused key, a missing store, a missing secret', async () => {
    const dir = configDir(sandbox.url, { webhookSecret: undefined });
    const r = await recon(['doctor', '--json'], { cwd: dir, env: { STRIPE_API_KEY: 'sk_test_wrong' } });
    expect(r.code).not.toBe(0);
    const failed = r.json.checks.filter((c: { ok: boolean }) => !c.ok);
    const names = failed.map((c: { name: string }) => c.name);
    expect(names).toEqual(expect.arrayContaining(['store', 'provider stripe', 'provider stripe: webhook secret']));
    const store = failed.find((c: { name: string }) => c.name === 'store');
    expect(store.fix).toContain('recon init');
    const key = failed.find((c: { name: string }) => c.name === 'provider stripe');
    expect(key.detail).toContain('401');
    expect(r.stdout).not.toContain('sk_test_wrong');
  });
});

describe('recon doctor never contradicts itself (issue 26)', () => {
  it('a provider whose key variable is unset is named on the config line, never "providers: none" above its FAIL', async () => {
    const dir = configDir(sandbox.url);
    const r = await recon(['doctor'], { cwd: dir, env: { STRIPE_WEBHOOK_SECRET: env.STRIPE_WEBHOOK_SECRET } });
    expect(r.stdout).toMatch(/^FAIL +provider stripe: secrets/m);
    const configLine = r.stdout.split('\n').find((l) => /^ok +config: /.test(l));
    expect(configLine).toBeDefined();
    expect(configLine).not.toContain('providers: none');
    expect(configLine).toContain('stripe (not usable: see below)');
    expect(r.code).toBe(2);
  });

  it('a clock past the limit is one FAIL (exit 2), not also an ok line that reports the skew', async () => {
    const ahead = await startStripeSandbox({
      apiKey: env.STRIPE_API_KEY,
      webhookSecret: env.STRIPE_WEBHOOK_SECRET,
      now: () => Date.now() + 5 * 60_000,
    });
    try {
      const dir = await withStore(configDir(ahead.url));
      const recorded = await recon(['ops', 'record', '-'], {
        cwd: dir,
        env,
        input: ndjson([refund('refund:doc_skew')]),
      });
      expect(recorded.code).toBe(0);
      const r = await recon(['doctor'], { cwd: dir, env });
      expect(r.stdout).toMatch(/^FAIL +provider stripe: clock: this machine's clock is -?\d+s off/m);
      expect(r.stdout).not.toMatch(/^ok .*clock skew -?\d{3}s/m);
      expect(r.stdout).toMatch(/^ok +provider stripe: key valid, reachable \(HTTP 200\).*clock: see below/m);
      expect(r.code).toBe(2);
    } finally {
      await ahead.close();
    }
  });
});

describe('recon init', () => {
  it('writes webhookSecret and prints the next steps', async () => {
    const dir = tempDir();
    const r = await recon(['init'], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    const config = JSON.parse(fs.readFileSync(path.join(dir, 'recon.config.json'), 'utf8'));
    expect(config.providers.stripe.webhookSecret).toBe('${STRIPE_WEBHOOK_SECRET}');
    expect(r.stderr).toContain('Next steps:');
    expect(r.stderr).toContain('recon doctor');
  });
});

describe('recon webhook serve', () => {
  it('refuses to start when the provider has no webhook secret', async () => {
    // Neither the file nor the environment (which wins over the file) names a secret.
    const dir = configDir(sandbox.url, { webhookSecret: undefined });
    const r = await recon(['webhook', 'serve', '--port', '0', '--provider', 'stripe'], {
      cwd: dir,
      env: { ...env, STRIPE_WEBHOOK_SECRET: undefined },
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/webhookSecret: not set; webhook serve refuses to start/);
  });

  it('on the embedded store, the lock message of another command says to use PostgreSQL', async () => {
    const dir = await withStore(configDir(sandbox.url));
    expect((await recon(['ops', 'record', '-'], { cwd: dir, env, input: ndjson([refund('refund:wh_1')]) })).code).toBe(
      0,
    );
    // A server in another process holds the store; the command in this process meets its lock.
    const serve = spawn(process.execPath, [RECON_BIN, 'webhook', 'serve', '--port', '0'], {
      cwd: dir,
      env: cleanEnv(env),
    });
    try {
      let err = '';
      await new Promise<void>((resolve, reject) => {
        serve.stderr.on('data', (d) => {
          err += d;
          if (err.includes('listening on')) resolve();
        });
        serve.on('close', () => reject(new Error(`webhook serve ended: ${err}`)));
      });
      expect(err).toMatch(/use PostgreSQL/i);
      const list = await recon(['ops', 'list'], { cwd: dir, env });
      expect(list.code).toBe(6);
      expect(list.stderr).toMatch(/locked by pid \d+.*use PostgreSQL \(RECON_DB=postgres:\/\/…\) for a server/);
    } finally {
      serve.kill('SIGINT');
    }
  });
});

describe('ops list paging and CSV', () => {
  it('--after ID gives the next page; --csv gives one row per operation', async () => {
    // Every command on one open store (the paging is the point here, not finding the store).
    const store = sharedStore(await withStore(tempDir()));
    const recon = store.recon;
    const ops = Array.from({ length: 5 }, (_, i) => refund(`refund:page_${i}`, { approval: undefined }));
    expect((await recon(['ops', 'record', '-'], { env, input: ndjson(ops) })).code).toBe(0);
    const first = await recon(['ops', 'list', '--limit', '2', '--json']);
    expect(first.json.total).toBe(5);
    const second = await recon(['ops', 'list', '--limit', '2', '--after', first.json.next_after, '--json']);
    const third = await recon(['ops', 'list', '--limit', '2', '--after', second.json.next_after, '--json']);
    const ids = [first, second, third].flatMap((r) => r.json.operations.map((o: { id: string }) => o.id));
    expect(new Set(ids).size).toBe(5);
    expect(third.json.next_after).toBeNull();
    // total counts every match on every page: the last page holds one, and it follows --after.
    expect([second.json.total, third.json.total, third.json.operations.length]).toEqual([5, 5, 1]);
    // A first page that is not full: its length is the total; with a filter, the filter's.
    const all = await recon(['ops', 'list', '--limit', '10', '--json']);
    const none = await recon(['ops', 'list', '--state', 'confirmed', '--json']);
    expect([all.json.total, all.json.operations.length, none.json.total]).toEqual([5, 5, 0]);
    const csv = await recon(['ops', 'list', '--csv']);
    await store.release();
    const lines = csv.stdout.trim().split('\n');
    expect(lines[0]).toBe(
      'id,provider,action,state,amount,currency,attempt_count,client_reference,created_at,updated_at,provider_txn_ids,review_reason',
    );
    expect(lines).toHaveLength(6);
    expect(lines[1]).toMatch(/^refund:page_\d,stripe,refund,proposed,1999,usd,0,/);
  });
});
