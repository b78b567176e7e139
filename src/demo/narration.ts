/**
 * The narration of scenes played at once, told as if they had been played one after the other, in
 * the order they were cast: the first unfinished scene speaks straight through; a later one's steps,
 * tables and checks are held until every scene cast before it has finished, then told in the order
 * it made them. Everything goes out through the one listener, one thing at a time.
 */
import type { DemoListener } from './stage.js';

type Line = () => void | Promise<void>;

export class Narration {
  /** What has been told so far: each line is told after the one before it. */
  private told: Promise<void> = Promise.resolve();
  /** The first scene that has not finished: its lines, and any earlier scene's, go straight out. */
  private head = 0;
  private readonly held: Line[][] = [];
  private readonly finished: boolean[] = [];

  constructor(private readonly listener: DemoListener) {}

  /** The listener for the next scene cast. */
  lane(): DemoListener {
    const i = this.held.length;
    this.held.push([]);
    this.finished.push(false);
    const l = this.listener;
    return {
      onStep: (step) => this.say(i, () => l.onStep(step)),
      onTable: (table) => this.say(i, () => l.onTable(table)),
      onCheck: (incident, check) => this.say(i, () => l.onCheck?.(incident, check)),
    };
  }

  /**
   * Waits for each scene's part, played at once (`parts[i]`, the part of the scene that got the i-th
   * lane), and for everything to be told; rejects with the first part's error, once all have finished.
   */
  async together(parts: Promise<void>[]): Promise<void> {
    const results = await Promise.allSettled(parts.map((part, i) => part.finally(() => this.finish(i))));
    await this.told;
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  private say(i: number, line: Line): Promise<void> {
    if (i > this.head) {
      this.held[i].push(line);
      return Promise.resolve();
    }
    return this.tell(line);
  }

  private finish(i: number): void {
    this.finished[i] = true;
    while (this.head < this.finished.length && this.finished[this.head]) {
      this.head++;
      for (const line of this.held[this.head]?.splice(0) ?? []) void this.tell(line);
    }
  }

  private tell(line: Line): Promise<void> {
    this.told = this.told.then(line);
    return this.told;
  }
}
