"""Pirate networks on a real database (SQLite and PostgreSQL): the page Simhash written at the end of the
crawl stage, near duplicates on other sites counted per pair of sites, networks as connected components."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.compare import service
from fptrack.compare.licensing import add_licensed_site
from fptrack.compare.networks import find_networks, network_layout, observe_pages
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.storage.models import Fingerprint, NearDuplicate, Page, SitePair
from fptrack.storage.sites import site_ids

_CHAPTERS = demo_chapters("alley.txt") + demo_chapters("lighthouse.txt")
# pages of three chapters each (~1,100 characters): the demo's chapters alone are so short that a template
# line moves their Simhash by several bits, where a real chapter page (3,000+ characters) barely moves
CHAPTERS = [_CHAPTERS[i] + "\n" + _CHAPTERS[(i + 1) % 6] + "\n" + _CHAPTERS[(i + 3) % 6] for i in range(6)]


def _store(session: Session, host: str, texts: list[str], *, around: tuple[str, str] = ("", "")) -> list[int]:
    site = site_ids(session, [host])[host]
    ids = []
    for number, text in enumerate(texts):
        url = f"http://{host}/{number}.html"
        page = Page(
            url=url,
            final_url=url,
            host=host,
            status=200,
            encoding="utf-8",
            title="t",
            site_id=site,
            text=f"{around[0]}\n{text}\n{around[1]}",
        )
        session.add(page)
        session.flush()
        ids.append(page.id)
    return ids


def _sites(session: Session, host: str) -> int:
    return site_ids(session, [host])[host]


def test_clone_sites_become_one_network_and_the_first_is_its_source(
    session: Session, settings: Settings
) -> None:
    work = register_work_file(session, DEMO_DATA / "alley.txt")
    service.index_work(session, work.work_id, settings)
    first = _store(session, "source.example", CHAPTERS)
    service.process_pages(session, first, settings)
    clone = _store(session, "clone.example", CHAPTERS[:5], around=("笔趣阁 最快更新", "上一章 目录 下一章"))
    other = _store(
        session, "news.example", [(DEMO_DATA / "library_news.txt").read_text("utf-8"), CHAPTERS[0]]
    )
    service.process_pages(session, clone + other, settings)
    session.commit()

    kind = network_layout(settings).kind
    simhashes = session.scalar(select(func.count()).select_from(Fingerprint).where(Fingerprint.kind == kind))
    assert simhashes == len(first) + len(clone) + len(other)
    # every clone page found its original, and knows which came first
    pairs = {(a, b) for a, b in session.execute(select(NearDuplicate.page_id, NearDuplicate.earlier_page_id))}
    assert {(c, f) for c, f in zip(clone, first, strict=False)} <= pairs
    a, b = sorted((_sites(session, "source.example"), _sites(session, "clone.example")))
    pair = session.get(SitePair, (a, b))
    assert pair is not None and pair.shared_pages == 5

    networks = find_networks(session, settings)
    assert len(networks) == 1  # news.example shares one page: below FPTRACK_NETWORK_MIN_SHARED
    network = networks[0]
    assert {s.host for s in network.sites} == {"source.example", "clone.example"}
    assert network.source.host == "source.example"
    assert network.copies >= 5 and [w for w, _, _ in network.works] == [work.work_id]
    assert network.as_json()["source"] == "source.example"


def test_observing_again_counts_nothing_twice_and_licensed_sites_stay_out(
    session: Session, settings: Settings
) -> None:
    work = register_work_file(session, DEMO_DATA / "alley.txt")
    one = _store(session, "one.example", CHAPTERS)
    two = _store(session, "two.example", CHAPTERS)
    partner = _store(session, "partner.example", CHAPTERS)
    add_licensed_site(session, work.work_id, "partner.example")
    observe_pages(session, one, settings)
    observe_pages(session, two + partner, settings)
    observe_pages(session, two, settings)  # a re-crawl of unchanged pages
    session.commit()
    a, b = sorted((_sites(session, "one.example"), _sites(session, "two.example")))
    assert session.get(SitePair, (a, b)).shared_pages == len(CHAPTERS)
    hosts = [{s.host for s in n.sites} for n in find_networks(session, settings)]
    assert hosts == [{"one.example", "two.example"}]


def test_networks_can_be_switched_off(session: Session, settings: Settings) -> None:
    ids = _store(session, "off.example", CHAPTERS[:2])
    observe_pages(session, ids, settings.with_overrides(networks=False))
    assert session.scalar(select(func.count()).select_from(Fingerprint)) == 0
