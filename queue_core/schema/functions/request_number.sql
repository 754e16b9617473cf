-- A number of an enqueue request (tickq.enqueue_job): null when the field is missing or JSON
-- null, else a JSON number in [p_low, p_high], whole when p_integer; anything else is
-- refused (tickq.request_bad_number) with SQLSTATE 22023 naming the field (p_column, default
-- the field itself). A SQL function, so a caller's expression inlines it: a bulk enqueue
-- reads several numbers of every request.
create or replace function tickq.request_number(
    p_object jsonb,
    p_field text,
    p_low double precision,
    p_high double precision,
    p_integer boolean,
    p_where text,
    p_column text default null
) returns double precision
    language sql immutable
    as $$
    select case
        when coalesce(jsonb_typeof(p_object -> p_field), 'null') = 'null' then null
        when jsonb_typeof(p_object -> p_field) = 'number'
             and (p_object -> p_field)::numeric between p_low::numeric and p_high::numeric
             and (not p_integer
                  or (p_object -> p_field)::numeric = trunc((p_object -> p_field)::numeric))
        then (p_object -> p_field)::numeric::double precision
        else tickq.request_bad_number(p_object -> p_field, p_field, p_low, p_high, p_integer,
                                   p_where, coalesce(p_column, p_field))
    end
$$;
