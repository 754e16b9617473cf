-- The user an application names for the current transaction with
-- set_config('tickq.user_id', ..., true); null outside such a transaction. Row-level
-- security scopes the application's rows by it (policies.sql).
create or replace function tickq.current_user_id() returns uuid
    language sql stable
    as $$ select nullif(current_setting('tickq.user_id', true), '')::uuid $$;
