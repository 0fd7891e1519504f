"""Discovery end to end on loopback sites (SQLite and PostgreSQL): a monitored pirate site's mirror notice and
friend links become candidates, search results too (licensed partners left out), every candidate is probed
with a few guarded requests and scored by the product's compare, decisions are remembered; the private-address
guard refuses probes of loopback sites unless they are allowed; the command line round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.cli.main import main
from fptrack.compare import service
from fptrack.compare.licensing import add_licensed_site
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.jobs.discovery import (
    CandidateError,
    accept_candidate,
    make_fetcher,
    outbound_links,
    probe_site,
    reject_candidate,
    run_discovery,
)
from fptrack.jobs.search_providers import configured_providers
from fptrack.jobs.sites import SiteSpec, add_site
from fptrack.storage.db import create_engine_for, session_factory
from fptrack.storage.models import DiscoveryCandidate, Page, Site, SiteOutboundHost
from testbed.search_provider import serve_search_provider
from testbed.sites import Page as Served
from testbed.sites import SiteURL, chapter_page, serve_site
from tests.support.cli import fptrack

_CHAPTERS = demo_chapters("alley.txt") + demo_chapters("lighthouse.txt")
TEXTS = [_CHAPTERS[i] + "\n" + _CHAPTERS[(i + 1) % 6] + "\n" + _CHAPTERS[(i + 3) % 6] for i in range(6)]
NEWS = (DEMO_DATA / "library_news.txt").read_text("utf-8")


def _book(texts: list[str], template: str) -> dict[str, Served]:
    """A pirate site: a home page listing its chapters, one page per chapter."""
    links = "".join(f'<li><a href="/book/{i}.html">第{i + 1}章 夜读</a></li>' for i in range(len(texts)))
    pages: dict[str, Served] = {
        "/": Served.html(f"<html><body><h1>笔趣阁</h1><ul>{links}</ul></body></html>")
    }
    for i, text in enumerate(texts):
        pages[f"/book/{i}.html"] = chapter_page(f"第{i + 1}章 夜读", text.split("\n"), template=template)
    return pages


def _known_site(session: Session, settings: Settings, url: str) -> Site:
    """A monitored pirate site whose crawled pages copy the registered works."""
    for name in ("alley.txt", "lighthouse.txt"):
        work = register_work_file(session, DEMO_DATA / name)
        service.index_work(session, work.work_id, settings)
    site = add_site(session, SiteSpec(name="known", start_urls=(url + "/",), allow_private=True))
    ids = []
    for i, text in enumerate(TEXTS):
        page = Page(
            url=f"{url}/book/{i}.html",
            final_url=f"{url}/book/{i}.html",
            host=site.host,
            status=200,
            encoding="utf-8",
            title="t",
            text=text,
            site_id=site.id,
        )
        session.add(page)
        session.flush()
        ids.append(page.id)
    service.process_pages(session, ids, settings)
    session.commit()
    return site


def test_outbound_links_tell_mirror_notices_from_friend_links() -> None:
    markup = """<html><body><p>本站新域名：<a href="http://new.example/">new.example</a></p>
      <p>最新网址：www.latest.example 请收藏</p>
      <div class="friendlinks"><a href="http://friend.example/">友情链接</a>
      <a href="/book/1.html">第一章</a></div>
      </body></html>"""
    assert outbound_links(markup, "http://old.example/", "old.example") == {
        "new.example": ("mirror", "http://new.example/"),
        "www.latest.example": ("mirror", "http://www.latest.example"),
        "friend.example": ("link", "http://friend.example/"),
    }


def test_discovery_proposes_probes_and_remembers(
    session: Session, engine: Engine, settings: Settings
) -> None:
    with (
        serve_site({"/": Served.html(f"<html><body><p>{NEWS}</p></body></html>")}) as unrelated,
        serve_site(_book(TEXTS[:5], "html5-article")) as clone,
        serve_site({"/": Served.html("<p>正版</p>")}) as partner,
    ):
        home = _book(TEXTS, "biquge")
        home["/"] = Served.html(
            f'<html><body><p>本站新域名：<a href="{clone.url("/")}">点此访问</a></p>'
            f'<div class="links"><a href="{unrelated.url("/")}">友情链接</a></div></body></html>'
        )
        with (
            serve_site(home) as known,
            serve_search_provider(
                lambda q: [(clone.url("/book/1.html"), q, ""), (partner.url("/read"), q, "")]
            ) as search,
        ):
            site = _known_site(session, settings, known)
            add_licensed_site(session, 1, partner.key)
            session.commit()
            settings = settings.with_overrides(search_providers=("serpapi",), **search.endpoints())
            report = run_discovery(
                session_factory(engine),
                settings,
                providers=configured_providers(settings),
                allow_private=["127.0.0.1"],
            )
            again = run_discovery(
                session_factory(engine), settings, providers=[], allow_private=["127.0.0.1"]
            )

    assert report.seeds == [known.key] and report.errors == []
    found = {c["host"]: c for c in report.candidates}
    assert set(found) == {clone.key, unrelated.key}  # the licensed partner is never proposed
    mirror = found[clone.key]
    assert (mirror["source"], mirror["detail"], mirror["state"]) == (
        "link",
        f"mirror notice on {known.key}",
        "probed",
    )
    assert mirror["copies"] >= 3 and mirror["score"] >= 0.75 and mirror["mirror_of_site_id"] == site.id
    assert mirror["requests"] <= settings.discovery_probe_pages + 1  # robots.txt and the pages
    assert (found[unrelated.key]["state"], found[unrelated.key]["copies"]) == ("clean", 0)
    assert again.proposed == 0 and again.probed == 0  # nothing proposed twice
    kinds = dict(session.execute(select(SiteOutboundHost.host, SiteOutboundHost.kind)).all())
    assert kinds == {clone.key: "mirror", unrelated.key: "link"}

    accepted = accept_candidate(session, mirror["id"], settings, allow_private=True)
    assert (accepted.managed, accepted.host, accepted.schedule) == (True, clone.key, "86400")
    reject_candidate(session, found[unrelated.key]["id"])
    with pytest.raises(CandidateError, match="rejected already"):
        reject_candidate(session, found[unrelated.key]["id"])
    session.commit()
    states = dict(session.execute(select(DiscoveryCandidate.host, DiscoveryCandidate.state)).all())
    assert states == {clone.key: "accepted", unrelated.key: "rejected"}


def test_a_probe_refuses_private_addresses_unless_allowed(session: Session, settings: Settings) -> None:
    with serve_site(_book(TEXTS[:2], "html5-article")) as site:
        refused = probe_site(session, site.url("/"), settings, make_fetcher(settings))
        allowed = probe_site(session, site.url("/"), settings, make_fetcher(settings, [site.key]))
        # the refused probe sent nothing; the allowed one: robots.txt, the landing page, the chapters first
        assert site.requests[:4] == ["/robots.txt", "/", "/book/0.html", "/book/1.html"]
        assert len(site.requests) == 1 + settings.discovery_probe_pages
    assert refused.pages == 0 and "private-address guard" in refused.error
    assert allowed.error == "" and allowed.pages == settings.discovery_probe_pages and allowed.text_pages == 2
    assert allowed.requests == len(site.requests)


@pytest.mark.postgres
def test_the_command_line_round_trip(postgres_settings: Settings, tmp_path: Path) -> None:
    engine_settings = postgres_settings
    from fptrack.storage.db import create_engine_for

    engine = create_engine_for(engine_settings)
    env = {"FPTRACK_DATABASE_URL": engine_settings.database_url, "FPTRACK_SITE_RATE": "50"}
    try:
        with serve_site(_book(TEXTS[:4], "html5-article")) as clone:
            home = _book(TEXTS, "biquge")
            home["/"] = Served.html(f'<p>最新网址：<a href="{clone.url("/")}">{clone.key}</a></p>')
            with serve_site(home) as known:
                with Session(engine) as session:
                    _known_site(session, engine_settings, known)
                result = fptrack(
                    tmp_path, "discover", "--format", "json", "--allow-private-host", "127.0.0.1", **env
                )
        assert result.returncode == 0, result.stderr
        entries = json.loads(result.stdout)["candidates"]
        assert [(e["host"], e["state"], e["source"]) for e in entries] == [(clone.key, "probed", "link")]
        listed = fptrack(tmp_path, "candidates", "list", **env)
        assert clone.key in listed.stdout and "probed" in listed.stdout
        accepted = fptrack(tmp_path, "candidates", "accept", str(entries[0]["id"]), "--allow-private", **env)
        assert accepted.returncode == 0 and "monitoring site" in accepted.stdout, accepted.stderr
        twice = fptrack(tmp_path, "candidates", "reject", str(entries[0]["id"]), **env)
        assert (
            twice.returncode == 1 and "accepted already" in twice.stderr and "Traceback" not in twice.stderr
        )
        networks = fptrack(tmp_path, "networks", "--format", "json", **env)
        assert networks.returncode == 0 and networks.stdout == ""  # the probe stored no page
        table = fptrack(tmp_path, "networks", **env)
        assert "no networks yet" in table.stdout
    finally:
        engine.dispose()


def test_the_beat_runs_discovery_only_when_enabled(sqlite_settings: Settings) -> None:
    from fptrack.jobs import tasks

    app = tasks.configure(sqlite_settings)
    assert "fptrack-discover" not in app.conf.beat_schedule
    enabled = sqlite_settings.with_overrides(discovery_every=3600.0)
    app = tasks.configure(enabled)
    assert app.conf.beat_schedule["fptrack-discover"] == {"task": "fptrack.discover", "schedule": 3600.0}
    assert app.conf.task_routes["fptrack.discover"] == {"queue": enabled.crawl_task_queue}
    # in-process (no broker): the task runs here; nothing monitored yet, so nothing to discover
    assert tasks.discover.delay().get() == {
        "seeds": [],
        "proposed": 0,
        "probed": 0,
        "requests": 0,
        "errors": [],
        "warnings": [],
        "searches": {},
        "refused": {},
        "unreachable": {},
    }
    tasks.configure(sqlite_settings)


def _pirates_linking(known_pages: dict[str, Served], clone: SiteURL, friend: SiteURL) -> dict[str, Served]:
    """``known_pages`` with a home page that gives ``clone`` as its new address and links to ``friend``."""
    known_pages["/"] = Served.html(
        f'<p>最新网址：<a href="{clone.url("/")}">{clone.key}</a></p>'
        f'<div class="links"><a href="{friend.url("/")}">友情链接</a></div>'
    )
    return known_pages


def _monitor(settings: Settings, known: SiteURL) -> None:
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            _known_site(session, settings, known)  # monitored with allow_private
    finally:
        engine.dispose()


def test_discovery_uses_each_sites_allowance_and_says_what_it_refused(sqlite_settings: Settings) -> None:
    """Loopback sites monitored with --allow-private are fetched by discovery on that allowance; candidates
    on loopback are refused, said so (how to allow them included), left new, and probed once allowed."""
    env = {"FPTRACK_DATABASE_URL": sqlite_settings.database_url, "FPTRACK_SITE_RATE": "50"}
    runner = CliRunner()
    with (
        serve_site(_book(TEXTS[:4], "html5-article")) as clone,
        serve_site(_book(TEXTS[2:6], "html5-article")) as friend,
        serve_site(_pirates_linking(_book(TEXTS, "biquge"), clone, friend)) as known,
    ):
        _monitor(sqlite_settings, known)
        refused = runner.invoke(main, ["discover", "--format", "json"], env=env)
        assert refused.exit_code == 0, refused.output
        summary = json.loads(refused.stdout)
        # the monitored site's own allowance let discovery read it; the candidates were never reached
        assert known.page_requests and clone.requests == friend.requests == []
        assert (summary["seeds"], summary["proposed"], summary["probed"]) == ([known.key], 2, 0)
        assert summary["requests"] == len(known.requests) and summary["unreachable"] == {}
        assert set(summary["refused"]) == {clone.key, friend.key}
        for host, why in summary["refused"].items():
            assert why.startswith("refused by the private-address guard")
            assert f"--allow-private-host {host}" in why
            assert f"warning: not fetched: {host}: refused by the private-address guard" in refused.stderr
        assert {(c["host"], c["state"]) for c in summary["candidates"]} == {
            (clone.key, "new"),
            (friend.key, "new"),
        }

        table = runner.invoke(main, ["discover"], env=env)
        assert "0 new candidate(s), 0 probed" in table.stdout
        assert "2 host(s) refused by the private-address guard" in table.stdout

        allowed = runner.invoke(
            main, ["discover", "--format", "json", "--allow-private-host", "127.0.0.1"], env=env
        )
        summary = json.loads(allowed.stdout)
        assert summary["refused"] == {} and summary["probed"] == 2 and clone.page_requests
        assert {c["state"] for c in summary["candidates"]} == {"probed"}


@pytest.mark.slow
def test_a_loopback_candidate_accepted_with_its_allowance_is_crawled(
    sqlite_settings: Settings, tmp_path: Path
) -> None:
    """``candidates accept`` warns, as ``sites add`` does, about a candidate on loopback accepted without
    --allow-private; one accepted with it is crawled (a crawl in a child process, as a user runs it)."""
    env = {"FPTRACK_DATABASE_URL": sqlite_settings.database_url, "FPTRACK_SITE_RATE": "50"}
    runner = CliRunner()
    with (
        serve_site(_book(TEXTS[:4], "html5-article")) as clone,
        serve_site(_book(TEXTS[2:6], "html5-article")) as friend,
    ):
        with serve_site(_pirates_linking(_book(TEXTS, "biquge"), clone, friend)) as known:
            _monitor(sqlite_settings, known)
            found = runner.invoke(
                main, ["discover", "--format", "json", "--allow-private-host", "127.0.0.1"], env=env
            )
        ids = {c["host"]: c["id"] for c in json.loads(found.stdout)["candidates"]}

        accept = ["candidates", "accept"]
        with_flag = runner.invoke(main, [*accept, str(ids[clone.key]), "--allow-private"], env=env)
        assert with_flag.exit_code == 0 and with_flag.stderr == "", with_flag.output
        without = runner.invoke(main, [*accept, str(ids[friend.key])], env=env)
        assert without.exit_code == 0, without.output
        friend_site = friend.key.replace(":", "-")
        assert without.stderr == (
            f"warning: 127.0.0.1 is a private or loopback address: crawls of {friend_site} will be refused; "
            f"allow it with `fptrack sites edit {friend_site} --allow-private`\n"
        )

        probed = len(clone.page_requests)
        crawled = fptrack(tmp_path, "sites", "run", clone.key.replace(":", "-"), "--quiet", **env)
        assert crawled.returncode == 0, crawled.stderr
        assert len(clone.page_requests) >= probed + 4  # its home page and its four chapters, at least
