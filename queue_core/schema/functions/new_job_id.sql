-- A new job's id when the database makes it (the application login's enqueues, which may not
-- choose one): a UUIDv7 (RFC 9562) as the Python store's queue_core.model.ids makes them, the
-- millisecond first, so inserts land at the right edge of the id index.
create or replace function tickq.new_job_id() returns uuid
    language sql volatile parallel safe
    as $$
    select encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    placing substring(int8send(floor(extract(epoch from clock_timestamp())
                                                     * 1000)::bigint) from 3)
                    from 1 for 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;
