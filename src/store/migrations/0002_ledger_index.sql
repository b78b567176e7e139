-- A compact index of the provider ledger as `audit duplicates` has read it, so an incremental scan
-- (only what is new) still finds a new refund that duplicates one read months ago, with bounded
-- memory: duplicates are found by SQL over this table, not in the process.
CREATE TABLE recon.ledger_index (
  provider         text NOT NULL,
  provider_id      text NOT NULL,
  operation_id     text,
  client_reference text,
  grp              text,
  amount           bigint,
  currency         text,
  status           text NOT NULL,
  created          timestamptz NOT NULL,
  scanned_at       timestamptz NOT NULL,
  PRIMARY KEY (provider, provider_id)
);
CREATE INDEX ledger_index_operation_idx ON recon.ledger_index (provider, operation_id) WHERE operation_id IS NOT NULL;
CREATE INDEX ledger_index_client_reference_idx ON recon.ledger_index (provider, client_reference) WHERE client_reference IS NOT NULL;
CREATE INDEX ledger_index_group_idx ON recon.ledger_index (provider, grp, amount, created);
