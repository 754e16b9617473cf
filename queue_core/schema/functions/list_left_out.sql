-- What a list of jobs leaves out of one JSON value of a job (its payload, result, progress or
-- error history): null when the list shows the value whole, else the bytes it takes as
-- stored, which the list reports in the job's `truncated`. A list shows a value that is
-- small: at most 1024 bytes as stored, stored uncompressed, and at most 1024 bytes as JSON
-- text (1024 is LIST_VALUE_BYTES in queue_core/model/pages.py). The stored size and the
-- compression are read from the value's header, so a large value, in the TOAST table or
-- compressed in the row (standing for up to some 90 times its stored bytes), is never read;
-- only one small and uncompressed as stored is rendered to be measured (its text can be
-- longer: escapes, long numbers). So a page of jobs reads and sends a bounded size per job,
-- whatever the jobs hold; the job's own view has the value whole.
create or replace function tickq.list_left_out(p_value jsonb) returns integer
    language sql stable parallel safe
    as $$
    select case
        when p_value is null then null
        when pg_column_size(p_value) > 1024 or pg_column_compression(p_value) is not null
            then pg_column_size(p_value)
        when octet_length(p_value::text) > 1024 then pg_column_size(p_value)
    end
$$;
