-- When recon last looked an operation up at its provider (the newest observation's time), on the
-- operation's own row. A `recon run` pass claims only operations not looked up since it started;
-- as a column of the claimed row, the claim's own row re-check (READ COMMITTED re-reads a row
-- another worker changed meanwhile) sees it, where a NOT EXISTS over observations read an older
-- snapshot and had to scan every observation of the pass (npm run bench, claims).
ALTER TABLE recon.operations ADD COLUMN last_checked_at timestamptz;

UPDATE recon.operations o
   SET last_checked_at = m.at
  FROM (SELECT operation_id, max(observed_at) AS at FROM recon.observations GROUP BY operation_id) m
 WHERE o.id = m.operation_id
   AND o.state IN ('submitting', 'pending', 'outcome_unknown', 'needs_review');

