/**
 * What the warehouse sandbox holds: shipments, listed newest first with cursor pagination, and
 * possibly not yet visible to lookups (delayed indexing) while GET by id already finds them.
 */
import { randomId } from '../http.js';

export interface Shipment {
  id: string;
  object: 'shipment';
  status: string;
  idempotency_key: string | null;
  client_reference: string | null;
  /** Unix seconds. */
  created: number;
  [field: string]: unknown;
}

export interface ShipmentFilter {
  client_reference?: string;
  idempotency_key?: string;
}

export interface ShipmentQuery extends ShipmentFilter {
  created_gte?: number;
  created_lte?: number;
  limit: number;
  starting_after?: string;
}

interface Stored {
  shipment: Shipment;
  seq: number;
  hiddenUntil: number;
}

export class WarehouseLedger {
  private readonly byId = new Map<string, Stored>();
  private readonly inOrder: Stored[] = [];
  private seq = 0;

  constructor(private readonly now: () => number) {}

  create(
    payload: Record<string, unknown>,
    opts: { idempotencyKey?: string | null; status: string; created?: number },
  ): Shipment {
    const clientReference = payload.client_reference;
    // Server-owned fields come last so a payload can never forge an id or a status.
    const shipment: Shipment = {
      ...structuredClone(payload),
      id: randomId('shp'),
      object: 'shipment',
      status: opts.status,
      idempotency_key: opts.idempotencyKey ?? null,
      client_reference: typeof clientReference === 'string' ? clientReference : null,
      created: opts.created ?? Math.floor(this.now() / 1000),
    };
    const stored: Stored = { shipment, seq: ++this.seq, hiddenUntil: 0 };
    this.byId.set(shipment.id, stored);
    this.inOrder.push(stored);
    return structuredClone(shipment);
  }

  get(id: string): Shipment | undefined {
    const s = this.byId.get(id);
    return s ? structuredClone(s.shipment) : undefined;
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  setStatus(id: string, status: string): Shipment {
    const s = this.byId.get(id);
    if (!s) throw new Error(`no shipment ${id}`);
    s.shipment.status = status;
    return structuredClone(s.shipment);
  }

  hide(id: string, untilMs: number): void {
    const s = this.byId.get(id);
    if (s) s.hiddenUntil = untilMs;
  }

  /** The provider's truth, hidden shipments included, in creation order. */
  shipments(filter: ShipmentFilter = {}): Shipment[] {
    return this.inOrder
      .map((s) => s.shipment)
      .filter(
        (x) =>
          (filter.client_reference === undefined || x.client_reference === filter.client_reference) &&
          (filter.idempotency_key === undefined || x.idempotency_key === filter.idempotency_key),
      )
      .map((x) => structuredClone(x));
  }

  /** `GET /v1/shipments`: visible shipments, newest first, `limit` per page after the cursor. */
  list(q: ShipmentQuery): { data: Shipment[]; has_more: boolean } {
    const t = this.now();
    const cursor = q.starting_after ? this.byId.get(q.starting_after) : undefined;
    const data: Shipment[] = [];
    let has_more = false;
    // Sorted per call: seeded shipments may carry older `created` values than later inserts.
    const newestFirst = [...this.inOrder].sort((a, b) => (older(a, b) ? 1 : -1));
    for (const s of newestFirst) {
      const x = s.shipment;
      if (cursor && !older(s, cursor)) continue;
      if (s.hiddenUntil > t) continue;
      if (q.client_reference !== undefined && x.client_reference !== q.client_reference) continue;
      if (q.idempotency_key !== undefined && x.idempotency_key !== q.idempotency_key) continue;
      if (q.created_gte !== undefined && x.created < q.created_gte) continue;
      if (q.created_lte !== undefined && x.created > q.created_lte) continue;
      if (data.length === q.limit) {
        has_more = true;
        break;
      }
      data.push(structuredClone(x));
    }
    return { data, has_more };
  }
}

function older(a: Stored, b: Stored): boolean {
  return a.shipment.created !== b.shipment.created ? a.shipment.created < b.shipment.created : a.seq < b.seq;
}
