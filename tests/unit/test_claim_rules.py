"""Each rule of the finish and the claim is written once in the SQL sources, and every
claim statement is built from those parts, so a rule changed in one place changes the
plain, several-queue, limited and fair claims alike."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from queue_core.postgres.statements import QUERIES, parse

ROOT = Path(__file__).resolve().parents[2] / "queue_core"
# The current-state SQL: named statements and schema files (migrations are history).
SOURCES = sorted(p for p in ROOT.rglob("*.sql") if "migrations" not in p.parts)

# Each claim rule's text, as it reads in its one place.
RULES = {
    "status": "set status = 'running',",
    "attempt count": "attempts = least(j.attempts + 1, j.max_attempts),",
    "lease token": "encode(substr(sha256(uuid_send(p_seed) || uuid_send(p_id)), 1, 16)",
    "one seed per lease": "v_seed uuid := coalesce(p_seed, gen_random_uuid());",
    "lease_until": "lease_until = p_now + coalesce(j.lease_seconds, p_lease_seconds)",
    "started_at": "started_at = p_now,",
    "finish fenced by the token": "and j.lease_token = o.lease_token",
    "finish back to the queue": "then clock.now + o.delay * interval '1 second'",
    "finished statuses": "finished_at = case when o.status in ('succeeded', 'dead', 'cancelled')",
    "plain pick order": (
        "order by priority desc, owner_priority desc, run_after, created_at\n"
        "    limit (select %(limit)s::int)"
    ),
    "children settled": "case when bool_or(has_children) then tickq.jobs_settle(",
    # The type limits' rules, shared by the limited and the fair claim.
    "type cap": "coalesce(l.max_running - (select count(*) from tickq.jobs r",
    "type rate": "coalesce(l.rate_limit - (select coalesce(sum(e.n), 0)",
    "rate log": "order by e.at) || p_at,",
}
LEASED_BY_THE_RULE = "tickq.jobs_lease("
FINISH_AND_CLAIM = (
    "jobs_finish_and_claim",
    "jobs_finish_and_claim_queues",
    "jobs_finish_and_claim_fair",
)


def _occurrences(text: str) -> list[str]:
    return [
        f"{path.relative_to(ROOT)} ({path.read_text(encoding='utf-8').count(text)})"
        for path in SOURCES
        if text in path.read_text(encoding="utf-8")
    ]


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_claim_rule_is_written_once(rule: str) -> None:
    found = _occurrences(RULES[rule])
    assert len(found) == 1 and found[0].endswith("(1)"), found


def test_the_random_draw_of_a_claim_is_the_lease_rule_alone() -> None:
    # gen_random_uuid() per job was the limited and fair claims' own token rule.
    claims = ("schema/functions/claim_fair.sql", "schema/functions/claim_limited.sql")
    for name in claims:
        assert "gen_random_uuid" not in (ROOT / name).read_text(encoding="utf-8"), name


def test_every_claim_leases_through_the_one_rule() -> None:
    for name in ("claim_fair", "claim_limited"):
        text = (ROOT / "schema" / "functions" / f"{name}.sql").read_text(encoding="utf-8")
        assert LEASED_BY_THE_RULE in text, name
        assert "tickq.type_allowance(" in text and "tickq.type_limits_log(" in text, name
        assert "update tickq.jobs j\n            set status" not in text, name
    assert LEASED_BY_THE_RULE in QUERIES["jobs_finish_and_claim"]
    assert LEASED_BY_THE_RULE in QUERIES["jobs_finish_and_claim_queues"]


def test_the_token_is_derived_by_one_rule_where_it_is_written_and_found() -> None:
    lease = (ROOT / "schema" / "functions" / "jobs_lease.sql").read_text(encoding="utf-8")
    assert "tickq.lease_token(v_seed, j.id)" in lease
    assert "tickq.lease_token(s.seed, j.id)" in QUERIES["jobs_claim_recover"]


def test_the_finish_and_claim_statements_share_their_finish_and_report() -> None:
    head = QUERIES["jobs_finish_and_claim"]
    finish = head[: head.index("), picked as")]
    report = head[head.index("select case when row_number()") :]
    for name in FINISH_AND_CLAIM:
        assert QUERIES[name].startswith(finish), name
        assert QUERIES[name].endswith(report), name


def test_parts_are_spliced_and_bad_parts_refused() -> None:
    text = (
        "-- part: cols\n-- a comment\nid, queue\n\n"
        "-- name: a_get\nselect {{cols}} from t;\n"
        "-- name: b_get\nselect {{cols}}, 1 from u;\n"
    )
    assert parse(text) == {
        "a_get": "select id, queue from t",
        "b_get": "select id, queue, 1 from u",
    }
    with pytest.raises(ValueError, match=re.escape("splices {{nope}}, no part")):
        parse("-- name: a_get\nselect {{nope}};\n")
    with pytest.raises(ValueError, match="parts no statement splices: cols"):
        parse("-- part: cols\nid\n-- name: a_get\nselect 1;\n")
    with pytest.raises(ValueError, match="part loop splices itself"):
        parse("-- part: loop\n{{loop}}\n-- name: a_get\nselect {{loop}};\n")
    with pytest.raises(ValueError, match="already named"):
        parse("-- part: a_get\nid\n-- name: a_get\nselect {{a_get}};\n")
