"""Sizes past what the bulk fill reaches in a session: the pages filled through the product's path copied, row
for row, under new page numbers (``benchmarks/scale/pages.py --replicate-from``).

The product's fill makes 50-65 pages a second on this machine's 2 cores (``process_pages`` is ~11 ms of CPU a
page, PostgreSQL's own CPU as much again): a million pages would take five hours. What grows with the stored
pages, though, is the tables and their indexes, not any one page's rows: a page's rows are the same whatever
else is stored. So the pages filled below ``base`` (a multiple of the generator's 20,000 pages per host) are
copied ``size / base - 1`` times, round ``k`` putting the copy of page number ``n`` where page number ``n + k
* base`` goes: on the host the generator gives that number (``pirate{(n + k * base) // 20000}``), under its
URL, with every row that hangs off the page copied with it (its codes, fingerprints and their Simhash rows,
matches, near duplicates, exchanges, versions), and the sites with theirs (template, pairs, outbound hosts).
Which tables those are is read from the database's foreign keys, not listed here, so a table the schema gains
is copied too. The text, its hash and its codes are those of page ``n``: a copy of a registered chapter stays
a copy of it, an unrelated page stays unrelated, so each chapter has ten times the stored copies at ten times
the pages, as a web of that size would.

What the copies are not: pages a new work can find. The pages planted for a work not registered yet (a size's
new work, ``_scale_data.planted_copies``) are neither copied nor overwritten: those at the numbers being
filled are made by the product's fill afterwards, at their own numbers (``skip_numbers``), so each work's
recall is counted on its own planted pages only. The planted pages of works registered already are copied like
the rest (as ``/book/`` pages: copies of registered chapters).

Every statement is an ``INSERT ... SELECT`` inside PostgreSQL: the rows never come to Python. Each table's
sequence is moved past the copies at the end, so the product's later writes (the crawl on top, the new work)
get fresh ids.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psycopg

HOST_PAGES = 20_000  # _scale_data.HOST_PAGES: pages per generated host
PIRATE_HOST = r"^(www|m[0-9])\.pirate[0-9]{3}\.example$"
PAGE_URL = r"^http://(www|m[0-9])\.pirate[0-9]{{3}}\.example/(book|planted/({works}))/[0-9]+\.html$"
NUMBER = r"(substring({} from '/([0-9]+)\.html$')::bigint + {})"  # a generated page URL's number, shifted


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    own_id: bool  # a single-column bigint ``id`` primary key drawn from a sequence
    references: dict[str, str]  # column -> referenced table, single-column foreign keys to copied tables


Schema = tuple[dict[str, tuple[str, ...]], dict[str, dict[str, str]], set[str]]


def _schema(connection: psycopg.Connection) -> Schema:
    """(columns of every table in order, single-column foreign keys table -> {column: referenced table},
    tables whose ``id`` is drawn from a sequence)."""
    columns: dict[str, list[str]] = {}
    for table, column in connection.execute(
        "SELECT c.relname, a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() "
        "AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' "
        "ORDER BY c.relname, a.attnum"
    ):
        columns.setdefault(table, []).append(column)
    foreign: dict[str, dict[str, str]] = {}
    for table, column, referenced in connection.execute(
        "SELECT c.conrelid::regclass::text, a.attname, c.confrelid::regclass::text FROM pg_constraint c "
        "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] "
        "JOIN pg_attribute r ON r.attrelid = c.confrelid AND r.attnum = c.confkey[1] "
        "WHERE c.contype = 'f' AND cardinality(c.conkey) = 1 AND r.attname = 'id' "
        "AND c.connamespace = current_schema()::regnamespace"
    ):
        foreign.setdefault(table, {})[column] = referenced
    sequenced = {
        table
        for table, cols in columns.items()
        if "id" in cols
        and connection.execute("SELECT pg_get_serial_sequence(%s, 'id')", (table,)).fetchone()[0]  # type: ignore[index]
    }
    return {t: tuple(c) for t, c in columns.items()}, foreign, sequenced


def copied_tables(connection: psycopg.Connection) -> list[Table]:
    """The tables whose rows are copied, in an order where every table comes after those it references:
    ``sites`` and ``pages`` and every table with a foreign key into a copied table (transitively)."""
    columns, foreign, sequenced = _schema(connection)
    copied = {"sites", "pages"}
    grew = True
    while grew:
        grew = False
        for table, keys in foreign.items():
            if table not in copied and set(keys.values()) & copied:
                copied.add(table)
                grew = True
    ordered: list[str] = []
    while len(ordered) < len(copied):
        ready = sorted(
            t
            for t in copied - set(ordered)
            if all(r in ordered or r == t or r not in copied for r in foreign.get(t, {}).values())
        )
        if not ready:
            raise RuntimeError(f"a cycle of foreign keys among {sorted(copied - set(ordered))}")
        ordered.extend(ready)
    return [
        Table(
            t,
            columns[t],
            t in sequenced,
            {c: r for c, r in foreign.get(t, {}).items() if r in copied},
        )
        for t in ordered
    ]


def _new_host(column: str, shift: int) -> str:
    """SQL: host ``www.pirateNNN.example`` of ``column`` moved ``shift`` hosts on."""
    return (
        f"split_part({column}, '.', 1) || '.pirate' || "
        f"lpad((substring({column} from 'pirate([0-9]{{3}})')::int + {shift})::text, 3, '0') || '.example'"
    )


def replicate(
    dsn: str,
    base: int,
    start: int,
    stop: int,
    skip_numbers: Iterable[int],
    registered_works: Iterable[int],
    progress: Callable[[str], None],
    *,
    host_pages: int = HOST_PAGES,
) -> dict[str, float]:
    """Copy the generated pages numbered below ``base``, everything hanging off them and their sites, into the
    numbers ``[start, stop)`` (both multiples of ``base``), leaving out ``skip_numbers`` (pages the caller
    makes itself); the pages planted for ``registered_works`` are copied too. ``host_pages``: the generator's
    pages per host (tests use fewer). Returns per table the rows added, and ``seconds``."""
    if base % host_pages or start % base or stop % base or start < base:
        raise ValueError(
            f"--replicate-from {base:,} must be a multiple of {host_pages:,} dividing {start:,} and {stop:,}"
        )
    started = time.monotonic()
    skip = sorted(n for n in set(skip_numbers) if start <= n < stop)
    added: dict[str, float] = {}
    with psycopg.connect(dsn, autocommit=True) as connection:
        tables = copied_tables(connection)
        offsets = {
            t.name: int(connection.execute(f'SELECT coalesce(max(id), 0) + 1 FROM "{t.name}"').fetchone()[0])  # type: ignore[index]
            for t in tables
            if t.own_id
        }
        skipped = "'{" + ",".join(map(str, skip)) + "}'::bigint[]"
        page_url = PAGE_URL.format(works="|".join(map(str, sorted(registered_works))) or "-")
        site_filter = (
            f"id < {offsets['sites']} AND host ~ '{PIRATE_HOST}' AND "
            f"substring(host from 'pirate([0-9]{{3}})')::int < {base // host_pages}"
        )
        rounds = range(start // base, stop // base)
        for k in rounds:
            shift = k * base
            with connection.transaction():
                for table in tables:
                    members = [
                        f'("{column}" IS NULL OR "{column}" IN (SELECT old FROM "_copy_{referenced}"))'
                        for column, referenced in table.references.items()
                    ]
                    if table.name == "pages":
                        members.append(
                            f"id < {offsets['pages']} AND url ~ '{page_url}' AND "
                            f"{NUMBER.format('url', 0)} < {base} AND NOT "
                            f"({NUMBER.format('url', shift)} = ANY({skipped}))"
                        )
                    elif table.name == "sites":
                        members.append(site_filter)
                    else:  # at least one reference to a copied row
                        members.append(
                            "(" + " OR ".join(f'"{c}" IS NOT NULL' for c in table.references) + ")"
                        )
                    where = " AND ".join(members)
                    if table.own_id:  # the copied rows of a table others reference, by their old id
                        connection.execute(
                            f'CREATE TEMP TABLE "_copy_{table.name}" (old bigint PRIMARY KEY) ON COMMIT DROP'
                        )
                        connection.execute(
                            f'INSERT INTO "_copy_{table.name}" SELECT id FROM "{table.name}" WHERE {where}'
                        )
                    values = []
                    for column in table.columns:
                        quoted = f'"{column}"'
                        if column == "id" and table.own_id:
                            values.append(f"{quoted} + {k * offsets[table.name]}")
                        elif column in table.references:
                            referenced = table.references[column]
                            values.append(f"{quoted} + {k * offsets[referenced]}")
                        elif table.name in ("sites", "pages") and column == "host":
                            values.append(_new_host(quoted, shift // host_pages))
                        elif table.name == "pages" and column in ("url", "final_url"):
                            host = _new_host("host", shift // host_pages)
                            number = NUMBER.format(quoted, shift)
                            values.append(f"'http://' || {host} || '/book/' || {number} || '.html'")
                        else:
                            values.append(quoted)
                    source = f'SELECT {", ".join(values)} FROM "{table.name}" WHERE ' + (
                        f'id IN (SELECT old FROM "_copy_{table.name}")' if table.own_id else where
                    )
                    names = ", ".join(f'"{c}"' for c in table.columns)
                    cursor = connection.execute(f'INSERT INTO "{table.name}" ({names}) {source}')
                    added[table.name] = added.get(table.name, 0) + max(0, cursor.rowcount)
            progress(
                f"replicated round {k - rounds.start + 1} of {len(rounds)}: pages up to {base * (k + 1):,} "
                f"({time.monotonic() - started:.0f} s)"
            )
        for table in tables:
            if table.own_id:
                connection.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                    f'(SELECT coalesce(max(id), 1) FROM "{table.name}"))'
                )
    return {**added, "seconds": round(time.monotonic() - started, 1)}
