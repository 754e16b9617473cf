"""Hostile input: SQL injection, NUL bytes, lone surrogates (invalid UTF-8), huge and deep
values, and every wrong JSON type, for every field an outside caller controls."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

SQL_INJECTION = [
    "'; drop table tickq.jobs; --",
    "' or '1'='1",
    "x' or true --",
    '"; select pg_sleep(5); --',
    "$$; delete from tickq.jobs; $$",
    "1; truncate tickq.jobs",
    "') union select * from tickq.jobs --",
    "%(now)s",
    "%s",
    "{columns}",
    "\\",
    "default",
    "*",
    "a,b",
]
BAD_CHARACTERS = ["\x00", "\ud800", "\udcff", "\udfff", "\u2028", "\ufeff", "\x7f", "é", "🙂"]

sql_injection = st.sampled_from(SQL_INJECTION)
# Lone surrogates are what invalid UTF-8 becomes in Python (argv, surrogateescape).
bad_text = st.builds(
    lambda head, bad, tail: head + bad + tail,
    st.text(max_size=10),
    st.sampled_from(BAD_CHARACTERS),
    st.text(max_size=10),
)
huge_text = st.integers(200, 300_000).map(lambda n: "k" * n)
nasty_text = st.one_of(sql_injection, bad_text, huge_text, st.text(max_size=40), st.just(""))
huge_int = st.one_of(
    st.integers(2**31 - 2, 2**31 + 2),
    st.integers(-(2**31) - 2, -(2**31) + 2),
    st.integers(min_value=2**63, max_value=2**200),
    st.integers(max_value=-(2**63)),
)
odd_number = st.one_of(huge_int, st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5))


def deep(depth: int) -> Any:
    value: Any = {"leaf": 1}
    for _ in range(depth):
        value = {"d": [value]}
    return value


json_leaf = st.one_of(st.none(), st.booleans(), odd_number, nasty_text)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
deep_json = st.integers(500, 3000).map(deep)
oversized_payload = st.integers(256 * 1024, 300 * 1024).map(lambda n: {"blob": "x" * n})
# Every wrong type JSON can carry: what a request body or an event can hold.
json_wrong_type = st.one_of(
    st.none(),
    st.booleans(),
    odd_number,
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
# Python callers can also pass what JSON cannot (bytes).
wrong_type = st.one_of(json_wrong_type, st.binary(max_size=10))
any_field = st.one_of(nasty_text, wrong_type, json_value)
payload = st.one_of(json_value, deep_json, oversized_payload, wrong_type)
# The same, restricted to what a JSON document can hold (HTTP bodies, Lambda events).
any_json_field = st.one_of(nasty_text, json_wrong_type, json_value)
json_payload = st.one_of(json_value, deep_json, oversized_payload, json_wrong_type)


def mostly(good: st.SearchStrategy[Any], hostile: st.SearchStrategy[Any]) -> Any:
    """Seven draws in eight from `good`: with three such parts, two examples in three get past
    validation to the code behind it, and the rest still probe the refusal."""
    # Hostile last: hypothesis favours (and shrinks towards) the first choices.
    return st.sampled_from(range(8)).flatmap(lambda n: hostile if n == 7 else good)


# Valid values that are hostile all the same: injection text, odd characters, emoji.
storable_text = st.one_of(
    sql_injection,
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30),
)
storable_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), storable_text),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(storable_text, inner, max_size=3)
    ),
    max_leaves=8,
)
storable_payload = st.dictionaries(storable_text, storable_json, max_size=4)
valid_name = st.from_regex(r"[a-z][a-z0-9_.-]{0,20}", fullmatch=True)
valid_options = st.fixed_dictionaries(
    {},
    optional={
        "queue": valid_name,
        "idempotency_key": storable_text.filter(lambda s: 0 < len(s) <= 200),
        "priority": st.integers(-1000, 1000),
        "max_attempts": st.integers(1, 20),
        "delay": st.floats(0, 86_400),
        "user_id": st.uuids(),
    },
)
