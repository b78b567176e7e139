-- recon schema v1: operations, attempts, provider transactions, observations, the audit trail,
-- webhook events and the audit scan window. Times are written by recon (its injected clock), never now().

CREATE SCHEMA IF NOT EXISTS recon;

CREATE TABLE recon.operations (
  id               text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9._:-]{1,200}$'),
  provider         text NOT NULL,
  action           text NOT NULL,
  payload          jsonb NOT NULL,
  payload_hash     text NOT NULL,
  idempotency_key  text NOT NULL,
  client_reference text,
  subject          jsonb,
  approval         text,
  amount           bigint CHECK (amount IS NULL OR amount >= 0),
  currency         text,
  state            text NOT NULL CHECK (state IN ('proposed', 'approved', 'submitting', 'pending',
                     'outcome_unknown', 'needs_review', 'confirmed', 'failed', 'cancelled')),
  attempt_count    integer NOT NULL DEFAULT 0,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  first_attempt_at timestamptz,
  resolved_at      timestamptz,
  lease_owner      text,
  lease_expires_at timestamptz,
  review_reason    text,
  assignee         text,
  -- When `recon run` may look at it again (backoff after `unavailable`); NULL = now.
  next_check_at    timestamptz
);

-- "List unresolved" and the claim query read only this small slice of a large table.
CREATE INDEX operations_unresolved_idx ON recon.operations (created_at DESC, id)
  WHERE state IN ('submitting', 'pending', 'outcome_unknown', 'needs_review');
CREATE INDEX operations_created_idx ON recon.operations (created_at DESC, id);
CREATE INDEX operations_client_reference_idx ON recon.operations (client_reference)
  WHERE client_reference IS NOT NULL;
CREATE INDEX operations_idempotency_key_idx ON recon.operations (provider, idempotency_key);

CREATE TABLE recon.attempts (
  operation_id        text NOT NULL REFERENCES recon.operations (id),
  number              integer NOT NULL,
  idempotency_key     text NOT NULL,
  request_hash        text NOT NULL,
  started_at          timestamptz NOT NULL,
  ended_at            timestamptz,
  outcome             text CHECK (outcome IN ('confirmed', 'failed', 'unknown')),
  error_class         text,
  provider_request_id text,
  lease_owner         text,
  PRIMARY KEY (operation_id, number)
);

CREATE TABLE recon.provider_transactions (
  provider     text NOT NULL,
  provider_id  text NOT NULL,
  operation_id text NOT NULL REFERENCES recon.operations (id),
  status       text NOT NULL,
  state        text NOT NULL CHECK (state IN ('confirmed', 'pending', 'failed')),
  amount       bigint,
  currency     text,
  linked_via   text NOT NULL CHECK (linked_via IN ('response', 'lookup', 'webhook', 'attach', 'replay')),
  linked_at    timestamptz NOT NULL,
  linked_by    text NOT NULL,
  created      timestamptz,
  PRIMARY KEY (provider, provider_id)
);
CREATE INDEX provider_transactions_operation_idx ON recon.provider_transactions (operation_id);

CREATE TABLE recon.observations (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  operation_id text NOT NULL REFERENCES recon.operations (id),
  observed_at  timestamptz NOT NULL,
  result       text NOT NULL CHECK (result IN ('found', 'not_found', 'pending', 'unavailable', 'ambiguous')),
  detail       jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX observations_operation_idx ON recon.observations (operation_id, observed_at);

CREATE TABLE recon.audit_events (
  operation_id text NOT NULL,
  seq          integer NOT NULL,
  at           timestamptz NOT NULL,
  actor        text NOT NULL,
  kind         text NOT NULL,
  from_state   text,
  to_state     text,
  rule         text,
  detail       jsonb NOT NULL DEFAULT '{}',
  prev_hash    text NOT NULL,
  hash         text NOT NULL,
  PRIMARY KEY (operation_id, seq)
);

-- The audit trail is append-only, enforced by the database itself. Row triggers do not see
-- TRUNCATE, hence the statement trigger.
CREATE FUNCTION recon.audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'recon.audit_events is append-only: % is not allowed', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_events_no_update_delete BEFORE UPDATE OR DELETE ON recon.audit_events
  FOR EACH ROW EXECUTE FUNCTION recon.audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON recon.audit_events
  FOR EACH STATEMENT EXECUTE FUNCTION recon.audit_events_append_only();

CREATE TABLE recon.webhook_events (
  provider       text NOT NULL,
  event_id       text NOT NULL,
  type           text NOT NULL,
  received_at    timestamptz NOT NULL,
  operation_id   text,
  provider_id    text,
  applied        boolean NOT NULL DEFAULT false,
  duplicate_count integer NOT NULL DEFAULT 0,
  last_seen_at   timestamptz NOT NULL,
  payload        jsonb NOT NULL,
  PRIMARY KEY (provider, event_id)
);

-- The `created` window of the provider ledger that `audit duplicates` has already scanned.
CREATE TABLE recon.audit_scans (
  provider      text PRIMARY KEY,
  scanned_from  timestamptz NOT NULL,
  scanned_until timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL
);

-- Duplicates found by audits, so incremental scans still report what earlier scans found.
CREATE TABLE recon.audit_findings (
  provider     text NOT NULL,
  key          text NOT NULL,
  kind         text NOT NULL,
  provider_ids text[] NOT NULL,
  amount_total bigint,
  currency     text,
  found_at     timestamptz NOT NULL,
  PRIMARY KEY (provider, kind, key)
);
