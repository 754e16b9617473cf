-- The last 20 failures of a job, oldest first: enough to debug, bounded in size. The
-- history stays inside jobs_errors_check's bound (1 MiB, as stored) whatever it held: the
-- oldest entries go until the new one fits, so one long history (plain SQL may write one
-- at the bound) never fails the statement that appends, nor every job beside it there.
create or replace function tickq.error_history(history jsonb, entry jsonb) returns jsonb
    language plpgsql immutable parallel safe
    as $$
declare
    v_kept jsonb := history || jsonb_build_array(entry);
begin
    if jsonb_array_length(v_kept) > 20 then
        select jsonb_agg(e order by i) into v_kept
        from jsonb_array_elements(v_kept) with ordinality as a (e, i)
        where i > jsonb_array_length(v_kept) - 20;
    end if;
    -- A value just built is not compressed: its size is the one the check measures.
    while pg_column_size(v_kept) > 1048576 loop
        v_kept := v_kept - 0;
    end loop;
    return v_kept;
end $$;
