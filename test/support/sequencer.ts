/**
 * The order vitest starts the files in (vitest.config.ts `sequence.sequencer`): vitest's own
 * (BaseSequencer: the files that took longest in the last run first, from its cache; without one,
 * as in CI's clean clone, the largest files first), except that the files below start first when the
 * cache has no duration for them. Their time is waiting and child processes, not lines: by size
 * they came last (campaign.test.ts, 40 lines, was the run's last file, 19 s with the other worker
 * idle after the unit files), and a long file started last holds up the whole run.
 */
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const LONG_FOR_THEIR_SIZE = [
  // A small seed of the fault campaign: workers killed and restarted, a settle time.
  'test/integration/campaign.test.ts',
  // The README's walkthrough: about twenty CLI processes one after the other.
  'test/integration/readme.test.ts',
];

export default class LongFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const first = (f: TestSpecification) => {
      const file = path.relative(this.ctx.config.root, f.moduleId);
      return LONG_FOR_THEIR_SIZE.includes(file) && !this.ctx.cache.getFileTestResults(`${f.project.name}:${file}`);
    };
    return [...sorted.filter(first), ...sorted.filter((f) => !first(f))];
  }
}
