/**
 * The error classes of recon, one per exit code of SPEC §7. Only `bin/main.ts` maps them to
 * exit codes and messages; everything else throws them with a message that names the field
 * and the fix.
 */
/**
 * The exit codes of SPEC §7 other than 0: 7 is "outcome unknown" (`ops submit`, `retry`: the request
 * went out and its answer was lost), 8 is `run`'s "needs a human", 130 an interruption.
 */
export type ExitCode = 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 130;

export class ReconError extends Error {
  readonly exitCode: ExitCode = 1;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Exit 2: unknown flag, bad value, bad duration, malformed input. */
export class UsageError extends ReconError {
  override readonly exitCode = 2;
}

/** Exit 3: operation or transaction not found. */
export class NotFoundError extends ReconError {
  override readonly exitCode = 3;
}

/** Exit 4: refused by a rule (payload mismatch, retry not allowed, attach mismatch, wrong state). */
export class RefusedError extends ReconError {
  override readonly exitCode = 4;
  constructor(
    message: string,
    readonly rule?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Exit 5: the provider could not be reached or answered with errors. */
export class ProviderUnavailableError extends ReconError {
  override readonly exitCode = 5;
}

/** Exit 6: the store is locked by another process or unreachable. */
export class StoreLockedError extends ReconError {
  override readonly exitCode = 6;
}

/**
 * Exit 6: no store was named and none was found here or above (`recon init` makes one). Its
 * `--json` error type stays `StoreLockedError`, the class of exit 6 (SPEC §7).
 */
export class StoreMissingError extends StoreLockedError {
  override readonly name = 'StoreLockedError';
}

/** Exit 130: a person interrupted (Ctrl-C at a prompt). */
export class CancelledError extends ReconError {
  override readonly exitCode = 130;
}

/** A worker's lease was lost (expired and/or claimed by another worker): its result must not be written. */
export class LeaseLostError extends ReconError {
  override readonly exitCode = 4;
}

/** The exit code of SPEC §7 for an error: its class's, or 1 for anything unexpected. */
export function exitCodeOf(err: unknown): ExitCode {
  return err instanceof ReconError ? err.exitCode : 1;
}

/**
 * Not an error: the command has reported its whole result (stdout, stderr), and the exit code
 * tells a script what that result was (SPEC §7): `run` 5 a provider was unavailable (wins over
 * 8), 8 operations need a human, 1 some operations failed unexpectedly; `retry` 4 the rule did
 * not allow the retry; `ops submit` and `retry` 7 the attempt ended outcome_unknown; `lookup` 5 the provider was unavailable; `audit verify` 4 a chain is
 * broken; `audit duplicates` 8 duplicates found; `attach` 4 a "no" at the confirmation; `doctor`
 * the code of its first failed check; `demo` 1 a check failed. Thrown after the output;
 * bin/main.ts sets the exit code and prints nothing more.
 */
export class ResultExit extends Error {
  constructor(
    readonly exitCode: ExitCode,
    /** What the result was, for whoever reads the code or catches it in a test; never printed. */
    readonly why: string,
  ) {
    super(`exit ${exitCode}: ${why}`);
    this.name = 'ResultExit';
  }
}
