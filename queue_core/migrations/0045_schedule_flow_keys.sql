-- Schedules take flow keys: each job a schedule fires carries them (after its task's
-- templates, as an enqueue's), so the limits per key prefix govern scheduled work too. As
-- given, they are the bounds of an enqueue's keys: at most 8, each 1-200 characters of
-- the plain alphabet.

alter table tickq.schedules add column flow_keys text[] not null default '{}';

alter table tickq.schedules add constraint schedules_flow_keys_check check (
    cardinality(flow_keys) <= 8
    and (flow_keys = '{}'
         or (array_ndims(flow_keys) = 1 and array_position(flow_keys, null) is null
             and array_to_string(flow_keys, ',') collate "C"
                 ~ '^[A-Za-z0-9_.:/@=+-]{1,200}(,[A-Za-z0-9_.:/@=+-]{1,200})*$')));
