"""Candidates that survive rewording and language: the named entities of the registered chapters, in order.

The meaning path (``compare.meaning``) verifies a (page, chapter) pair by aligning sentence embeddings: about
10 CPU seconds a chapter. It cannot run against every registered chapter, nor on every crawled page. A synonym
pass, a clause shuffle or a translation changes the words but leaves the *names* standing (people, places,
titles: 刘备, 荆州, 花果山) and their order through the chapter. This module indexes them and answers, in
milliseconds, which chapters a page may be a rewrite or translation of (:func:`candidates`), or that it names
too few of any work's entities to be one (an empty list: the gate's "no").

**Entities of a work** (:func:`work_lexicon`). No trained NER model is downloaded: the segmenter the
product already ships (rjieba, jieba's dictionary and HMM) tags words with parts of speech; the words tagged
as person, place, organisation or other proper names (``nr``, ``nrfg``, ``nrt``, ``ns``, ``nt``, ``nz``) or
left unknown by the dictionary (``x``: names it has never seen) with two to four Han characters, seen at
least :data:`MIN_WORK_COUNT` times in the work, are its lexicon, with the common nouns the work has at least
:data:`MIN_NOUN_COUNT` times (the tagger calls 悟空 and 貂蝉 common nouns). The storyteller's formulas
(却说, 只见, 说道) are verbs to the tagger and never enter. What is no name and enters (二人, 将军) stays
with a low weight: such words are in most chapters of every work, and weights are inverse chapter
frequencies.

**Across scripts and romanizations** (:func:`forms`). Every Han entity is also indexed under its pinyin
without tones (pypinyin's bundled data) and its Wade-Giles form (:func:`wade_giles`, a syllable table of our
own), both written joined and stripped of apostrophes, hyphens and diacritics: 刘备 is also ``liubei``
and ``liupei``, 诸葛亮 ``zhugeliang`` and ``chukoliang``, 曹操 ``tsaotsao``. A Latin-script page is read
for its runs of capitalised words, each run of one to :data:`MAX_RUN_WORDS` words joined the same way
("Liu Bei", "Liu-Bei", "Ts'ao Ts'ao", "Chu-ko Liang"). Chinese pages and chapters are read through the
fingerprints' normalisation (``fingerprint.normalize``: OpenCC t2s per character), so a Traditional page
meets the Simplified entity.

**The index** (tables ``entity_chapters`` and ``entity_postings``, migration 0035): one row per (term,
chapter) with the occurrences and the first occurrence's place in the chapter (a share of its length, in ten
thousandths). :func:`index_chapters` fills a work's rows when it is fingerprinted (``compare.service
.fingerprint_work``) and replaces them when it runs again; the rows of a removed chapter or work go with it
(foreign keys, ``ON DELETE CASCADE``). ``entity_terms`` holds each term's chapter count and ``entity_stamp`` a
serial and the indexed chapters' count (migration 0036): :func:`index_chapters` adds what it writes, triggers
take off what any delete removes.

**The score** (:func:`candidates`). The page's strings that could be terms (:func:`page_keys`) are looked up
by key in ``entity_terms``, through a bounded per-process cache emptied when the stamp moves: a page costs
what its length does, whatever the index's size. Its terms, at most :data:`MAX_QUERY_TERMS` of the rarest, are
looked up in the postings; each chapter sharing at least :data:`MIN_SHARED` of them is scored by the sum of
their weights (idf: ``ln(1 + N / df)`` over the ``N`` indexed chapters, divided by ``ln(1 + N)``), times the
order factor: :data:`ORDER_FLOOR` plus the weighted share of the shared terms' pairs that come in the same
order in the page as in the chapter (first occurrences). A review naming three heroes shares too few terms;
fan fiction borrowing the works' names shares them in no chapter's order.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Generic, TypeVar

import numpy as np
from sqlalchemy import delete, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from fptrack.storage.chunks import id_chunks
from fptrack.storage.models import Chapter, EntityChapter, EntityPosting, EntityStamp, EntityTerm

__all__ = [
    "MIN_SCORE",
    "MIN_SHARED",
    "PageTerms",
    "add_terms",
    "candidates",
    "candidates_among",
    "chapter_postings",
    "forms",
    "index_chapters",
    "index_missing",
    "page_keys",
    "page_terms",
    "pinyin_syllables",
    "ranked",
    "romanized_key",
    "score_chapter",
    "wade_giles",
    "wade_giles_to_pinyin",
    "work_lexicon",
]

ENTITY_TAGS = frozenset({"nr", "nrfg", "nrt", "ns", "nt", "nz", "x"})
"""rjieba parts of speech taken for names: person, place, organisation, other proper nouns, and unknown
words (``x``: the dictionary has never seen them, as it has not seen most of a novel's minor characters)."""

MIN_WORK_COUNT = 2
NOUN_TAGS = frozenset({"n", "t"})
"""Common nouns (and time words) enter only when the work has them :data:`MIN_NOUN_COUNT` times: the tagger
calls many a protagonist a common noun (悟空, 观音, 貂蝉 are ``n``, 如来 is ``t``)."""
MIN_NOUN_COUNT = 5
"""A tagged word enters the work's lexicon when the work has it at least this often (once is mostly a
mis-segmentation)."""

NOT_LAST = frozenset("曰道等之乃也遂令与和及时")
"""A term ending in one of these is a name glued to a word by the segmenter (玄德曰, 曹操等): left out (the
name itself is tagged on its own elsewhere)."""

MAX_TERM_CHARS = 4
MIN_LATIN_KEY = 4  # a romanized key shorter than this ("an", "yi") is too easily an ordinary word
MAX_RUN_WORDS = 3  # "Zhuge Kong Ming": a name is at most three capitalised words

MIN_SHARED = 4
"""A chapter is a candidate only when the page has at least this many of its distinct terms."""

MIN_SCORE = 10.0
"""... and a score of at least this: the shared terms' weights (idf over the indexed chapters, divided by its
largest value, ``ln(1 + N)``: a term of one chapter weighs 1) times the order factor. Chosen on the ``tune``
split (``benchmarks/meaning_entities.py``): English translations score 17-18, Chinese rewrites and OCR
copies above 30, other novels, news and fan fiction with the works' names below 9."""

MAX_QUERY_TERMS = 64
"""The page's rarest terms looked up (a common name in every chapter of its work tells little)."""

ORDER_FLOOR = 0.25
"""The score's order factor runs from this (every pair reversed) to 1 + this (every pair in order)."""

SCORED_PER_LIMIT = 3  # chapters given the order factor: the heaviest this many times ``limit``
TIE = 200  # first occurrences closer than this (ten thousandths of the chapter) are not ordered pairs
POSITION_SCALE = 10_000

_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_LATIN = "A-Za-z\u00c0-\u024f\u1e00-\u1eff"  # Latin letters, with those of the extended blocks (ü, ê, ǎ)
_LATIN_WORD = re.compile(f"[{_LATIN}]+(?:['’\\-][{_LATIN}]+)*")
_RUN_BREAK = re.compile(r"[.!?;:,()\"“”\n]")
_STRIP = re.compile(r"['’\-\s]")


# ---------------------------------------------------------------------------------------------- romanization

_SYLLABLES = """
a ai an ang ao ba bai ban bang bao bei ben beng bi bian biao bie bin bing bo bu ca cai can cang cao
ce cen ceng cha chai chan chang chao che chen cheng chi chong chou chu chua chuai chuan chuang chui
chun chuo ci cong cou cu cuan cui cun cuo da dai dan dang dao de dei den deng di dia dian diao die
ding diu dong dou du duan dui dun duo e ei en eng er fa fan fang fei fen feng fo fou fu ga gai gan
gang gao ge gei gen geng gong gou gu gua guai guan guang gui gun guo ha hai han hang hao he hei hen
heng hong hou hu hua huai huan huang hui hun huo ji jia jian jiang jiao jie jin jing jiong jiu ju
juan jue jun ka kai kan kang kao ke kei ken keng kong kou ku kua kuai kuan kuang kui kun kuo la lai
lan lang lao le lei leng li lia lian liang liao lie lin ling liu long lou lu luan lun luo lv lve ma
mai man mang mao me mei men meng mi mian miao mie min ming miu mo mou mu na nai nan nang nao ne nei
nen neng ni nian niang niao nie nin ning niu nong nou nu nuan nuo nv nve o ou pa pai pan pang pao
pei pen peng pi pian piao pie pin ping po pou pu qi qia qian qiang qiao qie qin qing qiong qiu qu
quan que qun ran rang rao re ren reng ri rong rou ru ruan rui run ruo sa sai san sang sao se sen
seng sha shai shan shang shao she shei shen sheng shi shou shu shua shuai shuan shuang shui shun
shuo si song sou su suan sui sun suo ta tai tan tang tao te teng ti tian tiao tie ting tong tou tu
tuan tui tun tuo wa wai wan wang wei wen weng wo wu xi xia xian xiang xiao xie xin xing xiong xiu xu
xuan xue xun ya yan yang yao ye yi yin ying yo yong you yu yuan yue yun za zai zan zang zao ze zei
zen zeng zha zhai zhan zhang zhao zhe zhei zhen zheng zhi zhong zhou zhu zhua zhuai zhuan zhuang
zhui zhun zhuo zi zong zou zu zuan zui zun zuo
"""


def pinyin_syllables() -> tuple[str, ...]:
    """The toneless pinyin syllables of Mandarin (``v`` for ü), as pypinyin spells them: the table
    :func:`wade_giles` covers."""
    return tuple(_SYLLABLES.split())


# pinyin initial -> Wade-Giles initial; the finals below decide j/q/x (before i, ü) from zh/ch/sh
_INITIALS = (
    ("zh", "ch"), ("ch", "ch'"), ("sh", "sh"), ("b", "p"), ("p", "p'"), ("m", "m"), ("f", "f"), ("d", "t"),
    ("t", "t'"), ("n", "n"), ("l", "l"), ("g", "k"), ("k", "k'"), ("h", "h"), ("j", "ch"), ("q", "ch'"),
    ("x", "hs"), ("r", "j"), ("z", "ts"), ("c", "ts'"), ("s", "s"), ("y", "y"), ("w", "w"),
)  # fmt: skip
_SPECIAL = {
    "zhi": "chih", "chi": "ch'ih", "shi": "shih", "ri": "jih", "zi": "tzu", "ci": "tz'u", "si": "ssu",
    "e": "ê", "er": "êrh", "en": "ên", "eng": "êng", "yi": "i", "you": "yu", "yu": "yü", "yan": "yen",
    "ye": "yeh", "ge": "ko", "ke": "k'o", "he": "ho",
}  # fmt: skip
_FINALS = {"ian": "ien", "ie": "ieh", "üe": "üeh", "ong": "ung", "iong": "iung"}
_UO_KEPT = ("g", "k", "h", "sh")  # kuo, k'uo, huo, shuo keep the u; to, lo, tso, cho... drop it


def wade_giles(syllable: str) -> str:
    """The Wade-Giles spelling of one toneless pinyin ``syllable`` (``v`` or ``ü`` for ü), with its
    apostrophes and diacritics: ``bei`` -> ``pei``, ``cao`` -> ``ts'ao``, ``zhuo`` -> ``cho``, ``quan`` ->
    ``ch'üan``, ``xiang`` -> ``hsiang``, ``ge`` -> ``ko``. A syllable outside the table comes back with its
    initial and final converted by the same rules."""
    s = syllable.lower().replace("ü", "v")
    if s in _SPECIAL:
        return _SPECIAL[s]
    initial, wg_initial = next(((p, w) for p, w in _INITIALS if s.startswith(p)), ("", ""))
    final = s[len(initial) :].replace("v", "ü")
    if initial in ("j", "q", "x", "y") and final.startswith("u"):
        final = "ü" + final[1:]  # ju, quan, xue, yun: that u is ü
    if final == "uo" and initial not in _UO_KEPT:
        final = "o"
    elif final == "ui" and initial in ("g", "k"):
        final = "uei"
    elif final == "e" and initial:
        final = "ê"
    else:
        final = _FINALS.get(final, final)
    return wg_initial + final


@lru_cache(maxsize=1)
def _wade_giles_inverse() -> dict[str, str]:
    inverse: dict[str, str] = {}
    for syllable in pinyin_syllables():
        inverse.setdefault(wade_giles(syllable), syllable)
    return inverse


def wade_giles_to_pinyin(syllable: str) -> str | None:
    """The pinyin syllable a Wade-Giles ``syllable`` (with its apostrophes and diacritics) spells, or None:
    the inverse of :func:`wade_giles` on the table of :func:`pinyin_syllables` (where it is one to one)."""
    return _wade_giles_inverse().get(syllable.lower())


def romanized_key(text: str) -> str:
    """``text`` as a romanized term is indexed: lower case, without diacritics, apostrophes, hyphens or
    spaces ("Ts'ao Ts'ao" -> ``tsaotsao``, "Chu-ko Liang" -> ``chukoliang``, "Lü Bu" -> ``lubu``)."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return _STRIP.sub("", "".join(ch for ch in decomposed if not unicodedata.combining(ch)))


def _pinyin(term: str) -> list[str]:
    from pypinyin import lazy_pinyin  # its dictionaries load on first use, not at import of the product

    return [s.lower() for s in lazy_pinyin(term, v_to_u=False)]


def forms(term: str) -> set[str]:
    """The keys a Han entity ``term`` is indexed under: itself, its pinyin and its Wade-Giles forms
    (:func:`romanized_key`); a romanized key shorter than :data:`MIN_LATIN_KEY` letters is left out."""
    syllables = _pinyin(term)
    keys = {term}
    if all(s.isascii() and s.isalpha() for s in syllables):
        pinyin = "".join(syllables).replace("v", "ü")
        for key in (romanized_key(pinyin), romanized_key("".join(map(wade_giles, syllables)))):
            if len(key) >= MIN_LATIN_KEY:
                keys.add(key)
    return keys


# ------------------------------------------------------------------------------------------------ lexicon


def _han_text(text: str) -> str:
    """``text`` through the fingerprints' normalisation (Traditional -> Simplified per character, lower case,
    punctuation and spaces gone): what both sides of the Han match are read in."""
    from fptrack.fingerprint.normalize import normalize

    return normalize(text).text


def _is_han_term(word: str) -> bool:
    return 2 <= len(word) <= MAX_TERM_CHARS and _HAN_RUN.fullmatch(word) is not None


def work_lexicon(chapter_texts: Iterable[str]) -> set[str]:
    """The named entities of a work whose chapters are ``chapter_texts``: words tagged as names (or unknown)
    by rjieba, of two to four Han characters, at least :data:`MIN_WORK_COUNT` times in the work, not ending
    in a word glued to a name (:data:`NOT_LAST`)."""
    import rjieba

    counts: Counter[str] = Counter()
    nouns: set[str] = set()
    for text in chapter_texts:
        for word, tag in rjieba.tag(_han_simplified(text)):
            if (tag in ENTITY_TAGS or tag in NOUN_TAGS) and _is_han_term(word) and word[-1] not in NOT_LAST:
                counts[word] += 1
                if tag in NOUN_TAGS:
                    nouns.add(word)
    return {
        word
        for word, count in counts.items()
        if count >= (MIN_NOUN_COUNT if word in nouns else MIN_WORK_COUNT)
    }


def _han_simplified(text: str) -> str:
    """``text`` with its Han characters in Simplified script (per character, as the normalisation does) and
    its punctuation kept, so the tagger still sees sentence boundaries."""
    from fptrack.fingerprint.normalize import normalize

    normalized = normalize(text)
    out = list(text)
    for i, ch in zip(normalized.offsets.tolist(), normalized.text, strict=True):
        if _HAN_RUN.match(ch):
            out[i] = ch
    return "".join(out)


@dataclass(frozen=True)
class Occurrences:
    """How often a term is in a text and where first, in ten thousandths of the text."""

    count: int
    first: int


def _han_grams(text: str, prefixes: Container[str]) -> Iterator[tuple[str, int]]:
    """Every Han n-gram (2 to :data:`MAX_TERM_CHARS` characters) of ``text`` whose first two characters are
    in ``prefixes`` (those of the terms looked for: one look-up per character instead of three), with its
    offset."""
    for run in _HAN_RUN.finditer(text):
        s, start = run.group(), run.start()
        for i in range(len(s) - 1):
            if s[i : i + 2] in prefixes:
                for n in range(2, min(MAX_TERM_CHARS, len(s) - i) + 1):
                    yield s[i : i + n], start + i


def _occurrences(found: Iterable[tuple[str, int]], length: int) -> dict[str, Occurrences]:
    counts: Counter[str] = Counter()
    first: dict[str, int] = {}
    for term, offset in found:
        counts[term] += 1
        first.setdefault(term, offset)
    scale = max(1, length)
    return {
        t: Occurrences(n, min(POSITION_SCALE - 1, first[t] * POSITION_SCALE // scale))
        for t, n in counts.items()
    }


def chapter_postings(text: str, lexicon: set[str]) -> dict[str, Occurrences]:
    """The terms of ``lexicon`` in a chapter's ``text`` and their romanized forms, with their occurrences:
    every key of :func:`forms` of a Han term gets the Han term's occurrences."""
    han = _han_text(text)
    prefixes = {term[:2] for term in lexicon}
    found = _occurrences(((g, o) for g, o in _han_grams(han, prefixes) if g in lexicon), len(han))
    postings: dict[str, Occurrences] = {}
    for term, occurrences in found.items():
        for key in _forms_cached(term):
            known = postings.get(key)
            if known is None or occurrences.first < known.first:
                postings[key] = Occurrences(
                    occurrences.count + (known.count if known else 0), occurrences.first
                )
            else:
                postings[key] = Occurrences(known.count + occurrences.count, known.first)
    return postings


@lru_cache(maxsize=200_000)
def _forms_cached(term: str) -> frozenset[str]:
    return frozenset(forms(term))


# ------------------------------------------------------------------------------------------------ the index


def index_chapters(session: Session, work_id: int) -> int:
    """Build work ``work_id``'s lexicon from all its chapters and write every chapter's postings, replacing
    any rows they had (a work fingerprinted again, a chapter's text replaced); returns the rows written.
    Called by ``compare.service.fingerprint_work``, in its transaction. The rows deleted are taken off
    ``entity_terms`` and the stamp by triggers (migration 0036); those written are added here, the terms in
    their sorted order (two registrations wait for each other, never deadlock), and the stamp moves on."""
    chapters = [
        (int(cid), str(text))
        for cid, text in session.execute(
            select(Chapter.id, Chapter.text).where(Chapter.work_id == work_id).order_by(Chapter.index)
        )
    ]
    ids = [cid for cid, _ in chapters]
    for chunk in id_chunks(ids):
        session.execute(delete(EntityPosting).where(EntityPosting.chapter_id.in_(chunk)))
        session.execute(delete(EntityChapter).where(EntityChapter.chapter_id.in_(chunk)))
    lexicon = work_lexicon(text for _, text in chapters)
    rows: list[dict[str, object]] = []
    for cid, text in chapters:
        postings = chapter_postings(text, lexicon)
        session.execute(
            insert(EntityChapter), [{"chapter_id": cid, "work_id": work_id, "terms": len(postings)}]
        )
        rows.extend(
            {"term": term, "chapter_id": cid, "occurrences": o.count, "first": o.first}
            for term, o in postings.items()
        )
    for start in range(0, len(rows), 5_000):
        session.execute(insert(EntityPosting), rows[start : start + 5_000])
    add_terms(session, Counter(str(row["term"]) for row in rows), len(chapters))
    return len(rows)


def add_terms(session: Session, counts: Counter[str], chapters: int) -> None:
    """Add ``counts`` (term -> chapters newly holding it) to ``entity_terms`` and ``chapters`` to the stamp,
    whose serial moves on: what :func:`index_chapters` does after inserting its rows (and a bulk load of rows
    written otherwise must do too)."""
    dialect = session.get_bind().dialect.name
    upsert = postgresql.insert(EntityTerm) if dialect == "postgresql" else sqlite.insert(EntityTerm)
    statement = upsert.on_conflict_do_update(
        index_elements=[EntityTerm.term], set_={"chapters": EntityTerm.chapters + upsert.excluded.chapters}
    )
    terms = sorted(counts)
    for start in range(0, len(terms), 5_000):
        session.execute(statement, [{"term": t, "chapters": counts[t]} for t in terms[start : start + 5_000]])
    session.execute(
        update(EntityStamp)
        .where(EntityStamp.id == 1)
        .values(serial=EntityStamp.serial + 1, chapters=EntityStamp.chapters + chapters)
    )


def index_missing(
    session: Session, progress: Callable[[int, int, int], None] | None = None, *, commit: bool = False
) -> list[int]:
    """Index every work that has a chapter without entity rows (works registered before migration 0035, or
    whose indexing was lost); returns their ids. Each work is one :func:`index_chapters`, committed alone
    when ``commit`` (``fptrack init``: a run stopped part way keeps what it did); ``progress`` is called
    after each with (works done, works to do, the work's id)."""
    missing = (
        select(Chapter.work_id)
        .outerjoin(EntityChapter, EntityChapter.chapter_id == Chapter.id)
        .where(EntityChapter.id.is_(None))
        .distinct()
    )
    work_ids = sorted(int(w) for w in session.scalars(missing))
    for done, work_id in enumerate(work_ids, 1):
        index_chapters(session, work_id)
        if commit:
            session.commit()
        if progress is not None:
            progress(done, len(work_ids), work_id)
    return work_ids


Stamp = tuple[int, int]
"""(serial, indexed chapters) of ``entity_stamp``: a change of either is a change of the index."""

K = TypeVar("K", str, int)
V = TypeVar("V")

CACHED_TERMS = 200_000
"""Terms (and strings found not to be terms) a process holds per database: about 30 MB at most."""
_LOOKUP_CHUNK = 2_000


def _stamp(session: Session) -> Stamp:
    """The index's stamp: one row read by its key, whatever the index's size."""
    row = session.execute(select(EntityStamp.serial, EntityStamp.chapters).where(EntityStamp.id == 1)).first()
    return (int(row[0]), int(row[1])) if row else (0, 0)


class _StampedCache(Generic[K, V]):
    """Values a process has read from the entity index, least recently used first, at most ``size``; emptied
    when the stamp they were read at changes (a work registered, indexed again or removed changes every term's
    frequency and every weight's ``N``, and which chapters hold which terms)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.stamp: Stamp = (-1, -1)
        self.rows: OrderedDict[K, V] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, stamp: Stamp, keys: Iterable[K], read: Callable[[list[K]], dict[K, V]]) -> dict[K, V]:
        """Each of ``keys``' value: held, or read now (``read`` is given the missing keys, sorted, and
        returns a value for each); what is read is held only if the stamp is still the one asked about."""
        wanted = set(keys)
        with self.lock:
            if stamp != self.stamp:
                self.rows.clear()
                self.stamp = stamp
            held = {k: self.rows[k] for k in wanted if k in self.rows}
            for k in held:
                self.rows.move_to_end(k)
        fresh = read(sorted(wanted.difference(held)))
        with self.lock:
            if stamp == self.stamp:
                self.rows.update(fresh)
                while len(self.rows) > self.size:
                    self.rows.popitem(last=False)
        held.update(fresh)
        return held


_caches_lock = threading.Lock()
_caches: dict[str, _StampedCache[str, int]] = {}
"""Per database: the document frequencies read (0: not a term), at most :data:`CACHED_TERMS`."""

CACHED_CHAPTERS = 256
"""Chapters whose postings a process holds per database for :func:`candidates_among` (~800 terms a chapter:
about 20 MB at most). The chapters a crawl's faint pages point at recur from page to page (a chapter sharing
a formula with many pages), and reading a chapter's postings is nearly all of a call's cost (~1.5 ms a
chapter here)."""
_posting_caches: dict[str, _StampedCache[int, dict[str, int]]] = {}
"""Per database: the postings (term -> first occurrence) of the chapters read, at most
:data:`CACHED_CHAPTERS`."""


def _per_database(session: Session, caches: dict[str, _StampedCache[K, V]], size: int) -> _StampedCache[K, V]:
    bind = session.get_bind()
    key = str(bind.engine.url) if hasattr(bind, "engine") else str(id(bind))
    with _caches_lock:
        if key not in caches:
            caches[key] = _StampedCache(size)
        return caches[key]


def _frequencies(session: Session, stamp: Stamp, keys: set[str]) -> dict[str, int]:
    """The document frequency of each of ``keys`` that is an indexed term (held, or read by key)."""

    def read(wanted: list[str]) -> dict[str, int]:
        found = dict.fromkeys(wanted, 0)
        for start in range(0, len(wanted), _LOOKUP_CHUNK):
            chunk = wanted[start : start + _LOOKUP_CHUNK]
            for term, n in session.execute(
                select(EntityTerm.term, EntityTerm.chapters).where(EntityTerm.term.in_(chunk))
            ):
                found[str(term)] = max(0, int(n))
        return found

    held = _per_database(session, _caches, CACHED_TERMS).get(stamp, keys, read)
    return {k: n for k, n in held.items() if n > 0}


def _postings(session: Session, stamp: Stamp, chapter_ids: Sequence[int]) -> dict[int, dict[str, int]]:
    """Each of ``chapter_ids``' postings, term -> first occurrence (a chapter with none is left out)."""

    def read(wanted: list[int]) -> dict[int, dict[str, int]]:
        found: dict[int, dict[str, int]] = {c: {} for c in wanted}
        for chunk in id_chunks(wanted):
            for term, chapter_id, first in session.execute(
                select(EntityPosting.term, EntityPosting.chapter_id, EntityPosting.first).where(
                    EntityPosting.chapter_id.in_(chunk)
                )
            ):
                found[int(chapter_id)][str(term)] = int(first)
        return found

    held = _per_database(session, _posting_caches, CACHED_CHAPTERS).get(stamp, chapter_ids, read)
    return {c: terms for c, terms in held.items() if terms}


def page_keys(text: str) -> set[str]:
    """Every string of a page that could be an indexed term: its Han n-grams (2 to :data:`MAX_TERM_CHARS`
    characters of the normalised text) and the romanized keys of its capitalised runs' sub-runs (at most
    :data:`MAX_RUN_WORDS` words, at least :data:`MIN_LATIN_KEY` letters). What is looked up in
    ``entity_terms``: the cost of a page follows its length, not the index's size."""
    keys: set[str] = set()
    for run in _HAN_RUN.finditer(_han_text(text)):
        s = run.group()
        for i in range(len(s) - 1):
            keys.update(s[i : i + n] for n in range(2, min(MAX_TERM_CHARS, len(s) - i) + 1))
    for words in _capitalised_runs(text):
        for i in range(len(words)):
            for n in range(1, min(MAX_RUN_WORDS, len(words) - i) + 1):
                key = romanized_key("".join(w for w, _ in words[i : i + n]))
                if len(key) >= MIN_LATIN_KEY:
                    keys.add(key)
    return {k for k in keys if len(k) <= 64}


# ------------------------------------------------------------------------------------------------ the page


@dataclass(frozen=True)
class PageTerms:
    """The known terms of a page with their occurrences, in its order."""

    terms: dict[str, Occurrences]

    def __len__(self) -> int:
        return len(self.terms)


def _capitalised_runs(text: str) -> Iterator[list[tuple[str, int]]]:
    """Runs of consecutive capitalised words of ``text`` (with their offsets); any other word, digit or
    sentence end breaks a run."""
    run: list[tuple[str, int]] = []
    last_end = 0
    for match in _LATIN_WORD.finditer(text):
        gap = text[last_end : match.start()]
        word = match.group()
        if run and (any(ch in gap for ch in '.!?;:,()"“”\n') or not word[0].isupper()):
            yield run
            run = []
        if word[0].isupper():
            run.append((word, match.start()))
        last_end = match.end()
    if run:
        yield run


def _latin_terms(text: str, known: Iterable[str] | set[str] | dict[str, int]) -> Iterator[tuple[str, int]]:
    """The known romanized keys among the page's capitalised runs: at each word the longest sub-run (of at
    most :data:`MAX_RUN_WORDS` words) whose joined key is known."""
    for run in _capitalised_runs(text):
        i = 0
        while i < len(run):
            for n in range(min(MAX_RUN_WORDS, len(run) - i), 0, -1):
                key = romanized_key("".join(w for w, _ in run[i : i + n]))
                if len(key) >= MIN_LATIN_KEY and key in known:
                    yield key, run[i][1]
                    i += n
                    break
            else:
                i += 1


def page_terms(
    text: str, known: set[str] | dict[str, int], prefixes: Container[str] | None = None
) -> PageTerms:
    """The terms of ``known`` on a page: Han n-grams of its normalised text, and romanized keys of its
    capitalised runs (both, for a page that mixes scripts). ``prefixes``: the first two characters of the
    Han terms of ``known`` (computed when not given)."""
    if prefixes is None:
        prefixes = {t[:2] for t in known}
    han = _han_text(text)
    found = [(g, o) for g, o in _han_grams(han, prefixes) if g in known]
    terms = _occurrences(found, len(han)) if found else {}
    latin = list(_latin_terms(text, known))
    if latin:
        terms.update(_occurrences(latin, len(text)))
    return PageTerms(terms)


def score_chapter(page: dict[str, Occurrences], chapter: dict[str, int], weights: dict[str, float]) -> float:
    """A chapter's score for a page: the weights of the terms they share (``chapter``: term -> its first
    occurrence in the chapter) times the order factor, :data:`ORDER_FLOOR` plus the weighted share of the
    shared terms' pairs in the same order on both sides (a half when no pair is ordered)."""
    shared = [t for t in chapter if t in page]
    if not shared:
        return 0.0
    w = np.array([weights.get(t, 0.0) for t in shared])
    return float(w.sum()) * (
        ORDER_FLOOR
        + _order_agreement(
            np.array([page[t].first for t in shared]), np.array([chapter[t] for t in shared]), w
        )
    )


def _order_agreement(page_first: np.ndarray, chapter_first: np.ndarray, w: np.ndarray) -> float:
    """The weighted share of pairs ordered alike on both sides (pairs closer than :data:`TIE` on either side
    are not ordered); a half when no pair is."""
    dp = page_first[:, None] - page_first[None, :]
    dc = chapter_first[:, None] - chapter_first[None, :]
    ordered = np.triu((np.abs(dp) >= TIE) & (np.abs(dc) >= TIE), 1)
    pair_w = np.outer(w, w) * ordered
    total = float(pair_w.sum())
    if total <= 0:
        return 0.5
    return float((pair_w * ((dp > 0) == (dc > 0))).sum()) / total


def candidates(session: Session, text: str, limit: int = 12) -> list[tuple[int, float]]:
    """The registered chapters ``text`` may be a rewrite or a translation of, as (chapter id, score), best
    first, at most ``limit``: chapters sharing at least :data:`MIN_SHARED` of the page's terms with a score
    (:func:`score_chapter`) of at least :data:`MIN_SCORE`. Empty when the page names too few of any work's
    entities (the gate's "no")."""
    if limit <= 0 or not text:
        return []
    stamp = _stamp(session)
    if stamp[1] <= 0:
        return []
    df = _frequencies(session, stamp, page_keys(text))
    return ranked(session, page_terms(text, df), df, stamp[1], limit)


def candidates_among(
    session: Session, text: str, chapter_ids: Sequence[int], limit: int = 12
) -> list[tuple[int, float]]:
    """:func:`candidates` scored among ``chapter_ids`` only, as (chapter id, score), best first: the page is
    searched for those chapters' terms alone (their postings read by chapter), so the cost follows the
    chapters asked about, not the page's length. For a Chinese page that shares a code or two with a few
    chapters (``compare.service.PageOutcome.faint``): are they its chapters, by their names?"""
    if limit <= 0 or not text or not chapter_ids:
        return []
    stamp = _stamp(session)
    if stamp[1] <= 0:
        return []
    by_chapter = _postings(session, stamp, chapter_ids)
    known = {t for held in by_chapter.values() for t in held}
    page = page_terms(text, known)
    if len(page) < MIN_SHARED:
        return []
    df = _frequencies(session, stamp, set(page.terms))
    n = max(1, stamp[1])
    weights = {t: math.log1p(n / max(1, df.get(t, 1))) / math.log1p(n) for t in page.terms}
    scored = [
        (chapter_id, score_chapter(page.terms, held, weights))
        for chapter_id, held in by_chapter.items()
        if sum(t in page.terms for t in held) >= MIN_SHARED
    ]
    best = sorted((s for s in scored if s[1] >= MIN_SCORE), key=lambda s: (-s[1], s[0]))
    return [(cid, round(score, 3)) for cid, score in best[:limit]]


def ranked(
    session: Session, page: PageTerms, df: dict[str, int], chapters: int, limit: int
) -> list[tuple[int, float]]:
    """:func:`candidates` once the page's terms and their document frequencies ``df`` over ``chapters``
    indexed chapters are known: its rarest terms' postings read, the chapters scored and ranked."""
    if len(page) < MIN_SHARED:
        return []
    n = max(1, chapters)
    weights = {t: math.log1p(n / max(1, df[t])) / math.log1p(n) for t in page.terms}
    asked = sorted(page.terms, key=lambda t: (-weights[t], t))[:MAX_QUERY_TERMS]
    by_chapter: dict[int, dict[str, int]] = {}
    for term, chapter_id, first in session.execute(
        select(EntityPosting.term, EntityPosting.chapter_id, EntityPosting.first).where(
            EntityPosting.term.in_(asked)
        )
    ):
        by_chapter.setdefault(int(chapter_id), {})[str(term)] = int(first)
    held_enough = [(cid, held) for cid, held in by_chapter.items() if len(held) >= MIN_SHARED]
    # the order factor (at most 1 + ORDER_FLOOR) only for the chapters that could still make the list
    massive = sorted(held_enough, key=lambda c: -sum(weights[t] for t in c[1]))[: SCORED_PER_LIMIT * limit]
    scored = [(chapter_id, score_chapter(page.terms, held, weights)) for chapter_id, held in massive]
    best = sorted((s for s in scored if s[1] >= MIN_SCORE), key=lambda s: (-s[1], s[0]))
    return [(cid, round(score, 3)) for cid, score in best[:limit]]
