/**
 * Fault injection shared by the sandbox providers. Each fault reproduces one way a real call ends
 * without a clear answer (SPEC §8): the provider committed and the connection died, the request
 * never arrived, the answer was slow, the provider erred, the object was committed but not yet
 * indexed, or the client died while waiting.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dropConnection, sleep } from './http.js';

export type Fault =
  /** Create the object, then destroy the socket without a response. */
  | { kind: 'commit_then_drop' }
  /** Destroy the socket; create nothing. */
  | { kind: 'drop_before_commit' }
  /** Delay the response (after commit); the idempotency key stays "in use" meanwhile. */
  | { kind: 'delay'; ms: number }
  /** Answer this HTTP status without committing (429 carries `Retry-After: 1`). */
  | { kind: 'status'; status: number }
  /**
   * Commit; the object is invisible to list/lookup endpoints for `ms` (delayed indexing); GET by id works.
   * With `drop`, the connection then dies without a response, as in commit_then_drop: the caller's
   * outcome is unknown and its lookup finds nothing (SPEC §8 incident 3).
   */
  | { kind: 'hide'; ms: number; drop?: boolean }
  /** Commit, then keep the response open until `release()` (or until the client goes away). */
  | { kind: 'hold' }
  /** Commit with this object status instead of the default (a `pending` refund, a `processing` shipment). */
  | { kind: 'initial_status'; status: string };

export interface InjectOptions {
  /** How many create requests it applies to. Default 1; with `idempotencyKey`, every request with that key until `clear()`. */
  times?: number;
  /** Only requests carrying this idempotency key. */
  idempotencyKey?: string;
}

export interface FaultQueue {
  /** Apply `fault` to the next `times` (default 1) create requests matching the options (default: any). */
  inject(fault: Fault, opts?: InjectOptions): void;
  /** Release held responses. */
  release(): void;
  /** Drop queued faults and release held responses. */
  clear(): void;
  /** Queued fault applications not yet used (a sticky per-key fault counts once). */
  pending(): number;
  /** Responses currently held by a `hold` fault. */
  held(): number;
}

interface Entry {
  fault: Fault;
  remaining: number;
  idempotencyKey?: string;
}

const KINDS = new Set(['commit_then_drop', 'drop_before_commit', 'delay', 'status', 'hide', 'hold', 'initial_status']);

/** Validates a fault from outside (the admin HTTP API); throws with the field at fault. */
export function parseFault(value: unknown): Fault {
  const f = value as Record<string, unknown> | null;
  if (!f || typeof f !== 'object' || typeof f.kind !== 'string' || !KINDS.has(f.kind)) {
    throw new Error(`fault.kind must be one of ${[...KINDS].join(', ')}`);
  }
  if ((f.kind === 'delay' || f.kind === 'hide') && !(Number.isInteger(f.ms) && (f.ms as number) >= 0)) {
    throw new Error(`fault.ms must be a non-negative integer for ${f.kind}`);
  }
  if (f.kind === 'hide' && f.drop !== undefined && typeof f.drop !== 'boolean') {
    throw new Error('fault.drop must be a boolean for hide');
  }
  if (
    f.kind === 'status' &&
    !(Number.isInteger(f.status) && (f.status as number) >= 400 && (f.status as number) < 600)
  ) {
    throw new Error('fault.status must be an HTTP error status (400–599)');
  }
  if (f.kind === 'initial_status' && typeof f.status !== 'string') {
    throw new Error('fault.status must be a string for initial_status');
  }
  return f as unknown as Fault;
}

export class SandboxFaults implements FaultQueue {
  private entries: Entry[] = [];
  private readonly holds = new Set<() => void>();

  inject(fault: Fault, opts: InjectOptions = {}): void {
    parseFault(fault);
    const times = opts.times ?? (opts.idempotencyKey !== undefined ? Infinity : 1);
    if (!(times > 0)) throw new Error('times must be positive');
    this.entries.push({ fault, remaining: times, idempotencyKey: opts.idempotencyKey });
  }

  /** Takes the first queued fault that matches this create request, if any. */
  take(idempotencyKey: string | undefined): Fault | undefined {
    const i = this.entries.findIndex((e) => e.idempotencyKey === undefined || e.idempotencyKey === idempotencyKey);
    if (i < 0) return undefined;
    const entry = this.entries[i];
    if (--entry.remaining <= 0) this.entries.splice(i, 1);
    return entry.fault;
  }

  release(): void {
    const waiting = [...this.holds];
    this.holds.clear();
    for (const resolve of waiting) resolve();
  }

  clear(): void {
    this.entries = [];
    this.release();
  }

  pending(): number {
    return this.entries.reduce((n, e) => n + (Number.isFinite(e.remaining) ? e.remaining : 1), 0);
  }

  held(): number {
    return this.holds.size;
  }

  /** Resolves on `release()`, or when the client closes the connection (a SIGKILLed client). */
  waitForRelease(res: ServerResponse): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.holds.delete(done);
        res.off('close', done);
        resolve();
      };
      this.holds.add(done);
      res.once('close', done);
    });
  }
}

/** What a create endpoint produced; the pipeline decides when and whether the client sees it. */
export interface CreateOutcome {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  /** Marks the created object as not yet indexed until this clock time (ms); absent on replays and errors. */
  hideUntil?: (untilMs: number) => void;
  /** Called just before the answer would be written: saves the idempotent response and frees the key. */
  finish(): void;
}

export interface CreatePipeline {
  faults: SandboxFaults;
  req: IncomingMessage;
  res: ServerResponse;
  idempotencyKey: string | undefined;
  now: () => number;
  /** Formats the answer for a `status` fault (nothing committed, nothing saved). */
  faultResponse(status: number): { body: unknown; headers?: Record<string, string> };
  /** Runs the endpoint (idempotency check and commit). */
  execute(fault: Fault | undefined): Promise<CreateOutcome>;
  send(status: number, body: unknown, headers?: Record<string, string>): void;
}

/** Runs one create request through the fault queue: pre-commit faults, the endpoint, post-commit faults. */
export async function runCreate(p: CreatePipeline): Promise<void> {
  const fault = p.faults.take(p.idempotencyKey);
  if (fault?.kind === 'drop_before_commit') {
    dropConnection(p.req, p.res);
    return;
  }
  if (fault?.kind === 'status') {
    const { body, headers } = p.faultResponse(fault.status);
    p.send(fault.status, body, { ...(fault.status === 429 ? { 'Retry-After': '1' } : {}), ...headers });
    return;
  }
  const outcome = await p.execute(fault);
  if (fault?.kind === 'hide') outcome.hideUntil?.(p.now() + fault.ms);
  if (fault?.kind === 'commit_then_drop' || (fault?.kind === 'hide' && fault.drop)) {
    // The provider finished (and saved the idempotent answer) before the connection died.
    outcome.finish();
    dropConnection(p.req, p.res);
    return;
  }
  if (fault?.kind === 'delay') await sleep(fault.ms);
  if (fault?.kind === 'hold') await p.faults.waitForRelease(p.res);
  outcome.finish();
  p.send(outcome.status, outcome.body, outcome.headers);
}
