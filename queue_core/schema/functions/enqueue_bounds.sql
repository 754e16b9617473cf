-- The bounds an enqueue request is checked against, written once for SQL: every enqueue of
-- the SQL surface (tickq.enqueue, tickq.enqueue_many and through it the HTTP API's) reads
-- them here. The Python checks (queue_core/model/validation.py) name the same numbers, and
-- tests/security/test_app_write_surface.py holds the two equal.
create or replace function tickq.enqueue_bounds() returns jsonb
    language sql immutable parallel safe
    as $$
    select jsonb_build_object(
        'max_name', 128,                  -- type, queue, group: characters
        'max_key', 255,                   -- idempotency keys, debounce and throttle keys
        'max_payload_bytes', 262144,      -- a payload as JSON text
        'max_json_depth', 64,             -- arrays and objects nested in a JSON value
        'max_attempts', 1000,
        'max_priority', 2147483647,       -- a priority is a 32-bit integer, either sign
        'max_lease_seconds', 43200,
        'max_timeout_seconds', 43200,
        'timeout_lease_margin', 10,       -- a timed job's lease: at least its timeout plus this
        'max_delay_seconds', 31622400,    -- 366 days: delay, run_after ahead, gate seconds
        'max_backoff_base', 86400,
        'min_backoff_factor', 1,
        'max_backoff_factor', 100,
        'max_backoff_max', 604800,
        'max_parents', 100,
        'max_flow_keys', 8,               -- flow keys of one job, its task's included
        'max_flow_key', 200,              -- a flow key as given: characters
        'max_batch', 1000,                -- requests of one tickq.enqueue_many call
        'max_signal_bytes', 65536,        -- all of one job's signal payloads together
        'max_signals', 100,
        'max_detail_type', 128,           -- an outbox event's detail-type: characters
        'max_source', 256,                -- an outbox event's source: characters
        'max_detail_bytes', 200000        -- an outbox event's detail as JSON text
    )
$$;
