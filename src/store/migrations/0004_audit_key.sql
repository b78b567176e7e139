-- Keyed audit events (SPEC §5 "Keyed chain"). With an audit key, an event's hash is an
-- HMAC-SHA-256 under a key that never enters the database; key_id (a one-way derivation of the
-- key) marks the event as keyed. Events written before are unkeyed (key_id NULL) and still verify
-- as a sha256 chain.
ALTER TABLE recon.audit_events ADD COLUMN key_id text;

-- Where keying began: one row, written by the first statement that inserts a keyed event. From
-- then on the database refuses any event that is not keyed with that key, so a role that may
-- insert audit rows but does not hold the key cannot fall back to the public sha256 chain (it
-- cannot disable the trigger either: only the table's owner can). The row cannot be changed or
-- removed (same append-only triggers as the trail).
CREATE TABLE recon.audit_keying (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  key_id    text NOT NULL,
  since     timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE FUNCTION recon.audit_keying_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'recon.audit_keying is fixed once written: % is not allowed', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_keying_no_update_delete BEFORE UPDATE OR DELETE ON recon.audit_keying
  FOR EACH ROW EXECUTE FUNCTION recon.audit_keying_fixed();
CREATE TRIGGER audit_keying_no_truncate BEFORE TRUNCATE ON recon.audit_keying
  FOR EACH STATEMENT EXECUTE FUNCTION recon.audit_keying_fixed();

-- Once per statement (a transition table, not a row trigger: `recon run` and `ops record` insert
-- thousands of events per statement).
CREATE FUNCTION recon.audit_events_keyed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  marker recon.audit_keying;
BEGIN
  SELECT * INTO marker FROM recon.audit_keying;
  IF NOT FOUND THEN
    INSERT INTO recon.audit_keying (key_id)
      SELECT key_id FROM added WHERE key_id IS NOT NULL LIMIT 1
      ON CONFLICT (singleton) DO NOTHING;
    SELECT * INTO marker FROM recon.audit_keying;
    IF NOT FOUND THEN
      RETURN NULL;
    END IF;
  END IF;
  IF EXISTS (SELECT 1 FROM added WHERE key_id IS DISTINCT FROM marker.key_id) THEN
    RAISE EXCEPTION 'this store''s audit trail is keyed (key id %, since %): an audit event without that key is refused; set RECON_AUDIT_KEY, or auditKey in the config, to the audit key',
      marker.key_id, marker.since
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER audit_events_keyed AFTER INSERT ON recon.audit_events
  REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION recon.audit_events_keyed();
