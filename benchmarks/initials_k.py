"""Choosing the k of winnowing over pinyin initials (``CONTRACT.winnow_initials.k``) by measurement.

    python benchmarks/initials_k.py [--sample 60]

The initials index is a candidate source: a registered chapter becomes a suspect of a page when they share at
least ``CONTRACT.candidates.min_shared`` selected hashes. The 23-letter initial alphabet is skewed, so short
k-grams recur by chance across unrelated texts (false suspects: each costs an alignment); long k-grams break
on every edit (missed suspects). For each k, with the contract's window w:

- **registry**: the ``tennessine`` copies of 西游记 and 三国演义 (every chapter), winnowed;
- **copies** (a sample of registered chapters): same-sound swaps at 30 %, random edits at 5/10/20 % (the
  E-Simhash protocol's modify / delete / insert / shift, which do change initials), and the real ``rain8``
  copy (its own editorial differences), each cut to a 300-character excerpt at a random place (whole chapters
  are found at every k: the excerpt is what sits near the threshold). A copy is *found* when its true chapter
  shares >= min_shared hashes; ``share/edit_20`` is the mean share of a whole 20 %-edited copy's hashes its
  chapter holds;
- **look-alikes**: 水浒传 chapters (same era and genre, not registered) and 300 news articles: *false
  suspects* is the mean number of registered chapters sharing >= min_shared hashes with one of them.

The last line is JSON. Nothing of the corpus is written anywhere.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _pirate_web import Homophones, _load, _news, random_edits

from fptrack.fingerprint.contract import CONTRACT
from fptrack.fingerprint.normalize import normalize
from fptrack.fingerprint.pinyin import pinyin_initials
from fptrack.fingerprint.winnowing import winnow

KS = (10, 12, 14, 16, 18, 20)
EXCERPT = 300


def initials_of(text: str) -> str:
    return pinyin_initials(normalize(text).text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=60, help="registered chapters copied per kind")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    started = time.monotonic()
    rng = random.Random(args.seed)
    w, need = CONTRACT.winnow_initials.w, CONTRACT.candidates.min_shared

    registered = [c for work in ("xiyouji", "sanguoyanyi") for c in _load(work, "tennessine")]
    by_key = {(c.work, c.number): c for c in registered}
    rain8 = {
        (c.work, c.number): c for work in ("xiyouji", "sanguoyanyi") for c in _load(work, "rain8_liangwe")
    }
    sample = rng.sample(sorted(k for k in by_key if k in rain8), args.sample)
    pool = "".join(sorted({ch for c in registered for ch in c.text if "\u4e00" <= ch <= "\u9fff"}))
    homophones = Homophones(set(pool))
    copies: dict[str, list[tuple[tuple[str, int], str]]] = {
        "homophone_30": [(key, homophones.swap(by_key[key].text, 0.3, rng)) for key in sample],
        "edit_05": [(key, random_edits(by_key[key].text, 0.05, rng, pool)) for key in sample],
        "edit_10": [(key, random_edits(by_key[key].text, 0.10, rng, pool)) for key in sample],
        "edit_20": [(key, random_edits(by_key[key].text, 0.20, rng, pool)) for key in sample],
        "real_rain8": [(key, rain8[key].text) for key in sample],
    }
    lookalikes = {
        "shuihuzhuan": [c.text for c in _load("shuihuzhuan", "tennessine")],
        "news": [row["text"] for row in _news()[:300]],
    }
    registry_initials = {key: initials_of(c.text) for key, c in by_key.items()}

    def excerpt(text: str) -> str:
        start = rng.randrange(max(1, len(text) - EXCERPT))
        return text[start : start + EXCERPT]

    copy_initials = {
        kind: [(key, initials_of(excerpt(t))) for key, t in rows] for kind, rows in copies.items()
    }
    whole_edit_20 = [(key, initials_of(t)) for key, t in copies["edit_20"]]
    lookalike_initials = {kind: [initials_of(t) for t in texts] for kind, texts in lookalikes.items()}

    head = (
        f"{'k':>3}{'guarantee':>10}"
        + "".join(f"{kind:>14}" for kind in copies)
        + "".join(f"{'fp/' + kind:>16}" for kind in lookalikes)
        + f"{'share/edit_20':>15}{'hashes/chapter':>16}{'shared by 5+':>14}"
    )
    print(
        f"winnowing over pinyin initials, w = {w}; found = true chapter shares >= {need} hashes;"
        " fp = registered chapters sharing >= 2 hashes with one look-alike (mean)"
    )
    print(head)
    print("-" * len(head))
    rows = []
    for k in KS:
        index: dict[int, set[tuple[str, int]]] = {}
        per_chapter = []
        for key, initials in registry_initials.items():
            hashes = {h for h, _ in winnow(initials, k, w)}
            per_chapter.append(len(hashes))
            for h in hashes:
                index.setdefault(h, set()).add(key)

        def suspects(
            initials: str, k: int = k, index: dict[int, set[tuple[str, int]]] = index
        ) -> Counter[tuple[str, int]]:
            shared: Counter[tuple[str, int]] = Counter()
            for h in {h for h, _ in winnow(initials, k, w)}:
                shared.update(index.get(h, ()))
            return shared

        row: dict[str, float] = {"k": k}
        for kind, items in copy_initials.items():
            row[kind] = sum(suspects(initials)[key] >= need for key, initials in items) / len(items)
        for kind, texts in lookalike_initials.items():
            row["fp_" + kind] = sum(sum(n >= need for n in suspects(t).values()) for t in texts) / len(texts)
        shares = []
        for key, initials in whole_edit_20:
            mine = {h for h, _ in winnow(initials, k, w)}
            shares.append(sum(key in index.get(h, ()) for h in mine) / max(1, len(mine)))
        row["share_edit_20"] = sum(shares) / len(shares)
        row["hashes_per_chapter"] = sum(per_chapter) / len(per_chapter)
        row["common_share"] = sum(len(v) >= 5 for v in index.values()) / len(index)
        rows.append(row)
        print(
            f"{k:>3}{w + k - 1:>10}"
            + "".join(f"{row[kind]:>14.3f}" for kind in copies)
            + "".join(f"{row['fp_' + kind]:>16.3f}" for kind in lookalikes)
            + f"{row['share_edit_20']:>15.3f}{row['hashes_per_chapter']:>16.1f}{row['common_share']:>14.4f}"
        )
    print(
        json.dumps(
            {
                "w": w,
                "min_shared": need,
                "sample": args.sample,
                "rows": rows,
                "seconds": round(time.monotonic() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
