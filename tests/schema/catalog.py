"""What a database's tickq schema is made of, read from its catalog, to compare two databases.

Tables (with their storage options and their TOAST tables'), columns (in order),
constraints, indexes, triggers, policies, sequences, function definitions, grants of every
kind, and the attributes and memberships of tickq's roles.
Run-time day partitions of finished jobs (tickq.jobs_done_YYYYMMDD) are left out: they are
made when a database runs, not by its schema. Access lists are compared as sets (their
order is the order of the grants), storage options too, function definitions as
sqltext.normalized reads them.
"""

from __future__ import annotations

from typing import Any

import psycopg

from tests.schema.sqltext import normalized

Catalog = dict[str, list[tuple[Any, ...]]]

_DAY = "'^jobs_done_[0-9]{8}$'"
_RELATIONS = (
    f"select oid from pg_class where relnamespace = 'tickq'::regnamespace and relname !~ {_DAY}"
)


def _acl(column: str) -> str:
    return f"(select array_agg(a::text order by a::text) from unnest({column}) a)"


def _sorted(column: str) -> str:
    return f"(select array_agg(o order by o) from unnest({column}) o)"


QUERIES = {
    # Storage options as sets (in the order they were set), the TOAST
    # table's with them: autovacuum settings are schema too.
    "tables": f"select c.relname, c.relkind, {_sorted('c.reloptions')},"
    f" (select {_sorted('t.reloptions')} from pg_class t where t.oid = c.reltoastrelid),"
    " pg_get_expr(c.relpartbound, c.oid), pg_get_partkeydef(c.oid),"
    f" c.relrowsecurity, c.relforcerowsecurity, {_acl('c.relacl')}"
    f" from pg_class c where c.oid in ({_RELATIONS}) and c.relkind in ('r', 'p', 'S', 'v', 'm')",
    "columns": "select c.relname,"
    " row_number() over (partition by c.oid order by a.attnum), a.attname,"
    " format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid),"
    " a.attidentity, a.attgenerated, co.collname, a.attoptions::text,"
    f" {_acl('a.attacl')}"
    " from pg_attribute a join pg_class c on c.oid = a.attrelid"
    " left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum"
    " left join pg_collation co on co.oid = a.attcollation and a.attcollation <> 100"
    f" where c.oid in ({_RELATIONS}) and c.relkind in ('r', 'p')"
    " and a.attnum > 0 and not a.attisdropped",
    "constraints": "select c.conrelid::regclass::text, c.conname, c.contype,"
    " pg_get_constraintdef(c.oid) from pg_constraint c"
    # NOT NULL is a column's (attnotnull); PostgreSQL 18 also names it as a constraint,
    # differently when a dump makes the partitions apart and attaches them.
    f" where c.connamespace = 'tickq'::regnamespace and c.conrelid in ({_RELATIONS})"
    " and c.contype <> 'n'",
    "indexes": "select indexrelid::regclass::text, pg_get_indexdef(indexrelid)"
    f" from pg_index i where i.indrelid in ({_RELATIONS})",
    "triggers": "select tgrelid::regclass::text, tgname, tgenabled, pg_get_triggerdef(oid)"
    f" from pg_trigger where not tgisinternal and tgrelid in ({_RELATIONS})",
    "policies": "select polrelid::regclass::text, polname, polpermissive, polcmd,"
    " (select array_agg(case r when 0 then 'public' else pg_get_userbyid(r)::text end"
    "  order by 1) from unnest(polroles) r),"
    " pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid)"
    f" from pg_policy where polrelid in ({_RELATIONS})",
    "functions": "select oid::regprocedure::text, pg_get_functiondef(oid),"
    f" {_acl('proacl')} from pg_proc where pronamespace = 'tickq'::regnamespace",
    "schema": f"select nspname, {_acl('nspacl')} from pg_namespace where nspname = 'tickq'",
    "roles": "select rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin,"
    " rolreplication, rolbypassrls, rolconnlimit,"
    " (select array_agg(g.rolname::text order by g.rolname) from pg_auth_members m"
    "  join pg_roles g on g.oid = m.roleid where m.member = r.oid)"
    " from pg_roles r where rolname like 'tickq\\_%'",
}


def catalog(url: str) -> Catalog:
    """Each kind of object of the database's tickq schema, sorted, as compared."""
    with psycopg.connect(url, autocommit=True) as conn:
        found = {kind: [_hashable(r) for r in conn.execute(sql)] for kind, sql in QUERIES.items()}
    found["functions"] = [(name, normalized(body), acl) for name, body, acl in found["functions"]]
    return {kind: sorted(rows, key=repr) for kind, rows in found.items()}


def _hashable(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(tuple(v) if isinstance(v, list) else v for v in row)


def differences(expected: Catalog, actual: Catalog) -> list[str]:
    """What one catalog has that the other lacks, object by object; empty when equal."""
    found: list[str] = []
    for kind in QUERIES:
        left, right = set(expected[kind]), set(actual[kind])
        found += [f"{kind}: only in the first: {row}" for row in sorted(left - right, key=repr)]
        found += [f"{kind}: only in the second: {row}" for row in sorted(right - left, key=repr)]
    return found
