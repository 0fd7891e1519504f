from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA
from fptrack.compare.corpus import load_corpus_stats, refresh_corpus_stats
from fptrack.compare.works import register_work_file
from fptrack.fingerprint.normalize import normalize
from fptrack.fingerprint.stats import CorpusStats
from fptrack.storage.models import Chapter, Page


def test_statistics_are_built_from_the_store_and_updated_incrementally(session: Session) -> None:
    assert load_corpus_stats(session) is None
    register_work_file(session, DEMO_DATA / "lighthouse.txt")
    first = refresh_corpus_stats(session)
    assert (first.documents_added, first.documents, first.version) == (3, 3, 1)
    assert refresh_corpus_stats(session).version is None  # nothing new: no new version

    news = (DEMO_DATA / "library_news.txt").read_text("utf-8")
    session.add_all(
        [
            Page(url="http://a.test/1", final_url="http://a.test/1", host="a.test", status=200, text=news),
            Page(url="http://a.test/404", final_url="http://a.test/404", host="a.test", status=404, text=""),
        ]
    )
    register_work_file(session, DEMO_DATA / "alley.txt")
    session.flush()
    second = refresh_corpus_stats(session)
    assert (second.documents_added, second.documents, second.version) == (4, 7, 2)

    # incremental == from scratch over the same documents
    texts = [c.text for c in session.query(Chapter).order_by(Chapter.id)] + [news]
    scratch = CorpusStats.from_documents(normalize(t).text for t in texts)
    assert load_corpus_stats(session) == scratch
    assert load_corpus_stats(session).pinyin_reference() is not None
