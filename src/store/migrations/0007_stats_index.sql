-- `recon stats` (src/core/report/stats.ts, computeStats) counts every operation by state, attempts
-- and review reason, and ranks the resolved ones' durations. On the table it read each row whole to
-- reach those columns, behind the payload: two full scans of 1,000,000 operations took 0.74-0.83 s
-- here (npm run bench, stats; target 0.6 s). This index holds exactly what stats reads, a quarter of
-- the table's size: the counts are a grouped read of it in key order (no hash table), the age
-- buckets a range of it (the unresolved states), the durations an index-only read of the resolved
-- states. A move that changes none of these columns (a lease, a next check) stays a HOT update.
CREATE INDEX operations_stats_idx ON recon.operations (state, attempt_count, review_reason)
  INCLUDE (created_at, first_attempt_at, resolved_at);
