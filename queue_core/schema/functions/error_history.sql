-- The last 20 failures of a job, oldest first: enough to debug, bounded in size.
create function tickq.error_history(history jsonb, entry jsonb) returns jsonb
    language sql immutable parallel safe
    as $$
    select case
        when jsonb_array_length(history) < 20 then history || jsonb_build_array(entry)
        else (select jsonb_agg(e order by i)
              from jsonb_array_elements(history || jsonb_build_array(entry))
                   with ordinality as a (e, i)
              where i > jsonb_array_length(history) + 1 - 20)
    end
$$;
