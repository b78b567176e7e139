-- Room on each page of webhook_events for a row's next version. An applied event's row is updated
-- in the transaction that inserts it (its operation and effect), and each redelivery updates it
-- again (duplicate_count and last_seen_at: SPEC §2, incident 6). A row carries the event's payload
-- (about a kilobyte): on a full page its next version goes to another page, a non-HOT update that
-- logs the whole row and a new index entry, 834 bytes of WAL where a HOT update logs about 80
-- (pg_walinspect over npm run bench's redeliveries). Pages written from now on are filled to 70%.
ALTER TABLE recon.webhook_events SET (fillfactor = 70);
