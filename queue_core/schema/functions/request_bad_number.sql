-- The refusal of tickq.request_number: a value that is no number of the field's range.
create or replace function tickq.request_bad_number(
    p_value jsonb,
    p_field text,
    p_low double precision,
    p_high double precision,
    p_integer boolean,
    p_where text,
    p_column text
) returns double precision
    language plpgsql immutable
    set search_path = pg_catalog, pg_temp
    as $$
begin
    raise exception 'tickq: % must be % between % and %, got %', p_where || p_field,
        case when p_integer then 'an integer' else 'a number' end, p_low, p_high,
        left(p_value::text, 60)
        using errcode = 'invalid_parameter_value', column = p_column;
end $$;
