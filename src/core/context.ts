import type { Db } from '../store/db.js';

/** What the core needs to act: the store, who is acting, and the clock (injected so rules are testable). */
export interface CoreContext {
  db: Db;
  /** `--actor`, else RECON_ACTOR, else user@host. */
  actor: string;
  now: () => Date;
}
