/**
 * Shared pieces of `npm run bench`: the result row, the context every benchmark gets (quick mode,
 * the run's PostgreSQL server, a scratch folder), timing helpers, and running the built CLI as a
 * child process with its peak RSS measured.
 *
 * Nothing here imports vitest: the bench runs as plain node from dist/.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { cleanEnv } from '../support/cli.js';
import { createDatabase } from '../support/postgres.js';
import type { Db } from '../../src/store/db.js';
import { openStore } from '../../src/store/open.js';

/**
 * The repository root, found from this file whether it runs as source or from dist/ (where
 * test/support/cli.ts's ROOT would point at dist/).
 */
export const ROOT = (() => {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error('bench: cannot find the repository root (package.json)');
    dir = up;
  }
  return dir;
})();
const BIN = path.join(ROOT, 'bin', 'recon');

/** One line of the result table and of bench-results.json. */
export interface BenchRow {
  /** The benchmark this row belongs to (e.g. `list-unresolved`). */
  bench: string;
  name: string;
  value: number;
  unit: string;
  /** Human-readable target, e.g. `< 50 ms`; `-` for figures reported for information. */
  target: string;
  /** The same figure measured in the same run without the thing under test (null when none applies). */
  baseline: number | null;
  /** What the baseline is. */
  baseline_of?: string;
  /** When the baseline is not in `unit` (e.g. a ratio measured against a time). */
  baseline_unit?: string;
  /**
   * value ÷ baseline, or how the row compares with its baseline when that is not a plain quotient
   * (e.g. a time ratio); filled from value and baseline when left out.
   */
  ratio?: number | null;
  /** null when the row has no target. */
  pass: boolean | null;
  note?: string;
}

export interface BenchContext {
  quick: boolean;
  /** Base URL of the run's PostgreSQL server. */
  pgUrl: string;
  /** Scratch folder, removed at the end of the run. */
  tmp: string;
  log(message: string): void;
  /** The databases this benchmark made (freshPgStore), dropped when it ends (dropBenchDatabases). */
  databases: string[];
}

export interface Benchmark {
  name: string;
  run(ctx: BenchContext): Promise<BenchRow[]>;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** A fresh, migrated database on the run's server (dropped by dropBenchDatabases when its benchmark ends). */
export async function freshPgStore(ctx: BenchContext): Promise<{ url: string; db: Db }> {
  const name = `recon_bench_${Math.random().toString(36).slice(2, 10)}`;
  const url = await createDatabase(ctx.pgUrl, name);
  ctx.databases.push(name);
  return { url, db: await openStore(url) };
}

/**
 * Drops the databases the benchmark of `ctx` made (each benchmark has its own list: one that runs
 * beside others keeps its database while they end). A million-row table left behind is vacuumed and
 * analysed by autovacuum while the next benchmark runs, and its CPU counted against that one. Then
 * the server writes its dirty buffers (CHECKPOINT) and the kernel its dirty pages (sync) now, rather
 * than while the next one measures: after list-unresolved (a million rows written, then dropped) the
 * claims row and its baseline both ran ~20% slower without this (1,923/s against 2,555/s after
 * write-path alone).
 */
export async function dropBenchDatabases(ctx: BenchContext): Promise<void> {
  if (ctx.databases.length === 0) return;
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: ctx.pgUrl });
  await client.connect();
  try {
    for (const name of ctx.databases.splice(0)) await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await client.query('CHECKPOINT');
  } finally {
    await client.end();
  }
  spawnSync('sync', { stdio: 'ignore' });
}

export function mkdir(ctx: BenchContext, name: string): string {
  const dir = path.join(ctx.tmp, `${name}-${Math.random().toString(36).slice(2, 8)}`);
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/** A config file with one stripe provider pointed at a sandbox. */
export function writeStripeConfig(
  dir: string,
  o: { db: string; apiBase: string; apiKey: string; provider?: Record<string, unknown> },
): string {
  const file = path.join(dir, 'recon.config.json');
  const config = {
    db: o.db,
    providers: { stripe: { type: 'stripe', apiKey: o.apiKey, apiBase: o.apiBase, ...o.provider } },
  };
  fs.writeFileSync(file, JSON.stringify(config, null, 2));
  return file;
}

export interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
  /** Peak resident set size (VmHWM) in MB, when asked for with `measureRss`. */
  peakRssMb?: number;
  /** CPU time (user + system) of the process, in ms, when asked for with `measureRss`. */
  cpuMs?: number;
  /** The largest V8 heap in use seen (sampled every 20 ms and at exit), in MB, with `measureRss`. */
  peakHeapMb?: number;
}

export interface ChildOptions {
  env?: Record<string, string | undefined>;
  cwd?: string;
  input?: string;
  /** Preload a hook that writes /proc/self/status VmHWM and the CPU time used to a file when the process exits. */
  measureRss?: boolean;
  /** Extra node flags before the script (e.g. --cpu-prof). */
  nodeArgs?: string[];
  timeoutMs?: number;
}

/** The preload: `exit` fires after main() has finished, so VmHWM then is the whole run's peak. */
// The heap is sampled with v8.getHeapStatistics(), not process.memoryUsage(): the latter also reads
// the RSS from /proc at every sample, and 50 of those a second were counted as recon's own CPU
// (node --cpu-prof of recon run: 3% of it against an instant provider). Same number (heapUsed).
const RSS_HOOK = `
import { readFileSync, writeFileSync } from 'node:fs';
import { getHeapStatistics } from 'node:v8';
let heapPeak = 0;
const sample = () => (heapPeak = Math.max(heapPeak, getHeapStatistics().used_heap_size));
setInterval(sample, 20).unref();
process.on('exit', () => {
  sample();
  const m = /VmHWM:\\s+(\\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  const cpu = process.cpuUsage();
  if (m && process.env.BENCH_RSS_FILE) writeFileSync(process.env.BENCH_RSS_FILE, JSON.stringify({ hwmKb: Number(m[1]), cpuMs: (cpu.user + cpu.system) / 1000, heapPeak }));
});
`;

function rssHook(ctx: BenchContext): string {
  const file = path.join(ctx.tmp, 'rss-hook.mjs');
  if (!fs.existsSync(file)) fs.writeFileSync(file, RSS_HOOK);
  return file;
}

/** Runs `node bin/recon ARGS` (the built CLI, as users run it) and waits for it. */
export function runRecon(ctx: BenchContext, args: string[], o: ChildOptions = {}): Promise<ChildResult> {
  return runNode(ctx, [BIN, ...args], o);
}

export function runNode(ctx: BenchContext, args: string[], o: ChildOptions = {}): Promise<ChildResult> {
  // BENCH_NODE_ARGS: node options for every process started (run.ts).
  const nodeArgs = [...(o.nodeArgs ?? []), ...(process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [])];
  const env: Record<string, string | undefined> = { ...o.env };
  let rssFile: string | undefined;
  if (o.measureRss) {
    rssFile = path.join(ctx.tmp, `rss-${process.hrtime.bigint()}.txt`);
    nodeArgs.push('--import', rssHook(ctx));
    env.BENCH_RSS_FILE = rssFile;
  }
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [...nodeArgs, ...args], {
      cwd: o.cwd ?? ROOT,
      env: cleanEnv(env),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 300_000);
    child.on('error', reject);
    child.on('close', (code) => {
      const ms = performance.now() - t0;
      clearTimeout(timer);
      let peakRssMb: number | undefined;
      let cpuMs: number | undefined;
      let peakHeapMb: number | undefined;
      if (rssFile && fs.existsSync(rssFile)) {
        const m = JSON.parse(fs.readFileSync(rssFile, 'utf8')) as { hwmKb: number; cpuMs: number; heapPeak: number };
        [peakRssMb, cpuMs, peakHeapMb] = [m.hwmKb / 1024, m.cpuMs, m.heapPeak / 1024 / 1024];
        fs.rmSync(rssFile, { force: true });
      }
      resolve({ code, stdout, stderr, ms, peakRssMb, cpuMs, peakHeapMb });
    });
    if (o.input !== undefined) child.stdin.end(o.input);
    else child.stdin.end();
  });
}

/** Fails the benchmark with the child's output when it did not exit with one of `codes`. */
export function expectExit(r: ChildResult, what: string, codes: number[] = [0]): void {
  if (r.code === null || !codes.includes(r.code)) {
    throw new Error(`${what} exited with ${r.code}: ${r.stderr.trim().slice(-1500)}`);
  }
}

/**
 * canonicalJson({amount, currency, payment_intent}) in SQL (keys sorted, no whitespace), so bulk
 * inserts carry the real payload_hash and the rule's "payload unchanged" check holds.
 */
export function payloadSql(piExpr: string, amountExpr: string): { payload: string; hash: string } {
  const text = `'{"amount":' || (${amountExpr})::text || ',"currency":"usd","payment_intent":"' || ${piExpr} || '"}'`;
  return { payload: `(${text})::jsonb`, hash: `encode(sha256(convert_to(${text}, 'UTF8')), 'hex')` };
}

/**
 * CPU time (ms) used so far by the run's PostgreSQL server and its finished backends: the
 * postmaster's own time plus its reaped children's (/proc/PID/stat utime, stime, cutime, cstime).
 * Lets a benchmark state its cost per operation whatever else the machine is doing.
 */
export function postgresCpuMs(pgUrl: string): number | null {
  const pid = postmasterPid(pgUrl);
  if (pid === null) return null;
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After "pid (comm) ", field 3 (state) is index 0: utime 14, stime 15, cutime 16, cstime 17 → 11..14.
  const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

/**
 * CPU time (ms) used so far by the run's PostgreSQL server as a whole: postmaster, its finished
 * backends (postgresCpuMs) and the backends still running (a server's pooled connections, which
 * postgresCpuMs counts only once they exit).
 */
export function postgresTreeCpuMs(pgUrl: string): number | null {
  const reaped = postgresCpuMs(pgUrl);
  const pid = postmasterPid(pgUrl);
  if (reaped === null || pid === null) return null;
  let live = 0;
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[1] === pid) live += Number(fields[11]) + Number(fields[12]);
  }
  return reaped + (live * 1000) / 100;
}

/** CPU time (ms) used so far by one live process (/proc/PID/stat utime + stime). */
export function processCpuMs(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

function postmasterPid(pgUrl: string): string | null {
  const port = new URL(pgUrl).port;
  const tmp = os.tmpdir();
  const dir = fs
    .readdirSync(tmp)
    .filter((d) => d.startsWith('recon-pg-'))
    .map((d) => path.join(tmp, d))
    .find((d) => fs.existsSync(path.join(d, `.s.PGSQL.${port}`)));
  const pidFile = dir && path.join(dir, 'data', 'postmaster.pid');
  return pidFile && fs.existsSync(pidFile) ? fs.readFileSync(pidFile, 'utf8').split('\n')[0].trim() : null;
}
