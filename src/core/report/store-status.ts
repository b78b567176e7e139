import type { Db } from '../../store/db.js';
import { schemaStatus } from '../../store/migrate.js';

/** `recon db status` (SPEC §7): the schema version and what the store holds. */
export interface StoreStatus {
  store: string;
  backend: Db['kind'];
  schema_version: number;
  latest_version: number;
  pending_migrations: number[];
  operations: number;
  by_state: Record<string, number>;
  audit_events: number;
}

export async function storeStatus(db: Db): Promise<StoreStatus> {
  const status = await schemaStatus(db);
  const counts = await db.query<{ state: string; n: number }>(
    'SELECT state, count(*)::int AS n FROM recon.operations GROUP BY state ORDER BY state',
  );
  const events = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM recon.audit_events');
  const byState = Object.fromEntries(counts.rows.map((r) => [r.state, Number(r.n)]));
  return {
    store: db.displayUrl,
    backend: db.kind,
    schema_version: status.version,
    latest_version: status.latest,
    pending_migrations: status.pending,
    operations: Object.values(byState).reduce((a, b) => a + b, 0),
    by_state: byState,
    audit_events: Number(events.rows[0].n),
  };
}
