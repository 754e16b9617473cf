-- The outbox's statements (queue_core/policies/outbox.py): applications' own events, the publisher's
-- pass over pending events, the backlog, the listing and the pruning of published events.

-- name: outbox_publish
-- An event of the caller's own, in the caller's transaction (tickq.publish, the application
-- login's only way to add one): the transaction's user owns it (none on a worker's
-- connection). Returns its stable id.
select p.id, p.event_id
from tickq.publish(%(detail_type)s::text, %(detail)s::jsonb, %(source)s::text) p

-- name: outbox_lock
-- One publisher at a time, for the rest of its transaction: a job's events leave in id order,
-- and a job's next event never overtakes one another publisher is still sending. A publisher
-- that finds the lock taken leaves the backlog to the one that holds it.
select pg_try_advisory_xact_lock(%(key)s) as locked

-- name: outbox_pending
-- The oldest pending events, but for the jobs (or events) whose earlier event failed in
-- this run: those wait for the next one, so a job's events stay in order. Each with its
-- detail's stored size, and the detail itself while the stored sizes before it add up to less
-- than `bytes`: a page of big events is not read whole for the few a call takes (the
-- publisher reads the others it picks by id, outbox_events).
select id, event_id, job_id, user_id, source, detail_type, attempts, stored,
       case when coalesce(sum(stored) over (order by id rows between unbounded preceding
                                                         and 1 preceding), 0) < %(bytes)s
            then detail end as detail
from (select id, event_id, job_id, user_id, source, detail_type, attempts, detail,
             pg_column_size(detail) as stored
      from tickq.outbox
      where published_at is null
        and coalesce(job_id, event_id) <> all(%(held)s::uuid[])
      order by id
      limit %(limit)s) as page
order by id

-- name: outbox_heads
-- When the pending events fill more than a page: each owner's oldest ones, in id order (at
-- least `least` per owner, about `most` in all shared by the owners that have more), with
-- how many the owner has pending, so a publisher shares its calls among owners however old
-- the backlog ahead of one is. Reads the id and owner of every pending event: the publisher
-- asks when its page came back full, and again once an owner it knows only part of has none
-- left.
with owners as (
    select user_id, count(*) as pending,
           (array_agg(id order by id))[:greatest(
               %(least)s,
               %(most)s / greatest(1, sum((count(*) > %(least)s)::int) over ()))::int] as ids
    from tickq.outbox
    where published_at is null
      and coalesce(job_id, event_id) <> all(%(held)s::uuid[])
    group by user_id
)
select o.id, coalesce(o.job_id, o.event_id) as order_key, o.user_id, o.attempts,
       pg_column_size(o.detail) as stored, w.pending
from owners w
cross join unnest(w.ids) as h (id)
join tickq.outbox o on o.id = h.id
order by o.id

-- name: outbox_events
-- The pending events the publisher picked for a call, by id (those another publisher sent
-- meanwhile are gone).
select id, event_id, job_id, user_id, source, detail_type, detail, attempts
from tickq.outbox
where id = any(%(ids)s::bigint[]) and published_at is null

-- name: outbox_published
-- Events the bus accepted, after `tries` sends in this run. Only pending ones: a row published once is never touched again.
update tickq.outbox
set published_at = coalesce(%(now)s::timestamptz, now()), attempts = attempts + %(tries)s,
    last_error = null
where id = any(%(ids)s::bigint[]) and published_at is null

-- name: outbox_failed
-- Events the bus refused `tries` times in this run, or did not answer for: they stay
-- pending, with the last reason.
update tickq.outbox o
set attempts = o.attempts + %(tries)s, last_error = left(f.error, 1000)
from unnest(%(ids)s::bigint[], %(errors)s::text[]) as f (id, error)
where o.id = f.id and o.published_at is null

-- name: outbox_backlog
-- How many events wait, how long the oldest has, the most sends one has had
-- (tickq.operator_outbox_backlog, which operators may call too).
select pending, oldest_seconds, most_attempts
from tickq.operator_outbox_backlog(%(now)s::timestamptz)

-- name: outbox_list
-- Events newest first, pending ones or all, optionally of one job or the one event (by its
-- event id: the full detail of an event published reduced).
select id, event_id, job_id, user_id, source, detail_type, detail, created_at, published_at,
       attempts, last_error
from tickq.outbox
where (not %(pending_only)s or published_at is null)
  and (%(job_id)s::uuid is null or job_id = %(job_id)s::uuid)
  and (%(event_id)s::uuid is null or event_id = %(event_id)s::uuid)
order by id desc
limit %(limit)s

-- name: outbox_prune
-- Published events older than the cut-off, a batch at a time. Pending ones always stay.
with gone as (
    delete from tickq.outbox
    where id in (select id from tickq.outbox
                 where published_at < %(before)s::timestamptz
                 order by published_at
                 limit %(limit)s)
    returning 1
)
select count(*) from gone

-- name: outbox_now
-- The database clock, which the retention's cut-off is measured by.
select now()
