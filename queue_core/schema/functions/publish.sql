-- Put an event into the outbox, in the caller's transaction: published once it commits. The
-- transaction's user owns it (tickq.current_user_id()); without one, only a trusted login (a
-- worker, tickq_worker, or the tables' owner) may publish, an ownerless event. Never a job's
-- event, never already published. The source is a plain ASCII name, and no source but the
-- default 'tickq.app' may begin with "tickq" in any case: consumers trust tickq's own
-- lifecycle events by their source. Returns the event's row id and its event_id (in its
-- detail as sent). Refused, writing nothing: SQLSTATE 22023 naming the field, 42501 without
-- a user on an untrusted login.
create or replace function tickq.publish(detail_type text, detail jsonb,
                              source text default 'tickq.app',
                              out id bigint, out event_id uuid)
    returns record
    language plpgsql volatile security definer
    set search_path = pg_catalog, pg_temp
    as $$
declare
    b       constant jsonb := tickq.enqueue_bounds();
    v_owner uuid := tickq.current_user_id();
begin
    if v_owner is null
       and not pg_has_role(session_user, 'tickq_worker', 'USAGE')
       and not pg_has_role(session_user, (select c.relowner from pg_class c
                                          where c.oid = 'tickq.outbox'::regclass), 'USAGE')
    then
        raise exception 'tickq: an application''s event needs the transaction''s user'
            using errcode = 'insufficient_privilege',
                  hint = 'select set_config(''tickq.user_id'', <user uuid>, true) first';
    end if;
    if char_length(publish.detail_type) is null
       or char_length(publish.detail_type) not between 1 and (b ->> 'max_detail_type')::integer
    then
        raise exception 'tickq: detail_type must be 1-% characters long', b ->> 'max_detail_type'
            using errcode = 'invalid_parameter_value', column = 'detail_type';
    end if;
    if coalesce(publish.source, '') collate "C" !~ '^[A-Za-z0-9][A-Za-z0-9._/-]*$'
       or char_length(publish.source) > (b ->> 'max_source')::integer then
        raise exception 'tickq: source must be 1-% characters of ASCII letters, digits and '
                        '._/- starting with a letter or digit, got %', b ->> 'max_source',
            coalesce(quote_literal(left(publish.source, 60)), 'null')
            using errcode = 'invalid_parameter_value', column = 'source';
    end if;
    if lower(publish.source) like 'tickq%' and publish.source <> 'tickq.app' then
        raise exception 'tickq: source % is reserved: sources beginning with tickq are tickq''s',
            quote_literal(publish.source)
            using errcode = 'invalid_parameter_value', column = 'source';
    end if;
    if jsonb_typeof(publish.detail) is distinct from 'object' then
        raise exception 'tickq: detail must be a JSON object, got %',
            coalesce(jsonb_typeof(publish.detail), 'null')
            using errcode = 'invalid_parameter_value', column = 'detail';
    end if;
    if octet_length(publish.detail::text) > (b ->> 'max_detail_bytes')::integer then
        raise exception 'tickq: detail is % bytes, over the limit of %',
            octet_length(publish.detail::text), b ->> 'max_detail_bytes'
            using errcode = 'invalid_parameter_value', column = 'detail';
    end if;
    insert into tickq.outbox as o (user_id, source, detail_type, detail)
    values (v_owner, publish.source, publish.detail_type, publish.detail)
    returning o.id, o.event_id into id, event_id;
end $$;

-- The application login's whole write surface: these security-definer functions, each
-- taking the owner from the session and the time from the database and checking every
-- argument (docs/threat-model.md lists them with their bounds). Workers may call them too.
revoke all on function tickq.publish(text, jsonb, text) from public;
grant execute on function tickq.publish(text, jsonb, text) to tickq_app, tickq_worker;
