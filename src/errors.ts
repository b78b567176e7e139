/**
 * The error classes of recon, one per exit code of SPEC §7. Only `bin/recon` maps them to
 * exit codes and messages; everything else throws them with a message that names the field
 * and the fix.
 */
export class ReconError extends Error {
  readonly exitCode: number = 1;
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

/** Exit 130: a person interrupted (Ctrl-C at a prompt). */
export class CancelledError extends ReconError {
  override readonly exitCode = 130;
}

/** A worker's lease was lost (expired and/or claimed by another worker): its result must not be written. */
export class LeaseLostError extends ReconError {
  override readonly exitCode = 4;
}

export function exitCodeOf(err: unknown): number {
  return err instanceof ReconError ? err.exitCode : 1;
}
