"""The benchmarks' plain-text tables: a title, the header, a rule, then the rows, the first column
left-aligned and the others right-aligned."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["print_table"]


def print_table(title: str, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print ``rows`` (any values, shown with ``str``) under ``headers``; nothing when there are no rows."""
    cells = [[str(c) for c in row] for row in rows]
    if not cells:
        return
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    print(f"\n{title}")
    print("  ".join(h.ljust(widths[i]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(headers)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)))
