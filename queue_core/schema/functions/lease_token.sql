-- The lease token a claim gives a job: the first 16 bytes of sha256(the claim's seed, job
-- id). tickq.jobs_lease writes it; queries.sql's jobs_claim_recover finds by it the jobs a
-- claim leased whose reply its worker never read. Inlined where it is called (one
-- expression, immutable), so it costs the lease no function call per job.
create or replace function tickq.lease_token(p_seed uuid, p_id uuid) returns uuid
    language sql immutable parallel safe
    as $$
    select encode(substr(sha256(uuid_send(p_seed) || uuid_send(p_id)), 1, 16), 'hex')::uuid
$$;
