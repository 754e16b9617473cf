-- The claims inside functions (tickq.claim_limited, migration 0004; tickq.claim_fair, 0010)
-- name the live partition's statuses in their lookups by id, as the claim statements of
-- queries.sql do since 0014, so they read the live partition alone instead of probing the
-- id index of every day of finished jobs. Every row they look up by id there is one they
-- hold locked as queued or retrying, so the added conditions change no result; the whole
-- live list, not ('queued', 'retrying'), which would match the predicate of jobs_claim_idx
-- and jobs_fair_idx and let the planner scan one of them instead of the id index.
--
-- Each function is rebuilt from its own current definition with exactly these conditions
-- added (CREATE OR REPLACE keeps its grants); a text not found stops the migration.
do $$
declare
    r record;
    v_def text;
begin
    for r in
        select f.name, array_agg(f.old order by f.n) as olds, array_agg(f.new order by f.n) as news
        from (values
            (1, 'tickq.claim_limited',
             'where j.id = any(array(select id from chosen))',
             'where j.id = any(array(select id from chosen)) and j.status in (''waiting'', ''queued'', ''running'', ''retrying'')'),
            (2, 'tickq.claim_fair',
             'where j.id = any(v_ids[1:v_want])',
             'where j.id = any(v_ids[1:v_want]) and j.status in (''waiting'', ''queued'', ''running'', ''retrying'')'),
            (3, 'tickq.claim_fair',
             'join tickq.jobs j on j.id = c.id',
             'join tickq.jobs j on j.id = c.id and j.status in (''waiting'', ''queued'', ''running'', ''retrying'')'),
            (4, 'tickq.claim_fair',
             'where j.id = any(array(select id from chosen))',
             'where j.id = any(array(select id from chosen)) and j.status in (''waiting'', ''queued'', ''running'', ''retrying'')')
        ) as f (n, name, old, new)
        group by f.name
    loop
        v_def := pg_get_functiondef(r.name::regproc);
        for i in 1 .. cardinality(r.olds) loop
            if position(r.olds[i] in v_def) = 0 then
                raise exception 'tickq: % no longer says "%"', r.name, r.olds[i];
            end if;
            v_def := replace(v_def, r.olds[i], r.news[i]);
        end loop;
        execute v_def;
    end loop;
end $$;
