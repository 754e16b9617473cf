-- An application user's job (the HTTP API, tickq.enqueue or a plain insert as the
-- application role) competes as its owner's, whatever it asks for:
-- * its priority orders only the owner's own jobs: it is kept as owner_priority and the
--   job's global level is 0, so no caller's job overtakes another tenant's;
-- * its group is one of the owner's: "<owner>" for none, "<owner>/<group>" otherwise (the
--   API's form), so the tenant the fair claim gives turns to is the owner, and no caller
--   can invent tenants or join, or use up the turns of, another's.
-- A BEFORE INSERT trigger (a retry's row moving back into the live partition also fires it,
-- already in this form, and is left as it is).
create or replace function tickq.jobs_app_own() returns trigger
    language plpgsql
    as $$
begin
    if new.priority <> 0 then
        new.owner_priority := new.priority;
        new.priority := 0;
    end if;
    if new.user_id is not null and split_part(new.group_key, '/', 1) <> new.user_id::text then
        if new.group_key = '' then
            new.group_key := new.user_id::text;
        elsif char_length(new.group_key) > 128 - 37 then
            raise exception 'tickq: group_key is % characters with its owner''s prefix, over '
                            'the limit of 128', char_length(new.group_key) + 37
                using errcode = 'TQ422', detail = 'group_key';
        else
            new.group_key := new.user_id::text || '/' || new.group_key;
        end if;
    end if;
    return new;
end $$;
