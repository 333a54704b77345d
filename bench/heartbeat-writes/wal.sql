-- WAL written per heartbeat by the reputation service: the whole machine record rewritten (before)
-- against its heartbeats column alone (now), on 100 machines with a ~24 KB record each.
-- Run: psql "$DATABASE_URL" -f bench/heartbeat-writes/wal.sql (makes and drops schema cluster_wal_probe).
DROP SCHEMA IF EXISTS cluster_wal_probe CASCADE;
CREATE SCHEMA cluster_wal_probe;
SET search_path = cluster_wal_probe;
CREATE TABLE rm (machine_id text PRIMARY KEY, record jsonb NOT NULL, heartbeats jsonb, has_transitions boolean NOT NULL DEFAULT true, updated_at timestamptz NOT NULL DEFAULT now(), heartbeat_at timestamptz NOT NULL DEFAULT now());
-- a ~25 KB record: 512 seen keys and a few hundred transitions, as a busy machine's
INSERT INTO rm SELECT 'm' || i, jsonb_build_object('seen', (SELECT jsonb_agg('task:' || md5(g::text) || ':1') FROM generate_series(1, 512) g), 'transitions', (SELECT jsonb_agg(jsonb_build_object('at', 1700000000000 + g, 'online', g % 2 = 0)) FROM generate_series(1, 50) g)), '{"expected":{"v":1,"at":1},"onTime":{"v":1,"at":1},"lastSequence":1,"lastArrival":1}' FROM generate_series(1, 100) i;
SELECT pg_column_size(record) AS record_bytes_compressed, length(record::text) AS record_bytes FROM rm LIMIT 1;
CHECKPOINT;
SELECT pg_current_wal_lsn() AS a \gset
-- before: each beat rewrote the whole record (heartbeats inside it)
UPDATE rm SET record = jsonb_set(record, '{heartbeats}', jsonb_build_object('lastSequence', 2)), updated_at = now();
SELECT pg_current_wal_lsn() AS b \gset
CHECKPOINT;
SELECT pg_current_wal_lsn() AS c \gset
-- after: a beat writes the heartbeats column alone
UPDATE rm SET heartbeats = jsonb_build_object('expected', jsonb_build_object('v', 2, 'at', 2), 'onTime', jsonb_build_object('v', 2, 'at', 2), 'lastSequence', 2, 'lastArrival', 2), heartbeat_at = now();
SELECT pg_current_wal_lsn() AS d \gset
SELECT pg_wal_lsn_diff(:'b', :'a') / 100 AS wal_bytes_per_beat_whole_record, pg_wal_lsn_diff(:'d', :'c') / 100 AS wal_bytes_per_beat_heartbeats_column;
DROP SCHEMA cluster_wal_probe CASCADE;
