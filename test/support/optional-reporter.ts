/**
 * A vitest reporter beside the default one: after the summary, one line per optional tool whose
 * tests this run skipped because it is missing (`optional.ts`), e.g. "PgBouncer tests skipped:
 * install pgbouncer or set PGBOUNCER_BIN".
 */
import type { Reporter, TestModule, Vitest } from 'vitest/node';
import { skippedLines } from './optional.js';

export default class OptionalReporter implements Reporter {
  private vitest: Vitest | undefined;

  onInit(vitest: Vitest): void {
    this.vitest = vitest;
  }

  onTestRunEnd(testModules: readonly TestModule[]): void {
    for (const line of skippedLines(testModules.map((m) => m.moduleId))) {
      if (this.vitest) this.vitest.logger.log(line);
      else console.log(line);
    }
  }
}
