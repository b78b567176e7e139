-- The re-plan guard (src/core/intake/replan.ts, holderOf) asks, for every proposal (propose_action,
-- ops record, act()), which live operation already targets the same payment intent, charge or client
-- reference. Only the client reference had an index: with no holder (the usual answer) the guard read
-- every operation the store had ever recorded, so a proposal slowed with the store's history (105 ms
-- at 200,000 operations on PostgreSQL, 79-118 ms at 100,000 on PGlite: npm run bench, list-unresolved).
-- The payload's two targets, indexed where present; the guard reads its target's rows first (replan.ts).
CREATE INDEX operations_payment_intent_idx ON recon.operations ((payload->>'payment_intent'))
  WHERE payload->>'payment_intent' IS NOT NULL;
CREATE INDEX operations_charge_idx ON recon.operations ((payload->>'charge'))
  WHERE payload->>'charge' IS NOT NULL;
