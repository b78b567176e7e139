import { RefusedError, UsageError } from '../../errors.js';

/** `--force --reason TEXT`: a decision made although recon's checks disagree, and why. */
export interface Force {
  force?: boolean;
  reason?: string;
}

/** A forced decision without its reason is a usage error: the reason goes into the audit trail. */
export function checkForce(o: Force): Force {
  if (o.force && !o.reason) throw new UsageError('--reason: required with --force (it goes into the audit trail)');
  return o;
}

/** Refuses (exit 4) when there are problems, unless forced with a reason for the audit trail. */
export function refuseUnlessForced(problems: string[], o: Force, what: string, doIt: string, rule: string): void {
  checkForce(o);
  if (problems.length && !o.force)
    throw new RefusedError(`${what}: ${problems.join('; ')}; use --force --reason TEXT to ${doIt} anyway`, rule);
}
