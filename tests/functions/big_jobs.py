"""Jobs as large as tickq lets them be, for the tests that lists stay small whatever the
jobs hold: written straight into the table (the owner's login), as many as a test needs."""

from __future__ import annotations

from uuid import UUID

import psycopg

from queue_core.model.jobs import ERROR_HISTORY
from queue_core.model.json_text import MAX_PAYLOAD_BYTES
from queue_core.model.transitions import MAX_ERROR
from queue_core.model.validation import MAX_RESULT_BYTES

# JSON's escaping makes the most of these in a response: "é" (2 bytes of UTF-8) becomes the
# 6 bytes of \u00e9, and an emoji (4 bytes, one character) the 12 of a surrogate pair.
WIDE = "é"
EMOJI = "\N{GRINNING FACE}"
# The payload and the progress as large as the API and a handler may send ({"text": "..."}
# of MAX_PAYLOAD_BYTES compact bytes); the result as large as a handler may return.
TEXT_CHARS = (MAX_PAYLOAD_BYTES - len('{"text":""}')) // len(WIDE.encode())
RESULT_CHARS = (MAX_RESULT_BYTES - len('""')) // len(WIDE.encode())


def big_jobs(conn: psycopg.Connection, owner: UUID | None, count: int) -> list[UUID]:
    """`count` succeeded jobs of `owner`, each with the largest payload, progress and result
    and ERROR_HISTORY errors of MAX_ERROR emoji in its history (the last one standing);
    created a millisecond apart, their ids newest first."""
    rows = conn.execute(
        """
        with v as materialized (
            select jsonb_build_object('text', repeat(%(wide)s, %(text_chars)s)) as text,
                   to_jsonb(repeat(%(wide)s, %(result_chars)s)) as result,
                   repeat(%(emoji)s, %(error_chars)s) as error
        )
        insert into tickq.jobs (type, user_id, status, payload, attempts, max_attempts,
                                progress, result, error, errors, run_after, created_at,
                                updated_at, started_at, finished_at)
        select 'big', %(owner)s::uuid, 'succeeded', v.text, %(history)s, %(history)s + 1, v.text,
               v.result, v.error,
               (select jsonb_agg(jsonb_build_object('attempt', a, 'at', now(), 'error', v.error))
                from generate_series(1, %(history)s) a),
               now(), now() - n * interval '1 millisecond', now(), now(), now()
        from generate_series(1, %(count)s) n, v
        returning id, created_at
        """,
        {
            "wide": WIDE,
            "emoji": EMOJI,
            "text_chars": TEXT_CHARS,
            "result_chars": RESULT_CHARS,
            "error_chars": MAX_ERROR,
            "history": ERROR_HISTORY,
            "owner": owner,
            "count": count,
        },
    ).fetchall()
    return [id_ for id_, _ in sorted(rows, key=lambda r: r[1], reverse=True)]
