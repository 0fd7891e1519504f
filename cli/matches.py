"""What was found: ``fptrack check`` (one file or URL compared now, nothing stored), ``fptrack matches``
(the matches with their evidence, as a table, JSON lines or CSV) and ``fptrack report`` (counts per work,
host or day). The services are :mod:`compare.service`, :mod:`compare.records` and :mod:`analytics.rollups`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from fptrack.cli.common import (
    CliContext,
    CliError,
    bom_option,
    echo_csv,
    friendly_errors,
    pass_context,
    print_table,
)

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from fptrack.storage.models import Match

__all__ = ["check", "matches", "report"]

EXIT_COPY_FOUND = 3
"""``fptrack check``'s exit status when the source copies a registered work."""


@click.command()
@click.argument("source")
@click.option("--context-chars", default=30, show_default=True, help="Characters shown around each passage.")
@click.option(
    "--allow-private-host",
    "allow_private",
    multiple=True,
    metavar="HOST",
    help="Let a URL on HOST (host, host:port or network) be fetched although it is private or loopback.",
)
@pass_context
@friendly_errors
def check(context: CliContext, source: str, context_chars: int, allow_private: tuple[str, ...]) -> None:
    """Compare one file or URL with the registry now.

    Shows the verdict for a text file or an http(s) URL with the copied passages highlighted. Nothing is
    stored. Exit status 3 when it copies a registered work."""
    from fptrack.compare.records import copied_characters
    from fptrack.compare.service import compare_document
    from fptrack.compare.works import decode_work_text, read_work_file
    from fptrack.fingerprint.text_fingerprints import fingerprint_text

    if source.startswith(("http://", "https://")):
        text, label = _fetch_one(context, source, allow_private), source
    else:
        text, label = decode_work_text(read_work_file(Path(source)), source).text, source
    with context.session() as session:
        document = fingerprint_text(text)
        verdicts = [v for v in compare_document(session, document, context.settings) if v.copied_chars]
    flagged = [v for v in verdicts if v.flagged]
    if not flagged:
        click.echo(f"{label}: no copy of a registered work found")
        for v in verdicts[:3]:
            click.echo(
                f"  closest: {v.work_title} / {v.chapter_title}: {copied_characters(v.spans)} characters "
                "in common"
            )
        return
    click.echo(click.style(f"{label}: copies {len(flagged)} chapter(s) of registered works", bold=True))
    for v in flagged:
        click.echo(
            f"\n  {v.work_title} / chapter {v.chapter_index} {v.chapter_title}  score {v.score:.2f}  "
            f"({copied_characters(v.spans)} characters; {', '.join(v.methods)})"
        )
        for page_start, page_end, work_start, work_end in v.spans[:8]:
            before = text[max(0, page_start - context_chars) : page_start].replace("\n", " ")
            copied = text[page_start:page_end].replace("\n", " ")
            if len(copied) > 160:
                copied = copied[:75] + " … " + copied[-75:]
            after = text[page_end : page_end + context_chars].replace("\n", " ")
            click.echo(f"    [{page_start}:{page_end}] <- work [{work_start}:{work_end}]")
            click.echo("      " + before + click.style(copied, fg="red", bold=True) + after)
    sys.exit(EXIT_COPY_FOUND)


def _fetch_one(context: CliContext, url: str, allow_private: tuple[str, ...] = ()) -> str:
    from fptrack.crawler import run_crawl
    from fptrack.crawler.pages import CrawlOptions

    pages: list[Any] = []
    options = CrawlOptions(allow_private_hosts=allow_private)
    stats = run_crawl(
        [url], settings=context.settings, depth=0, max_pages=1, sink=pages.append, options=options
    )
    if not pages:
        reason = stats.failures[0][1] if stats.failures else "no response"
        raise CliError(f"cannot fetch {url}: {reason}")
    page = pages[0]
    if page.status != 200 or not page.text.strip():
        raise CliError(
            f"{url}: HTTP {page.status}, no text to check {('(' + page.error + ')') if page.error else ''}"
        )
    return str(page.text)


@click.command()
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True
)
@click.option(
    "--status",
    help="flagged, licensed, confirmed, dismissed or all [flagged; all with --id].",
)
@click.option("--work", "work_id", type=int, help="Only matches of this work id.")
@click.option(
    "--id",
    "match_ids",
    type=int,
    multiple=True,
    metavar="ID",
    help="Only the match with this id, whatever its status (repeatable).",
)
@click.option(
    "--evidence",
    "with_evidence",
    is_flag=True,
    help="Add each match's evidence: the copied passages as the page had them when copied (kept when the "
    "page has changed or gone since), with that fetch's time, HTTP status and snapshot SHA-256.",
)
@bom_option
@pass_context
@friendly_errors
def matches(
    context: CliContext,
    fmt: str,
    status: str | None,
    work_id: int | None,
    match_ids: tuple[int, ...],
    with_evidence: bool,
    bom: bool,
) -> None:
    """List the matches found, with their id (for `fptrack review ID ...`) and review status.

    With --format json: one object per line with page_url, work_id, work_title, chapter_index, chapter_title,
    score, methods, spans ([page_start, page_end, work_start, work_end] in characters of the original texts),
    first_seen, kind (null: an exact copy; rewrite or translation:<language>: a copy that keeps the meaning),
    alignment (its sentences aligned in order: coverage, pairs), then id and status (and with --evidence:
    evidence, an object with passages, fetched_at, http_status, snapshot_sha256 and kept, true when the page
    has changed since); a match on a downloaded archive adds files, the archive's files its passages are in
    (docs/downloads.md). CSV has the same columns in that order (cells a spreadsheet would read as a formula
    are prefixed with an apostrophe), after a UTF-8 byte order mark unless --no-bom.

    \b
      fptrack matches --id 12               match 12, whatever its status (a rewrite or a
                                            translation: its aligned sentence pairs too)
      fptrack matches --status all --format csv > matches.csv"""
    from fptrack.compare.records import match_files, match_to_dict
    from fptrack.services.exports import CSV_MATCH_COLUMNS, csv_match_row
    from fptrack.services.queries import MATCH_STATUSES, MatchFilter, iter_matches

    if with_evidence and fmt == "csv":
        raise CliError("--evidence goes with --format json or table")
    status = status or ("all" if match_ids else "flagged")
    with context.session() as session:
        found: list[Match] = []
        if status == "all" or status in MATCH_STATUSES:  # a status that does not exist selects nothing
            selected = MatchFilter(
                status=None if status == "all" else status, work_id=work_id, ids=match_ids, order="asc"
            )
            found = list(iter_matches(session, selected))  # first seen first
        _require_ids(session, match_ids)
        records = []
        aligned = [_aligned_text(session, m) for m in found if m.kind and match_ids and fmt == "table"]
        for m in found:
            files = match_files(session, m)
            records.append(
                {**match_to_dict(m), "id": m.id, "status": m.status}
                | ({"files": files} if files else {})
                | ({"evidence": _evidence(session, m)} if with_evidence else {})
            )
    if fmt == "json":
        for record in records:
            click.echo(json.dumps(record, ensure_ascii=False))
    elif fmt == "csv":
        echo_csv(CSV_MATCH_COLUMNS, (csv_match_row(record) for record in records), bom=bom)
    elif not records:
        click.echo("no matches" + (f" with status {status}" if status != "all" else ""))
    else:
        print_table(
            ["id", "status", "score", "work", "chapter", "page", "methods", "kind", "first seen"],
            [
                (
                    r["id"],
                    r["status"],
                    f"{r['score']:.2f}",
                    r["work_title"],
                    f"{r['chapter_index']} {r['chapter_title']}",
                    r["page_url"],
                    ",".join(r["methods"]),
                    r["kind"] or "exact",
                    r["first_seen"][:19],
                )
                for r in records
            ],
        )
        for text in aligned:
            click.echo(text)
        for r in records:
            if r.get("files"):
                click.echo(f"match {r['id']}: in the downloaded archive, the file(s) {', '.join(r['files'])}")
        for r in records if with_evidence else ():
            shown = r["evidence"]
            click.echo(
                f"\nmatch {r['id']}: as fetched {shown['fetched_at'][:19]} (HTTP {shown['http_status']}"
                + (", kept: the page has changed since" if shown["kept"] else "")
                + f"), snapshot {shown['snapshot_sha256'] or '-'}"
            )
            for passage in shown["passages"]:
                click.echo("  " + (passage if len(passage) <= 160 else passage[:75] + " … " + passage[-75:]))


def _aligned_text(session: Session, match: Match) -> str:
    """A meaning match as ``fptrack matches --id`` prints it below the table: its kind, its coverage and each
    aligned pair, the page's sentence over the chapter's, with their similarity
    (``services.evidence.alignment``)."""
    from fptrack.services.evidence.alignment import kind_label, match_alignment

    alignment = match_alignment(session, match)
    if alignment is None:
        return ""
    covered = round(alignment.coverage * 100)
    heading = (
        f"\nmatch {match.id}: {kind_label(alignment.kind)}, {covered}% of the chapter covered; "
        f"{len(alignment.pairs)} aligned sentence pairs (the page has {alignment.page_sentences} sentences, "
        f"the chapter {alignment.chapter_sentences})"
    )
    lines = [heading]
    for pair in alignment.pairs:
        lines += [
            f"  {pair.number}. similarity {pair.similarity:.2f}",
            f"     page    [{pair.page_start}:{pair.page_end}] {_one_line(pair.page_text)}",
            f"     chapter [{pair.chapter_start}:{pair.chapter_end}] {_one_line(pair.chapter_text)}",
        ]
    return "\n".join(lines)


def _one_line(text: str, limit: int = 160) -> str:
    """Crawled text on one line of a terminal: whitespace runs as one space, a control character (an escape
    sequence a hostile page may hold) as U+FFFD, cut in the middle past ``limit`` characters."""
    text = "".join(char if char.isprintable() else "\ufffd" for char in " ".join(text.split()))
    return text if len(text) <= limit else text[: limit // 2 - 2] + " … " + text[-(limit // 2 - 2) :]


def _require_ids(session: Session, match_ids: tuple[int, ...]) -> None:
    """A one-line error naming the ids asked for that no match has."""
    from sqlalchemy import select

    from fptrack.storage.models import Match

    if not match_ids:
        return
    known = set(session.scalars(select(Match.id).where(Match.id.in_(match_ids))))
    unknown = [str(i) for i in dict.fromkeys(match_ids) if i not in known]
    if unknown:
        raise CliError(
            f"no match with id {', '.join(unknown)}; `fptrack matches --status all` lists them all"
        )


def _evidence(session: Session, match: Match) -> dict[str, Any]:
    """The text ``match``'s spans point into (:func:`storage.match_life.evidence_of`), as its passages."""
    from fptrack.storage.match_life import evidence_of

    stored = evidence_of(session, match)
    passages = []
    for span in match.spans or []:
        start, end = int(span[0]), int(span[1])
        passages.append(stored.text[max(0, start) : max(0, end)])
    return {
        "passages": passages,
        "fetched_at": stored.fetched_at.isoformat(timespec="seconds"),
        "http_status": stored.status,
        "snapshot_sha256": stored.snapshot_sha256,
        "kept": stored.version_id is not None,
    }


@click.command()
@click.option(
    "--by", "dimension", type=click.Choice(["work", "host", "day"]), default="work", show_default=True
)
@click.option("--days", type=click.IntRange(1), help="Only matches first seen in the last N days.")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True
)
@bom_option
@pass_context
@friendly_errors
def report(context: CliContext, dimension: str, days: int | None, fmt: str, bom: bool) -> None:
    """Match counts per work, per host or per day, by review status.

    CSV columns: key, flagged, confirmed, dismissed, licensed, pages, total (the same as the JSON fields),
    after a UTF-8 byte order mark unless --no-bom."""
    from datetime import timedelta

    from fptrack.analytics.rollups import match_rollup
    from fptrack.storage.models import utcnow

    since = utcnow() - timedelta(days=days) if days else None
    with context.session() as session:
        rows = match_rollup(session, dimension, since=since)  # type: ignore[arg-type]
    if fmt == "json":
        for row in rows:
            click.echo(json.dumps(row.as_json(), ensure_ascii=False))
    elif fmt == "csv":
        from fptrack.analytics.rollups import ROLLUP_COLUMNS

        echo_csv(ROLLUP_COLUMNS, (row.as_json() for row in rows), bom=bom)
    elif not rows:
        click.echo("no matches yet")
    else:
        print_table(
            [dimension, "flagged", "confirmed", "dismissed", "licensed", "pages"],
            [(r.key, r.flagged, r.confirmed, r.dismissed, r.licensed, r.pages) for r in rows],
        )
