"""``fptrack works``: register, describe (rights data and proofs), license, list and remove the works to
protect.

Registering is :func:`compare.works.register_work_file` (fingerprinting and the retroactive check are the task
``index_work``), licences :mod:`compare.licensing`, deleting :func:`storage.housekeeping.delete_works`. This
module parses options, warns about what the compare cannot find, and refuses to delete evidence unasked.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from sqlalchemy import func, select

from fptrack.cli.common import (
    EXIT_FAILURE,
    CliContext,
    CliError,
    echo_error,
    echo_warning,
    friendly_errors,
    known_errors,
    pass_context,
    print_table,
)
from fptrack.compare.works import remove_work, short_chapters

if TYPE_CHECKING:
    from fptrack.compare.works import RegisteredWork

__all__ = ["works"]

F = TypeVar("F", bound=Callable[..., Any])


def _rights_options(command: F) -> F:
    """The options that set a work's rights data (services.rights.WORK_RIGHTS_FIELDS) and add its proofs."""
    options = [
        click.option("--author", help="The work's author."),
        click.option("--owner", "owner_name", help="Its rights owner (default: the sender, as the owner)."),
        click.option("--owner-address", "owner_address", help="The owner's postal address."),
        click.option("--owner-email", "owner_email", help="The owner's email address."),
        click.option("--owner-phone", "owner_phone", help="The owner's telephone number."),
        click.option(
            "--registration",
            "registration_number",
            help="The registration certificate's number (作品登记证书号).",
        ),
        click.option("--original-url", "original_url", help="Where the authorised original is published."),
        click.option(
            "--proof",
            "proofs",
            multiple=True,
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="A proof of ownership of this work (作品登记证书, 版权证明; repeatable): cited and attached "
            "by every notice about it, and needed to send one.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _save_rights(
    context: CliContext,
    work_id: int,
    proofs: tuple[Path, ...],
    use_proofs: tuple[int, ...],
    **fields: str | None,
) -> str:
    """Set the rights data given, add the proof files and take over the stored proofs named; what was done."""
    from fptrack.cli.senders import read_proof
    from fptrack.services.rights import add_proof, assign_proof, save_work_rights

    with context.session() as session:
        work = save_work_rights(session, work_id, **fields)
        for path in proofs:
            add_proof(
                session, path.name, read_proof("--proof", path), kind="ownership_certificate", work=work
            )
        for proof_id in use_proofs:
            assign_proof(session, proof_id, work=work)
        session.flush()
        owner = work.owner_name or "the sender"
        certificates = sum(1 for proof in work.proofs if proof.kind == "ownership_certificate")
        return f"work #{work.id} {work.title!r}: owner {owner}; {certificates} proof(s) of ownership"


@click.group()
def works() -> None:
    """Register and list the works to protect."""


@works.command("add")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--title", help="Title of the work (default: the file name). Only with a single file.")
@click.option(
    "--wait",
    is_flag=True,
    help="With workers (FPTRACK_BROKER_URL): wait until they have fingerprinted each work and compared it "
    "with the pages crawled before, and print what they found (without a broker this is always so).",
)
@click.option(
    "--release-of",
    "release_of",
    type=click.IntRange(1, 2**63 - 1),
    metavar="WORK_ID",
    help="The file is a new chapter (or volume) of work WORK_ID, released now: the monitored sites that "
    "copied WORK_ID are crawled every FPTRACK_RELEASE_EVERY seconds (30) for FPTRACK_RELEASE_WINDOW (an "
    "hour), when pirates repost (docs/monitoring.md, 'Releases').",
)
@_rights_options
@pass_context
@friendly_errors
def works_add(
    context: CliContext,
    /,
    files: tuple[Path, ...],
    title: str | None,
    wait: bool,
    release_of: int | None,
    proofs: tuple[Path, ...],
    **rights: str | None,
) -> None:
    """Register works from text files.

    Chapters are found from their headings (第…章/回/节, Chapter N). The encoding (UTF-8, GB18030/GBK or Big5)
    is detected from the bytes. Registering a work also compares it with every page crawled before
    (retroactive detection): right here without a broker, else on the workers (--wait waits for them). The
    rights options (--author, --owner..., --proof) describe a single work; `fptrack works edit` sets them
    later."""
    from fptrack.compare.works import register_work_file

    if title and len(files) > 1:
        raise click.UsageError("--title applies to a single file; register the files one by one")
    if (proofs or any(value is not None for value in rights.values())) and len(files) > 1:
        raise click.UsageError("the rights options describe a single work; register the files one by one")
    if release_of is not None:
        _released_work(context, release_of)
    tasks = context.tasks()
    failures = 0
    queued: list[int] = []
    for path in files:
        try:
            with context.session() as session:
                registered = register_work_file(session, path, title=title)
                fresh = not registered.already_registered
                too_short = short_chapters(session, registered.work_id) if fresh else []
        except known_errors() as error:
            echo_error(str(error))
            failures += 1
            continue
        if proofs or any(value is not None for value in rights.values()):
            try:
                click.echo(_save_rights(context, registered.work_id, proofs, (), **rights))
            except known_errors() as error:
                echo_error(str(error))
                failures += 1
        if registered.already_registered:
            click.echo(f"{path}: already registered as work #{registered.work_id} ({registered.title})")
            continue
        click.echo(
            f"registered work #{registered.work_id} {registered.title!r}: {registered.chapters} chapters, "
            f"{registered.characters:,} characters ({registered.encoding})"
        )
        if too_short:
            echo_warning(_too_short_warning(registered, too_short))
        if release_of is not None:
            click.echo(_record_release(context, release_of, registered.work_id))
        try:
            result = tasks.index_work.delay(registered.work_id)
        except Exception as error:
            if context.settings.tasks_in_process:
                raise
            echo_error(
                f"work #{registered.work_id} is saved but could not be handed to the workers "
                f"({type(error).__name__}: {error}); `fptrack maintain` or the workers' sweep will "
                "index it"
            )
            failures += 1
            continue
        if context.settings.tasks_in_process:
            flagged = result.get()
            if flagged:
                click.echo(f"  retroactive check: {flagged} already-crawled page(s) copy this work")
            waiting = _meaning_pending(context)
            if waiting:
                click.echo(
                    f"  meaning path: {waiting} already-crawled page(s) may rewrite or translate a "
                    "registered work; `fptrack meaning run` checks them (minutes of CPU: not done here)"
                )
        else:
            click.echo(f"  queued for the workers to fingerprint (task {result.id})")
            queued.append(registered.work_id)
    if wait and queued and not _wait_for_indexing(context, queued):
        failures += 1
    elif queued and not wait:
        _say_if_no_worker(context, queued)
    if failures:
        sys.exit(EXIT_FAILURE)


def _meaning_pending(context: CliContext) -> int:
    """The meaning checks pending now (jobs.meaning): in-process, the retroactive gate leaves them for
    ``fptrack meaning run`` rather than hold the registration for minutes of model time."""
    from fptrack.jobs.meaning import pending_checks

    if not context.settings.meaning:
        return 0
    with context.session() as session:
        return len(pending_checks(session))


def _released_work(context: CliContext, work_id: int) -> None:
    """:class:`CliError` when ``--release-of`` names no registered work."""
    from fptrack.storage.models import Work

    with context.session() as session:
        if session.get(Work, work_id) is None:
            raise CliError(f"--release-of {work_id}: there is no work with that id (fptrack works list)")


def _record_release(context: CliContext, work_id: int, new_work_id: int) -> str:
    """Record the registration of ``new_work_id`` as a release of ``work_id`` now; the line that says so."""
    from fptrack.jobs.releases import ReleasePace, release_work
    from fptrack.storage.models import utcnow

    pace = ReleasePace.from_settings(context.settings)
    with context.session() as session:
        released = release_work(
            session, work_id, released_at=utcnow(), source="registration", ref=f"work:{new_work_id}",
            pace=pace, new_work_id=new_work_id,
        )  # fmt: skip
    if not pace.on:
        return f"  release of work #{work_id} recorded (release pacing is off: FPTRACK_RELEASE_WINDOW=0)"
    return (
        f"  release of work #{work_id}: {len(released.sites)} monitored site(s) that copied it crawled every "
        f"{max(pace.every, pace.tick):g} s for the next {pace.window:g} s"
    )


def _too_short_warning(work: RegisteredWork, too_short: list[int]) -> str:
    from fptrack.fingerprint.contract import CONTRACT

    least, named = CONTRACT.rule.min_copied, f"work #{work.work_id} {work.title!r}"
    if len(too_short) == work.chapters:
        return (
            f"{named}: every chapter has fewer than {least} letters and digits, the least a page must "
            "copy to be flagged (shorter overlaps count as quotations): no copy of it can be "
            "found"
        )
    shown = ", ".join(str(index) for index in too_short[:10]) + (", ..." if len(too_short) > 10 else "")
    return (
        f"{named}: {len(too_short)} of {work.chapters} chapters ({shown}) have fewer than {least} "
        "letters and digits, the least a page must copy to be flagged: copies of those chapters cannot "
        "be found"
    )


def _say_if_no_worker(context: CliContext, work_ids: list[int]) -> None:
    """A warning when no worker consumes the task queue: the queued works wait for one (`fptrack worker`)."""
    from fptrack.taskqueue import workers_on_queue

    queue = context.settings.task_queue
    if workers_on_queue(queue, first=True) == []:
        saved = ", ".join(f"#{w}" for w in work_ids)
        echo_warning(
            f"no worker consumes the queue {queue!r}: work(s) {saved} are saved and queued, and are "
            "fingerprinted and compared with the pages crawled before only once a worker runs: start one "
            "with `fptrack worker`"
        )


def _wait_for_indexing(context: CliContext, work_ids: list[int]) -> bool:
    """Wait until the workers have indexed ``work_ids`` (``works.indexed_at``), then say what each found among
    the pages crawled before; False (said on stderr) when no worker consumes the queue."""
    from sqlalchemy import distinct

    from fptrack.jobs.crawls import POLL_SECONDS
    from fptrack.storage.match_life import COPYING_STATUSES
    from fptrack.storage.models import Match, Work
    from fptrack.taskqueue import workers_on_queue

    settings = context.settings
    waiting, since = set(work_ids), time.monotonic()
    asked = False
    while waiting:
        with context.session() as session:
            done = set(
                session.scalars(
                    select(Work.id).where(Work.id.in_(sorted(waiting)), Work.indexed_at.is_not(None))
                )
            )
            if done:
                copying = (
                    select(Match.work_id, func.count(distinct(Match.page_id)))
                    .where(Match.work_id.in_(sorted(done)), Match.status.in_(COPYING_STATUSES))
                    .group_by(Match.work_id)
                )
                counts = {int(work_id): int(pages) for work_id, pages in session.execute(copying)}
                for work_id in sorted(done):
                    click.echo(
                        f"work #{work_id} fingerprinted: {counts.get(work_id, 0)} already-crawled "
                        "page(s) copy it"
                    )
        waiting -= done
        if not waiting:
            return True
        if not asked and time.monotonic() - since >= settings.no_worker_seconds:
            workers = workers_on_queue(settings.task_queue)
            asked = workers is not None
            if workers == []:
                saved = ", ".join(f"#{w}" for w in sorted(waiting))
                echo_error(
                    f"no worker consumes the queue {settings.task_queue!r}: start one with `fptrack "
                    f"worker`; the work(s) {saved} are saved and will be indexed once a worker "
                    "runs"
                )
                return False
        time.sleep(POLL_SECONDS)
    return True


@works.command("edit")
@click.argument("work_id", type=click.IntRange(1, 2**63 - 1))
@_rights_options
@click.option(
    "--use-proof",
    "use_proofs",
    multiple=True,
    type=click.IntRange(1, 2**63 - 1),
    help="A stored proof (its id in `fptrack senders list --format json`) that proves this work's ownership: "
    "a sender's proof filed before proofs had kinds is taken over, bytes unchanged (repeatable).",
)
@pass_context
@friendly_errors
def works_edit(
    context: CliContext,
    /,
    work_id: int,
    proofs: tuple[Path, ...],
    use_proofs: tuple[int, ...],
    **rights: str | None,
) -> None:
    """Set the rights data of work WORK_ID and add proofs of its ownership.

    Options given are set (an empty string clears one); the others are left as they are. A notice about the
    work names its owner as 权利人 and cites its own proofs, never another work's; without a proof of
    ownership it cannot be sent."""
    click.echo(_save_rights(context, work_id, proofs, use_proofs, **rights))


@works.command("show")
@click.argument("work_id", type=click.IntRange(1, 2**63 - 1))
@pass_context
@friendly_errors
def works_show(context: CliContext, work_id: int) -> None:
    """One work as JSON: its title, chapters, rights data and proofs."""
    from fptrack.services.rights import RightsError, work_rights_json
    from fptrack.storage.models import Work

    with context.session() as session:
        work = session.get(Work, work_id)
        if work is None:
            raise RightsError(f"there is no work with id {work_id} (fptrack works list)")
        record = {
            "id": work.id,
            "title": work.title,
            "source_name": work.source_name,
            "chapters": len(work.chapters),
            **work_rights_json(work),
        }
    click.echo(json.dumps(record, ensure_ascii=False))


@works.command("releases")
@click.argument("work_id", type=click.IntRange(1, 2**63 - 1))
@click.option(
    "--feed",
    metavar="URL",
    help="Read the work's releases from this RSS, Atom or JSON feed, every FPTRACK_RELEASE_FEED_EVERY "
    "seconds on the scheduler's beat (fetched like a re-check: the private-address guard, robots.txt, the "
    "site's pace); '' stops reading it.",
)
@pass_context
@friendly_errors
def works_releases(context: CliContext, work_id: int, feed: str | None) -> None:
    """The releases of work WORK_ID (newest first) and its release feed; --feed sets the feed.

    For FPTRACK_RELEASE_WINDOW seconds after a release, the monitored sites that copied the work are crawled
    every FPTRACK_RELEASE_EVERY seconds; the rest of the time less often than their schedule, so that their
    crawls per day stay those of the schedule (docs/monitoring.md, 'Releases')."""
    from fptrack.storage.models import Release, ReleaseFeed, Work, iso_utc
    from fptrack.storage.releases import copier_sites, set_feed
    from fptrack.storage.sites import site_of

    if feed is not None and feed.strip() and not site_of(feed.strip()):
        raise CliError(f"--feed {feed!r}: expected an http:// or https:// URL")
    with context.session() as session:
        if session.get(Work, work_id) is None:
            raise CliError(f"there is no work with id {work_id} (fptrack works list)")
        if feed is not None:
            set_feed(session, work_id, feed.strip())
        current = session.get(ReleaseFeed, work_id)
        rows = session.execute(
            select(Release.released_at, Release.source, Release.ref)
            .where(Release.work_id == work_id)
            .order_by(Release.released_at.desc(), Release.id.desc())
            .limit(50)
        ).all()
        copiers = len(copier_sites(session, work_id))
    if current is None:
        click.echo("release feed: none (set one with --feed URL)")
    else:
        state = (
            f"error: {current.error}" if current.error else "read" if current.checked_at else "not read yet"
        )
        click.echo(
            f"release feed: {current.url} ({state}; last read {iso_utc(current.checked_at) or 'never'})"
        )
    click.echo(f"monitored sites that copied it (crawled sooner after a release): {copiers}")
    if not rows:
        click.echo("no release recorded")
        return
    print_table(["released at", "source", "entry"], [(iso_utc(at), source, ref) for at, source, ref in rows])


@works.command("license")
@click.argument("work_id", type=int)
@click.argument("sites", nargs=-1, required=True)
@pass_context
@friendly_errors
def works_license(context: CliContext, work_id: int, sites: tuple[str, ...]) -> None:
    """Allow sites that publish a work under licence.

    SITES are hosts (or host:port) where work WORK_ID is published under licence: copies found there are
    recorded with status 'licensed' (see them with `fptrack matches --status licensed`), not flagged."""
    from fptrack.compare.licensing import add_licensed_site

    with context.session() as session:
        for site in sites:
            try:
                relabelled = add_licensed_site(session, work_id, site)
            except (LookupError, ValueError) as error:
                raise CliError(str(error).strip("'\"")) from None
            click.echo(f"work #{work_id}: {site} is licensed ({relabelled} existing match(es) relabelled)")


@works.command("list")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@pass_context
@friendly_errors
def works_list(context: CliContext, fmt: str) -> None:
    """List the registered works (JSON: one object per line, with each work's rights data and proofs)."""
    from fptrack.services.queries import work_rows

    with context.session() as session:
        found = work_rows(session, order="id")
        rows = [(w.id, w.title, w.chapters, w.characters, w.matches) for w in found]
        if fmt == "json":
            from fptrack.services.rights import work_rights_json
            from fptrack.storage.models import Work

            for w in found:
                work = session.get(Work, w.id)
                rights = work_rights_json(work) if work is not None else {}
                record = {
                    "id": w.id,
                    "title": w.title,
                    "chapters": w.chapters,
                    "matches": w.matches,
                    **rights,
                }
                click.echo(json.dumps(record, ensure_ascii=False))
            return
    if not rows:
        click.echo("no works registered yet: fptrack works add FILE")
        return
    print_table(["id", "title", "chapters", "characters", "matches"], rows)


@works.command("remove")
@click.argument("work_ids", metavar="ID...", nargs=-1, required=True, type=click.IntRange(1, 2**63 - 1))
@click.option(
    "--with-matches",
    is_flag=True,
    help="Also delete the works' matches, with their reviews, notes and takedown history: without it, a work "
    "that has matches is not removed.",
)
@pass_context
@friendly_errors
def works_remove(context: CliContext, work_ids: tuple[int, ...], with_matches: bool) -> None:
    """Remove works with their chapters and fingerprints.

    IDs are those of `fptrack works list`. A work with matches, in any review state, or with proofs of its
    rights is refused: they are evidence, with their reviews and takedown history. --with-matches removes them
    with it. To stop flagging
    copies on a site that may publish a work, see `fptrack works license` instead. Each work is removed on its
    own; exits 1 when any was not."""
    failures = 0
    for work_id in work_ids:
        try:
            with context.session() as session:
                removed = remove_work(session, work_id, with_matches=with_matches)
        except known_errors() as error:
            echo_error(str(error))
            failures += 1
            continue
        matches = f" and {removed.matches} match(es) with their reviews and takedown history"
        click.echo(
            f"removed work #{removed.work_id} {removed.title!r}: {removed.chapters} chapter(s) with "
            f"their fingerprints{matches if removed.matches else ''}"
        )
    if failures:
        sys.exit(EXIT_FAILURE)
