import type { Command } from 'commander';
import { ResultExit } from '../src/errors.js';
import type { Check } from '../src/core/report/doctor.js';
import { action } from './support/action.js';
import type { Deps } from './support/deps.js';
import { printJson, println } from './support/io.js';
import { styleFor } from './support/style.js';

export function register(program: Command): void {
  program
    .command('doctor')
    .description(
      'check the store, the config, each provider (key, rate limit, clock) and webhook secrets; say what to fix',
    )
    .addHelpText(
      'after',
      "\nExits with the code of the first failed check: 2 configuration (config, secrets, a refused key, the clock), 5 provider unreachable, 6 store missing, locked or needing `recon db migrate`.\n\nExample:\n  $ recon doctor\n  $ recon doctor --json | jq '.checks[] | select(.ok | not)'",
    )
    .action(
      action(async (_a, _o, deps) => {
        const checks = await runDoctor({ config: deps.globals.config, db: deps.globals.db }, deps);
        const failed = checks.filter((c) => !c.ok && !c.warn);
        const { redact } = await import('../src/config/redact.js');
        if (deps.globals.json) printJson(deps.io, { ok: failed.length === 0, checks });
        else {
          const s = await styleFor(deps.io);
          for (const c of checks) {
            const mark = c.ok ? s.green('ok  ') : c.warn ? s.yellow('warn') : s.red('FAIL');
            println(deps.io, redact(`${mark}  ${c.name}: ${c.detail}`));
            if (!c.ok && c.fix) println(deps.io, `      fix: ${c.fix}`);
          }
        }
        if (failed.length) throw new ResultExit(failed[0].exit_code ?? 1, `check ${failed[0].name} failed`);
      }),
    );
}

export interface DoctorOptions {
  /** --config: the config file to check (else found as every command finds it). */
  config?: string;
  /** --db: the store to check. */
  db?: string;
}

/** Every check, in order, each with what to fix; the config is read here, not by the action. */
export async function runDoctor(o: DoctorOptions, deps: Deps): Promise<Check[]> {
  const { runDoctor: checks } = await import('../src/core/report/doctor.js');
  return checks({ env: deps.env, cwd: deps.cwd, configFlag: o.config, dbFlag: o.db, now: deps.now });
}
