/**
 * What the demo reports and how an incident talks to whoever shows it. The demo is also a smoke
 * test: every claim it narrates is a check against the store or the provider's ledger, and the
 * command exits 1 when one fails. No terminal code here: steps and tables go to a listener.
 */
import { canonicalJson } from '../lib/canonical.js';
import type { Duplicate } from '../core/audit/duplicates.js';
import { recordOperations, type RecordedOperation } from '../core/intake/record.js';
import { getOperation } from '../core/journal/operations.js';
import type { RunSummary } from '../core/reconcile/run.js';
import { submitOperation, type SubmitOutcome } from '../core/attempt/submit.js';
import { validateOperation } from '../core/intake/validate.js';
import type { OperationDetail, OperationJson } from '../core/journal/views.js';
import type { DemoWorld } from './world.js';

export interface Check {
  name: string;
  ok: boolean;
  expected: unknown;
  actual: unknown;
}

export interface IncidentReport {
  /** The incident's number in SPEC §8. */
  number: number;
  title: string;
  checks: Check[];
  /** What the provider holds for this incident at the end, e.g. `{refunds: 1}`. */
  ledger: Record<string, number>;
}

export interface DemoReport {
  ok: boolean;
  incidents: IncidentReport[];
  store: string;
  duration_ms: number;
}

export interface DemoStep {
  /** The incident the step belongs to; absent for steps of the whole demo (`recon run`, tables). */
  incident?: number;
  text: string;
  /** The first line of an incident or a phase. */
  heading?: boolean;
}

export type DemoTable =
  | { kind: 'operations'; title: string; operations: OperationJson[]; now: Date }
  | { kind: 'run'; title: string; summary: RunSummary }
  | { kind: 'show'; title: string; detail: OperationDetail }
  | { kind: 'duplicates'; title: string; duplicates: Duplicate[] };

export interface DemoListener {
  onStep(step: DemoStep): void | Promise<void>;
  onTable(table: DemoTable): void | Promise<void>;
  /** Called for every check as it is made, so a failure shows next to the step that made it. */
  onCheck?(incident: number, check: Check): void | Promise<void>;
}

/** The part of the demo one incident sees: its world, its narration, its checks. */
export class Stage {
  readonly report: IncidentReport;

  constructor(
    readonly world: DemoWorld,
    private readonly listener: DemoListener,
    number: number,
    title: string,
  ) {
    this.report = { number, title, checks: [], ledger: {} };
  }

  async heading(): Promise<void> {
    await this.listener.onStep({ incident: this.report.number, text: this.report.title, heading: true });
  }

  async say(text: string): Promise<void> {
    await this.listener.onStep({ incident: this.report.number, text });
  }

  async table(t: DemoTable): Promise<void> {
    await this.listener.onTable(t);
  }

  /** Compares canonical JSON values, so objects compare whatever their key order. */
  async check(name: string, expected: unknown, actual: unknown): Promise<boolean> {
    const c: Check = { name, ok: sameValue(expected, actual), expected, actual: actual ?? null };
    this.report.checks.push(c);
    await this.listener.onCheck?.(this.report.number, c);
    return c.ok;
  }

  /** Records the provider's count, and checks it: asserting on the provider's ledger is the point (SPEC §1.7). */
  async ledger(what: string, expected: number, actual: number): Promise<void> {
    this.report.ledger[what] = actual;
    await this.check(`the provider's ledger holds ${what}: ${expected}`, expected, actual);
  }

  /** `recon ops record`, through the same validation and core function. */
  async record(raw: Record<string, unknown>): Promise<RecordedOperation> {
    const input = validateOperation(raw, Object.keys(this.world.config.providers));
    const [recorded] = await recordOperations(this.world.ctx, [input]);
    return recorded;
  }

  /** `recon ops submit`. */
  async submit(id: string): Promise<SubmitOutcome> {
    const { ctx } = this.world;
    const op = await getOperation(ctx.db, id);
    return submitOperation(ctx, await this.world.provider(op.provider), id);
  }
}

/** One incident of SPEC §8, played in phases so the incidents that wait for a window wait together. */
export interface Scene {
  readonly stage: Stage;
  /**
   * For a scene whose setup sits through a wait it cannot shorten (the Stripe SDK's half-second pause
   * before it retries a dropped connection): resolves once that wait has begun. Such scenes start
   * first, and the others once every such wait has begun, to run during it (play.ts).
   */
  readonly waiting?: Promise<void>;
  /** Everything before the first `recon run`. */
  setup(): Promise<void>;
  /** After each reconciliation pass: 1 inside the uncertainty window, 2 just past it. */
  afterRun?(pass: 1 | 2, summary: RunSummary): Promise<void>;
  /** After both passes: the final state and the ledger. */
  finish?(): Promise<void>;
}

/** A value canonical JSON refuses (NaN from a missing row) is a failed check, not a crash of the demo. */
function sameValue(a: unknown, b: unknown): boolean {
  try {
    return canonicalJson(a ?? null) === canonicalJson(b ?? null);
  } catch {
    return false;
  }
}

export function decisionOf(summary: RunSummary, id: string) {
  return summary.decisions.find((d) => d.id === id);
}

export function describeOutcome(r: SubmitOutcome): string {
  const why = r.result.error_class
    ? ` (${r.result.error_class}${r.result.http_status ? ` ${r.result.http_status}` : ''})`
    : '';
  return `${r.operation.state}${why}`;
}
