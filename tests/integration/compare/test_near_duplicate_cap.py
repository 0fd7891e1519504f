"""The near duplicates a page records are bounded (``FPTRACK_NETWORK_PAIRS_PER_SITE``,
``FPTRACK_NETWORK_MAX_PAIRS``) while the networks stay what they were, on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.cli.demo import demo_chapters
from fptrack.compare.networks import find_networks, observe_pages
from fptrack.core.settings import Settings
from fptrack.storage.models import NearDuplicate, Page, SitePair
from fptrack.storage.sites import site_ids

_PARTS = demo_chapters("alley.txt") + demo_chapters("lighthouse.txt")
# pages of three demo chapters each (~1,100 characters), six different texts
TEXTS = [_PARTS[i] + "\n" + _PARTS[(i + 1) % 6] + "\n" + _PARTS[(i + 3) % 6] for i in range(6)]


def _store(session: Session, host: str, texts: list[str]) -> list[int]:
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
            text=text,
        )
        session.add(page)
        session.flush()
        ids.append(page.id)
    return ids


def _recorded(session: Session, page_id: int) -> list[tuple[int, int]]:
    """(earlier page, its site) of the pairs recorded for ``page_id`` as the later page."""
    return [
        (int(p), int(s))
        for p, s in session.execute(
            select(NearDuplicate.earlier_page_id, Page.site_id)
            .join(Page, Page.id == NearDuplicate.earlier_page_id)
            .where(NearDuplicate.page_id == page_id)
            .order_by(Page.site_id)
        )
    ]


def test_a_much_copied_text_records_one_page_per_other_site_and_at_most_the_limit(
    session: Session, settings: Settings
) -> None:
    # one text stored three times on a first site, once on each of five more
    repeated = _store(session, "repeat.example", [TEXTS[0]] * 3)
    singles = [_store(session, f"s{n}.example", [TEXTS[0]])[0] for n in range(5)]
    observe_pages(session, repeated + singles, settings)
    fresh = _store(session, "new.example", [TEXTS[0]])[0]
    observe_pages(session, [fresh], settings)
    recorded = _recorded(session, fresh)
    assert [s for _, s in recorded] == sorted(
        site_ids(session, ["repeat.example"] + [f"s{n}.example" for n in range(5)]).values()
    )
    assert recorded[0][0] == repeated[0]  # of a site's copies at one distance, the one stored first

    capped = settings.with_overrides(network_max_pairs=2)
    late = _store(session, "late.example", [TEXTS[0]])[0]
    observe_pages(session, [late], capped)
    assert [s for _, s in _recorded(session, late)] == [s for _, s in recorded][:2]  # the lowest site ids
    # every stored copy would have been a row before the cap: 3 + 5 + 1 earlier copies
    assert (
        session.scalar(select(func.count()).select_from(NearDuplicate).where(NearDuplicate.page_id == late))
        == 2
    )


def test_clone_sites_stay_one_network_with_one_recorded_pair_a_page(
    session: Session, settings: Settings
) -> None:
    """The networks are connected components: a page needs to record one sister site, not all of them."""
    one_pair = settings.with_overrides(network_max_pairs=1)
    hosts = [f"clone{n}.example" for n in range(5)]
    for host in hosts:  # crawled one after another, each site all six texts
        observe_pages(session, _store(session, host, TEXTS), one_pair)
    _store(session, "news.example", [TEXTS[0]])  # stored, never observed: no evidence
    session.commit()
    networks = find_networks(session, settings)
    assert [{s.host for s in n.sites} for n in networks] == [set(hosts)]
    assert networks[0].source.host == "clone0.example"
    # each later site's pages all paired with one earlier site: six pages of evidence per link
    assert session.scalar(select(func.count()).select_from(NearDuplicate)) == 6 * (len(hosts) - 1)
    assert set(session.scalars(select(SitePair.shared_pages))) == {6}
