import type { Db } from '../../store/db.js';
import type { AuditKey } from '../../lib/keyed-hash.js';

/** What the core needs to act: the store, who is acting, and the clock (injected so rules are testable). */
export interface CoreContext {
  db: Db;
  /** `--actor`, else RECON_ACTOR, else user@host. */
  actor: string;
  now: () => Date;
  /**
   * The audit key (RECON_AUDIT_KEY or the config's `auditKey`), default none: every audit event this
   * context writes is keyed with it (SPEC §5 "Keyed chain").
   */
  auditKey?: AuditKey | null;
}
