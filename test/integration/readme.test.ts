/**
 * Issue 27: the README's "On call" walkthrough works as written. Every fenced `sh` block of that
 * section is run, line after line, by one bash in an empty folder, with the built `bin/recon` as
 * `recon` on PATH, against the Stripe sandbox that its first line starts. Each command must exit
 * with the code its comment names (`exit N`), else 0. The ports in the text (12111, 8787) are
 * replaced with free ones; a line ending in `&` is waited for until its port answers. Asserts on
 * the sandbox's ledger and the operation's `--json` as well.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN, cleanEnv, collect, ROOT } from '../support/cli.js';

const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'recon-readme-'));
let child: ChildProcess | undefined;
afterAll(() => {
  // The walkthrough's bash and what it left in the background (a failed run leaves the sandbox).
  if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null)
    process.kill(-child.pid, 'SIGKILL');
  fs.rmSync(folder, { recursive: true, force: true, maxRetries: 5 });
});

interface Line {
  text: string;
  expected: number;
}

/** The command lines of the fenced `sh` blocks of the README section `heading`. */
function walkthrough(heading: string): Line[] {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf(`\n## ${heading}`);
  if (start < 0) throw new Error(`README.md has no section "${heading}"`);
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  const lines: Line[] = [];
  for (const block of section.matchAll(/```sh\n([\s\S]*?)```/g)) {
    for (const raw of block[1].split('\n')) {
      const text = raw.trim();
      if (text === '' || text.startsWith('#')) continue;
      const comment = /\s#\s(.*)$/.exec(text)?.[1] ?? '';
      lines.push({ text, expected: Number(/\bexit (\d+)\b/.exec(comment)?.[1] ?? 0) });
    }
  }
  return lines;
}

/** What test/support/pglite-conf.ts appends to the tests' store templates, for the store `recon init` made. */
const SMALL_POOL = `[ -f .recon/db/postgresql.conf ] && printf '\\nshared_buffers = 16MB\\n' >> .recon/db/postgresql.conf`;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

describe('README: On call, step by step', () => {
  it('every command of the walkthrough exits as written, against the sandbox', async () => {
    const lines = walkthrough('On call: an incident, step by step');
    expect(lines.length).toBeGreaterThan(15);
    const ports = new Map([
      ['12111', String(await freePort())],
      ['8787', String(await freePort())],
    ]);
    const localise = (text: string) => text.replace(/\b(12111|8787)\b/g, (p) => ports.get(p)!);

    const shim = path.join(folder, 'bin');
    fs.mkdirSync(shim);
    fs.writeFileSync(path.join(shim, 'recon'), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`, {
      mode: 0o755,
    });
    const work = path.join(folder, 'work');
    fs.mkdirSync(work);
    const exits = path.join(folder, 'exits');
    const script = [
      'wait_port() { for _ in $(seq 1 300); do (exec 9<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }',
      "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT",
      ...lines.flatMap((line, i) => {
        const text = localise(line.text);
        const port = /--port (\d+)/.exec(text)?.[1];
        const done =
          text.endsWith('&') && port ? `wait_port ${port}; echo "${i} $?" >> "$EXITS"` : `echo "${i} $?" >> "$EXITS"`;
        // The store `recon init` made gets the 16 MB buffer pool of the tests' other stores (pglite-conf.ts):
        // PostgreSQL zeroes initdb's 128 MB at every start, ~0.4 s of CPU in each of the commands after it.
        return /^recon init\b/.test(text) ? [text, done, SMALL_POOL] : [text, done];
      }),
      // What the walkthrough leaves, for the assertions below.
      'recon ops show refund:ord_1042 --json > operation.json',
    ].join('\n');
    child = spawn('bash', ['-c', script], {
      cwd: work,
      detached: true,
      env: cleanEnv({
        PATH: `${shim}${path.delimiter}${process.env.PATH ?? '/usr/bin:/bin'}`,
        HOME: folder,
        XDG_CONFIG_HOME: path.join(folder, 'config'),
        EXITS: exits,
      }),
    });
    const r = await collect(child, { timeoutMs: 180_000 });
    const actual = new Map(
      fs
        .readFileSync(exits, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' ').map(Number) as [number, number]),
    );
    const got = lines.map((line, i) => ({ line: line.text, exit: actual.get(i) }));
    expect(got, `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toEqual(
      lines.map((line) => ({ line: line.text, exit: line.expected })),
    );

    // The operation is confirmed with the refund a person kept, and links the provider's two
    // refunds of the payment: recon's one (its answer was lost; no second was made) and the one
    // made by hand.
    // `ops show --json` is {operation, attempts, provider_transactions, observations, events}.
    const shown = JSON.parse(fs.readFileSync(path.join(work, 'operation.json'), 'utf8'));
    expect(shown.operation.state, JSON.stringify(shown)).toBe('confirmed');
    expect(shown.operation.provider_txn_ids).toContain('re_3Nx8Dup1042');
    expect(shown.provider_transactions).toHaveLength(2);
    // About twenty CLI starts, one of which creates a PGlite store: genuinely slow.
  }, 240_000);
});
