/**
 * Issue 23, config trust (SPEC §5 "Trust in what is found"): another local user plants
 * `recon.config.json` with a `module` provider in a parent folder, and root runs `recon ops record`
 * below it. Like git with `safe.directory`, recon refuses a config it finds on its own that someone
 * else owns or that group or others may write (exit 2, naming the file, its owner and the fix), and
 * the module it names never runs; `--config`/`RECON_CONFIG` or the user's own `"trust"` list vouch
 * for it. A FIFO, a device or a file over 1 MiB is exit 2 too, at once.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { recon, type CliResult } from '../support/cli.js';

const AS_ROOT = process.getuid?.() === 0;
const NOBODY = 65534;

const OP = JSON.stringify({ id: 'inv:1', provider: 'planted', action: 'invite', payload: {}, approval: 'T-1' });

let root: string;
/** The planted folder (the parent) and the folder the victim works in, below it. */
let planted: string;
let work: string;
let marker: string;
let xdg: string;

/** A module that leaves a marker file when it is imported: its code ran. */
function writeModule(file: string): void {
  fs.writeFileSync(
    file,
    `import fs from 'node:fs';\nfs.writeFileSync(${JSON.stringify(marker)}, 'ran');\n` +
      `export default { capabilities: {}, submit: async () => ({ outcome: 'failed' }), lookup: async () => ({ result: 'not_found', matches: [], candidates: [] }), get: async () => null };\n`,
  );
}

function writeConfig(file: string, module: string): void {
  fs.writeFileSync(file, JSON.stringify({ providers: { planted: { type: 'module', module } } }));
}

function record(env: Record<string, string> = {}, args: string[] = []): Promise<CliResult> {
  return recon(['ops', 'record', '-', '--json', ...args], {
    cwd: work,
    env: { XDG_CONFIG_HOME: xdg, ...env },
    input: OP,
  });
}

/** A command that loads the provider without opening a store: for the cases that are accepted. */
function lookup(env: Record<string, string> = {}): Promise<CliResult> {
  return recon(['lookup', '--key', 'k', '--provider', 'planted', '--json'], {
    cwd: work,
    env: { XDG_CONFIG_HOME: xdg, ...env },
  });
}

function expectRan(r: CliResult): void {
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  expect(fs.existsSync(marker)).toBe(true);
  fs.rmSync(marker);
}

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-trust-'));
  planted = path.join(root, 'shared');
  work = path.join(planted, 'project');
  xdg = path.join(root, 'xdg');
  fs.mkdirSync(work, { recursive: true });
  fs.mkdirSync(path.join(xdg, 'recon'), { recursive: true });
  marker = path.join(root, 'module-ran');
  writeModule(path.join(planted, 'steal.mjs'));
  writeConfig(path.join(planted, 'recon.config.json'), './steal.mjs');
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

function plantAsNobody(): string {
  const config = path.join(planted, 'recon.config.json');
  fs.chownSync(config, NOBODY, NOBODY);
  fs.chownSync(path.join(planted, 'steal.mjs'), NOBODY, NOBODY);
  return config;
}

function expectRefused(r: CliResult): void {
  expect(r.code).toBe(2);
  expect(r.json.error.exit_code).toBe(2);
  expect(fs.existsSync(marker)).toBe(false);
  // Nothing written: no store was created below the planted config.
  expect(fs.existsSync(path.join(work, '.recon'))).toBe(false);
}

describe('a config recon finds on its own is used only when it can be trusted', () => {
  it.skipIf(!AS_ROOT)('another user’s config in a parent folder is refused, and its module never runs', async () => {
    const config = plantAsNobody();
    const r = await record();
    expectRefused(r);
    const message: string = r.json.error.message;
    expect(message).toContain(config);
    expect(message).toContain('owned by nobody (uid 65534)');
    expect(message).toContain(`--config ${config}`);
    expect(message).toContain(`"trust" in ${path.join(xdg, 'recon', 'config.json')}`);
  });

  it('a config writable by group or by others is refused with the chmod that fixes it', async () => {
    const config = path.join(planted, 'recon.config.json');
    for (const mode of [0o664, 0o646]) {
      fs.chmodSync(config, mode);
      const r = await record();
      expectRefused(r);
      expect(r.json.error.message).toContain(`writable by ${mode === 0o664 ? 'group' : 'others'}`);
      expect(r.json.error.message).toContain(`chmod go-w ${config}`);
    }
    fs.chmodSync(config, 0o644);
    expectRan(await lookup());
  });

  it('an untrusted $XDG_CONFIG_HOME/recon/config.json is refused too, and cannot vouch for itself', async () => {
    fs.rmSync(path.join(planted, 'recon.config.json'));
    const user = path.join(xdg, 'recon', 'config.json');
    fs.renameSync(path.join(planted, 'steal.mjs'), path.join(xdg, 'recon', 'steal.mjs'));
    const provider = { planted: { type: 'module', module: './steal.mjs' } };
    fs.writeFileSync(user, JSON.stringify({ providers: provider }));
    fs.chmodSync(user, 0o666);
    const r = await record();
    expectRefused(r);
    expect(r.json.error.message).toContain(`${user}: it is writable by group and others`);
    expect(r.json.error.message).toContain(`chmod go-w ${user}`);
    // Its own "trust" list does not vouch for it, and the message does not suggest that it could.
    fs.writeFileSync(user, JSON.stringify({ trust: [xdg], providers: provider }));
    const again = await record();
    expectRefused(again);
    expect(again.json.error.message).not.toContain('"trust" in');
  });

  it.skipIf(!AS_ROOT)('--config and RECON_CONFIG vouch for the file; its module must still be trusted', async () => {
    const config = plantAsNobody();
    // The file is vouched for, the module it names (nobody's) is not: refused, not run.
    const viaFlag = await record({}, ['--config', config]);
    expectRefused(viaFlag);
    expect(viaFlag.json.error.message).toMatch(
      /providers\.planted\.module: refusing to load .*steal\.mjs: it is owned by nobody/,
    );
    // A module of the user's own in the vouched config runs.
    const own = path.join(root, 'own');
    fs.mkdirSync(own);
    writeModule(path.join(own, 'mine.mjs'));
    writeConfig(config, path.join(own, 'mine.mjs'));
    fs.chownSync(config, NOBODY, NOBODY);
    expectRefused(await record());
    expectRan(await lookup({ RECON_CONFIG: config }));
  });

  it.skipIf(!AS_ROOT)(
    'the "trust" list of the user’s own config vouches for a folder; in any other config it is refused',
    async () => {
      plantAsNobody();
      const user = path.join(xdg, 'recon', 'config.json');
      fs.writeFileSync(user, JSON.stringify({ trust: [planted] }));
      expectRan(await lookup());

      // A user config that group may write vouches for nothing.
      fs.chmodSync(user, 0o664);
      expectRefused(await record());

      // A project config cannot vouch for anything.
      fs.chmodSync(user, 0o644);
      const project = path.join(work, 'recon.config.json');
      fs.writeFileSync(project, JSON.stringify({ trust: ['/'] }));
      const r = await record();
      expectRefused(r);
      expect(r.json.error.message).toMatch(/trust: only your own config .* can vouch for files/);
    },
  );

  it('a module in a folder that others may write is refused, even from the user’s own config', async () => {
    const open = path.join(root, 'open');
    fs.mkdirSync(open);
    fs.chmodSync(open, 0o777);
    writeModule(path.join(open, 'm.mjs'));
    writeConfig(path.join(work, 'recon.config.json'), path.join(open, 'm.mjs'));
    const r = await record();
    expectRefused(r);
    expect(r.json.error.message).toContain(`its folder ${open} is writable by group and others`);
    // Through a symbolic link from a trusted folder: the real path is what is checked.
    fs.symlinkSync(path.join(open, 'm.mjs'), path.join(work, 'link.mjs'));
    writeConfig(path.join(work, 'recon.config.json'), './link.mjs');
    expectRefused(await record());
  });
});

describe('a config must be a regular file of at most 1 MiB', () => {
  it('a FIFO is refused at once instead of blocking for ever', async () => {
    const fifo = path.join(root, 'config.fifo');
    execFileSync('mkfifo', [fifo]);
    const r = await recon(['ops', 'list', '--json', '--db', 'memory:'], {
      cwd: work,
      env: { RECON_CONFIG: fifo },
      timeoutMs: 30_000,
    });
    expect(r.signal).toBeNull();
    expect(r.code).toBe(2);
    expect(r.json.error.message).toBe(`RECON_CONFIG: ${fifo} is not a regular file (a FIFO); point it at a JSON file`);
  });

  it('a device and a file over 1 MiB are refused', async () => {
    const device = await recon(['ops', 'list', '--json', '--db', 'memory:', '--config', '/dev/urandom'], { cwd: work });
    expect(device.code).toBe(2);
    expect(device.json.error.message).toContain('is not a regular file (a character device)');
    const big = path.join(root, 'big.json');
    fs.writeFileSync(big, `{"providers": {}, "//": "${'x'.repeat(1024 * 1024)}"}`);
    const r = await recon(['ops', 'list', '--json', '--db', 'memory:', '--config', big], { cwd: work });
    expect(r.code).toBe(2);
    expect(r.json.error.message).toContain(`${big} is over 1 MiB`);
  });
});
