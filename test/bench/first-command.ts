/**
 * The first command: `recon demo` (the README's first command, on a `memory:` store) and `recon init`
 * (a new `pglite:` store), wall time of the built CLI, both made from the migrated store template
 * (src/store/template.ts). Beside each, in the same run, PGlite's own floor: a bare `PGlite.create`
 * (in memory for the demo, on a new folder for init) and one query; each command runs right after its
 * baseline, and the row's ratio is the median of the per-pair ratios.
 */
import fs from 'node:fs';
import path from 'node:path';
import { templatePath } from '../../src/store/template.js';
import {
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

const BARE = `import { PGlite } from '@electric-sql/pglite';
const db = await PGlite.create(process.argv[1] || undefined);
await db.query('SELECT 1');
await db.close();`;

export const firstCommand: Benchmark = {
  name: 'first-command',
  async run(ctx: BenchContext): Promise<BenchRow[]> {
    if (!fs.existsSync(templatePath()))
      throw new Error(`no store template at ${templatePath()}: npm run build makes it (scripts/store-template.mjs)`);
    const dir = mkdir(ctx, 'first-command');
    // From the repository root, where @electric-sql/pglite resolves.
    const bare = ['--input-type=module', '-e', BARE];
    const runs = ctx.quick ? 3 : 7;
    const demo: number[] = [];
    const demoBase: number[] = [];
    const demoRatios: number[] = [];
    const init: number[] = [];
    const initBase: number[] = [];
    const initRatios: number[] = [];
    // Each baseline is measured once in --quick and every third round in the full run (a bare
    // PGlite.create runs initdb in WebAssembly, ~5 s: measured every round, the baselines were two
    // thirds of this benchmark's time); each run is paired with the latest. The baselines are the
    // ratio reported beside the rows; the targets are wall times.
    const baselineRound = (i: number) => (ctx.quick ? i === 0 : i % 3 === 0);
    let b!: Awaited<ReturnType<typeof runNode>>;
    let bi!: Awaited<ReturnType<typeof runNode>>;
    for (let i = 0; i < runs; i++) {
      if (baselineRound(i)) b = await runNode(ctx, [...bare, '']);
      expectExit(b, 'bare PGlite.create (memory)');
      const d = await runRecon(ctx, ['demo'], { cwd: dir });
      expectExit(d, 'recon demo');
      demo.push(d.ms);
      demoBase.push(b.ms);
      demoRatios.push(d.ms / b.ms);

      const project = path.join(dir, `init-${i}`);
      fs.mkdirSync(project);
      if (baselineRound(i)) bi = await runNode(ctx, [...bare, path.join(project, 'bare-db')]);
      expectExit(bi, 'bare PGlite.create (new folder)');
      const r = await runRecon(ctx, ['init', '--json'], { cwd: project });
      expectExit(r, 'recon init');
      const out = JSON.parse(r.stdout) as { schema_version: number; applied: number[] };
      if (out.applied.length === 0 || out.applied.at(-1) !== out.schema_version)
        throw new Error(`recon init did not report its migrations: ${r.stdout}`);
      init.push(r.ms);
      initBase.push(bi.ms);
      initRatios.push(r.ms / bi.ms);
      fs.rmSync(project, { recursive: true, force: true });
    }
    const s = (ms: number) => round(ms / 1000, 2);
    return [
      {
        bench: 'first-command',
        name: 'recon demo wall time (memory: store from the template)',
        value: s(median(demo)),
        unit: 's',
        target: '≤ 2.0 s',
        baseline: s(median(demoBase)),
        baseline_of: 'bare PGlite.create + one query',
        ratio: round(median(demoRatios), 2),
        pass: median(demo) <= 2000,
      },
      {
        bench: 'first-command',
        name: 'recon init wall time (new pglite: store from the template)',
        value: s(median(init)),
        unit: 's',
        target: '≤ 1.5 s',
        baseline: s(median(initBase)),
        baseline_of: 'bare PGlite.create on a new folder + one query',
        ratio: round(median(initRatios), 2),
        pass: median(init) <= 1500,
      },
    ];
  },
};
