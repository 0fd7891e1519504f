"""The fingerprint contract: every parameter that decides what a text's fingerprints are and how two texts are
judged alike, in one frozen value.

The product (``compare``: pages and registered chapters), the index (``storage`` stores what the pipeline
computes under the contract) and every benchmark read :data:`CONTRACT`. Writer and reader can never disagree
on a k-gram length, a window or a threshold, because there is only one place where each is set.

What it holds, by stage (docs/fingerprints.md and docs/compare.md say where each value was measured):

- which **methods** the page path computes and reads (:data:`PAGE_PATH_METHODS`, out of :data:`METHODS`):
  winnowing on characters, winnowing on pinyin initials (candidate generation) and the initials channel of the
  alignment; Simhash is off. :meth:`FingerprintContract.without`, ``with_method`` and ``only`` make the
  variants with which the ablation of ``benchmarks.accuracy.piracy`` measures what each adds;
- the **fingerprints**: Simhash (bits, weighting), winnowing (k, w) of the normalised characters and of the
  pinyin-initial string;
- **candidates**: how many shared codes make a registered chapter a suspect, how many suspects are verified,
  how many chapters must hold a hash before it counts as a common formula;
- **alignment**: k-gram lengths of the two channels, gap merging, the shortest run, the diagonal slack;
- the **decision rule**: quotation floor, chapter coverage, one long passage.

Pinyin DNA, MinHash and KSentence (``research.pinyin_dna``, ``research.minhash``, ``research.ksentence``) and
the corpus statistics (``fingerprint.stats``) are not on the page path: nothing there reads them. They stay
usable on their own, with their tests and benchmarks. ``dna`` rows that earlier releases stored stay readable
by ``storage`` (which is generic over kind names) and are read by nothing."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from fptrack.fingerprint.simhash import SimhashParams

__all__ = [
    "CANDIDATE_SOURCES",
    "CONTRACT",
    "METHODS",
    "PAGE_PATH_METHODS",
    "AlignParams",
    "CandidateParams",
    "DecisionRule",
    "FingerprintContract",
    "WinnowParams",
]

METHODS: tuple[str, ...] = ("simhash", "winnow", "winnow_py", "align_initials")
"""The signals the page path can use. The first three are candidate sources (each an index of ``storage``);
the last is the pinyin-initial channel of the alignment (same-sound swaps keep aligning)."""
CANDIDATE_SOURCES: tuple[str, ...] = ("simhash", "winnow", "winnow_py")
PAGE_PATH_METHODS = frozenset(METHODS) - {"simhash"}
"""What the product uses. Simhash is off: on two full runs every copy it finds the winnowing finds as well,
and it is the costliest part of fingerprinting a page (word segmentation: the page path runs ~2.7x faster
without it); no Simhash row is stored for a page or a chapter (rows written by earlier releases stay readable
and unread). Pinyin DNA is not a method: the ablation (docs/compare.md) found nothing it adds to winnowing
over the initials."""

CODE_KINDS: tuple[str, ...] = ("winnow", "winnow_py")
"""The (code, position) kinds a document stores, as ``storage`` names them (``dna`` rows of earlier releases
may still be stored: nothing reads them)."""


@dataclass(frozen=True)
class WinnowParams:
    """Winnowing (Schleimer et al. 2003) over k-grams with a window of w hashes: any shared run of at least
    ``w + k - 1`` symbols shares a selected hash."""

    k: int
    w: int

    def __post_init__(self) -> None:
        if self.k < 1 or self.w < 1:
            raise ValueError(f"winnowing needs k >= 1 and w >= 1, got k={self.k}, w={self.w}")

    @property
    def guarantee(self) -> int:
        """The shortest shared run that is always found."""
        return self.w + self.k - 1


@dataclass(frozen=True)
class CandidateParams:
    """Which registered chapters are verified against a page."""

    min_shared: int = 2
    """Shared codes of one kind (winnowing of characters, winnowing of initials) that make a candidate."""
    max_candidates: int = 12
    """Candidates verified per page, ranked by Simhash hit, then shared codes."""
    common_min_chapters: int = 5
    """A winnowing hash held by at least this many registered chapters (closing formulas, a publisher's
    banner) says nothing about which chapter a page copies: the alignment ignores it."""

    def __post_init__(self) -> None:
        if min(self.min_shared, self.max_candidates, self.common_min_chapters) < 1:
            raise ValueError("min_shared, max_candidates and common_min_chapters must all be >= 1")


@dataclass(frozen=True)
class AlignParams:
    """Passage alignment (``compare.verify.align``)."""

    char_k: int = 6
    initials_k: int = 14
    max_gap: int = 12
    max_gap_digit_share: float = 0.5
    """Runs are not merged over a gap more than this share digits: templates with other numbers are not
    copies."""
    min_run: int = 24
    diagonal_slack: int = 30
    smoothing: int = 5

    def __post_init__(self) -> None:
        if min(self.char_k, self.initials_k, self.min_run, self.smoothing) < 1 or self.max_gap < 0:
            raise ValueError("align: k-gram lengths, min_run and smoothing must be >= 1, max_gap >= 0")


@dataclass(frozen=True)
class DecisionRule:
    """Flag iff ``copied_chars >= min_copied`` and (``longest_run >= min_passage`` or (``chapter_coverage >=
    min_coverage`` and ``density >= min_density``)). Read off the threshold sweep of
    ``benchmarks.accuracy.piracy`` (docs/compare.md): ``min_density`` = 0.5 sits between a review quoting ten
    passages (0.26) and the sparsest copy (30 % edits, 0.71)."""

    min_copied: int = 50
    min_coverage: float = 0.15
    min_passage: int = 150
    min_density: float = 0.5

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class FingerprintContract:
    """Every parameter of the page path. Frozen and hashable: use :meth:`without` /
    :func:`dataclasses.replace` for variants (benchmarks), never mutate."""

    methods: frozenset[str] = PAGE_PATH_METHODS
    simhash: SimhashParams = field(default_factory=SimhashParams)
    winnow_chars: WinnowParams = WinnowParams(k=8, w=16)
    winnow_initials: WinnowParams = WinnowParams(k=12, w=16)
    """k measured (docs/fingerprints.md): 12 finds 300-character excerpts of 20 %-edited copies and
    keeps 23 % of a whole such copy's hashes (16: 92 % and 15 %), with no registered chapter a suspect of any
    水浒传 chapter or news article down to k = 10."""
    candidates: CandidateParams = CandidateParams()
    align: AlignParams = AlignParams()
    rule: DecisionRule = DecisionRule()

    def __post_init__(self) -> None:
        unknown = set(self.methods) - set(METHODS)
        if unknown:
            raise ValueError(f"unknown method(s) {sorted(unknown)}; known: {', '.join(METHODS)}")
        if self.simhash.scheme != "tf":
            # stored fingerprints must not depend on corpus statistics, which move as the corpus grows
            raise ValueError(f"the page path's Simhash must be tf-weighted, got {self.simhash.scheme!r}")

    def without(self, method: str) -> FingerprintContract:
        """This contract with one method off (ablation)."""
        return replace(self, methods=self.methods - {_known(method)})

    def with_method(self, method: str) -> FingerprintContract:
        """This contract with one more method on (ablation of a method the product leaves off)."""
        return replace(self, methods=self.methods | {_known(method)})

    def only(self, source: str) -> FingerprintContract:
        """This contract with ``source`` as its only candidate source (the alignment unchanged)."""
        if source not in CANDIDATE_SOURCES:
            raise ValueError(
                f"{source!r} is not a candidate source; those are: {', '.join(CANDIDATE_SOURCES)}"
            )
        return replace(self, methods=(self.methods - set(CANDIDATE_SOURCES)) | {source})

    def uses(self, method: str) -> bool:
        return method in self.methods

    def code_kinds(self) -> tuple[str, ...]:
        """The stored code kinds this contract reads for candidates."""
        return tuple(kind for kind in CODE_KINDS if kind in self.methods)


def _known(method: str) -> str:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    return method


CONTRACT = FingerprintContract()
"""The contract of the product, the index and the benchmarks."""
