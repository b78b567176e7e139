/**
 * Start-up: `recon --version` and `recon ops list --json` on an empty embedded store, median wall
 * time as a ratio to `node -e 0` measured alongside (runs interleaved, so machine noise hits all
 * three alike). A module loader hook records every module `--version` and `--help` resolve: the
 * heavy ones (the Stripe SDK, pg, PGlite, prompts) must not be among them.
 */
import fs from 'node:fs';
import path from 'node:path';
import {
  ROOT,
  expectExit,
  median,
  mkdir,
  round,
  runNode,
  runRecon,
  type BenchContext,
  type Benchmark,
  type BenchRow,
} from './lib.js';

const HEAVY = ['stripe', 'pg', '@electric-sql/pglite', '@inquirer/prompts'];

const REGISTER = `import { register } from 'node:module';\nregister(new URL('./resolve-hook.mjs', import.meta.url));\n`;
const RESOLVE = `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  if (process.env.BENCH_MODULES_FILE) appendFileSync(process.env.BENCH_MODULES_FILE, r.url + '\\n');
  return r;
}
`;

/** The heavy packages among the modules a command resolved. */
async function heavyLoaded(ctx: BenchContext, dir: string, args: string[], cwd: string): Promise<string[]> {
  fs.writeFileSync(path.join(dir, 'register-hook.mjs'), REGISTER);
  fs.writeFileSync(path.join(dir, 'resolve-hook.mjs'), RESOLVE);
  const file = path.join(dir, `modules-${args.join('_').replace(/[^a-z]/gi, '')}.txt`);
  fs.rmSync(file, { force: true });
  const r = await runRecon(ctx, args, {
    cwd,
    nodeArgs: ['--import', path.join(dir, 'register-hook.mjs')],
    env: { BENCH_MODULES_FILE: file },
  });
  expectExit(r, `recon ${args.join(' ')} (with the module hook)`);
  const urls = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
  if (!urls.some((u) => u.endsWith('/bin/recon')))
    throw new Error(`the module hook saw nothing: cannot check what recon ${args.join(' ')} loads`);
  return HEAVY.filter((pkg) => urls.some((u) => u.includes(`/node_modules/${pkg}/`)));
}

export const startup: Benchmark = {
  name: 'startup',
  async run(ctx: BenchContext) {
    const dir = mkdir(ctx, 'startup');
    const store = `pglite:${path.join(dir, 'db')}`;
    const runs = ctx.quick ? 6 : 12;
    // First use creates and migrates the store: not what this measures.
    expectExit(
      await runRecon(ctx, ['ops', 'list', '--json', '--db', store], { cwd: dir }),
      'recon ops list (creating the store)',
    );
    const node: number[] = [];
    const version: number[] = [];
    const help: number[] = [];
    const list: number[] = [];
    const lite: number[] = [];
    // PGlite's own start on the same data folder, and the same query: the floor of any command on
    // the embedded store.
    const bareLite = `import { PGlite } from '@electric-sql/pglite';
const db = await PGlite.create(process.argv[1]);
await db.query('SELECT * FROM recon.operations ORDER BY created_at DESC, id LIMIT 50');
await db.close();`;
    for (let i = 0; i < runs + 1; i++) {
      const n = await runNode(ctx, ['-e', '0'], { cwd: dir });
      const v = await runRecon(ctx, ['--version'], { cwd: dir });
      const h = await runRecon(ctx, ['--help'], { cwd: dir });
      expectExit(v, 'recon --version');
      expectExit(h, 'recon --help');
      if (i === 0) continue; // warm the file cache
      node.push(n.ms);
      version.push(v.ms);
      help.push(h.ms);
    }
    // PGlite takes seconds to start on a busy machine: fewer runs, interleaved the same way.
    for (let i = 0; i < Math.ceil(runs / 2) + 1; i++) {
      const l = await runRecon(ctx, ['ops', 'list', '--json', '--db', store], { cwd: dir });
      const b = await runNode(ctx, ['--input-type=module', '-e', bareLite, path.join(dir, 'db')], { cwd: ROOT });
      expectExit(l, 'recon ops list --json');
      expectExit(b, 'bare PGlite.create');
      if (i === 0) continue;
      list.push(l.ms);
      lite.push(b.ms);
    }
    const base = median(node);
    const versionRatio = median(version) / base;
    const helpRatio = median(help) / base;
    const listRatio = median(list) / median(lite);
    const heavyVersion = await heavyLoaded(ctx, dir, ['--version'], dir);
    // --help loads the whole command tree (bin/recon answers a lone --version itself): still no heavy module.
    const heavyHelp = await heavyLoaded(ctx, dir, ['--help'], dir);
    const heavyList = await heavyLoaded(ctx, dir, ['ops', 'list', '--json', '--db', store], dir);
    const rows: BenchRow[] = [
      {
        bench: 'startup',
        name: `recon --version, median of ${runs} (${round(median(version), 1)} ms)`,
        value: round(versionRatio),
        unit: '× node -e 0',
        target: '≤ 2.0×',
        baseline: round(base, 1),
        baseline_unit: 'ms',
        baseline_of: 'node -e 0',
        ratio: round(versionRatio),
        pass: versionRatio <= 2.0,
      },
      {
        bench: 'startup',
        name: `recon --help, median of ${runs} (${round(median(help), 1)} ms)`,
        value: round(helpRatio),
        unit: '× node -e 0',
        target: '≤ 1.3×',
        baseline: round(base, 1),
        baseline_unit: 'ms',
        baseline_of: 'node -e 0',
        ratio: round(helpRatio),
        pass: helpRatio <= 1.3,
      },
      {
        bench: 'startup',
        name: `recon ops list --json, empty embedded store, median of ${list.length} (${round(median(list), 1)} ms)`,
        value: round(listRatio),
        unit: '× bare PGlite.create',
        target: '≤ 1.1×',
        baseline: round(median(lite), 1),
        baseline_unit: 'ms',
        baseline_of: 'PGlite.create on the same folder + the same query, plain node',
        ratio: round(listRatio),
        pass: listRatio <= 1.1,
        note: `loads ${heavyList.join(', ') || 'no heavy module'} (PGlite is expected: it is the store); ${round(median(list) / base, 2)}× node -e 0`,
      },
      {
        bench: 'startup',
        name: `heavy modules loaded by --version (${HEAVY.join(', ')})`,
        value: heavyVersion.length,
        unit: 'modules',
        target: '= 0',
        baseline: null,
        pass: heavyVersion.length === 0,
        note: heavyVersion.length ? `loaded: ${heavyVersion.join(', ')}` : undefined,
      },
      {
        bench: 'startup',
        name: 'heavy modules loaded by --help (the whole command tree)',
        value: heavyHelp.length,
        unit: 'modules',
        target: '= 0',
        baseline: null,
        pass: heavyHelp.length === 0,
        note: heavyHelp.length ? `loaded: ${heavyHelp.join(', ')}` : undefined,
      },
    ];
    fs.rmSync(dir, { recursive: true, force: true });
    return rows;
  },
};
