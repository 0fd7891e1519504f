"""The root of fptrack's errors.

Every error a person can act on derives from :class:`FptrackError`: its message is one line that names the
input at fault and what to do, and the command line prints it as ``error: <message>`` with a non-zero exit
(anything else is a bug and shows a traceback under ``FPTRACK_DEBUG=1``). Subclasses keep the built-in base
they had (``ValueError`` for bad input, ``RuntimeError`` for a failed hand-off) so that callers catching
those still do.
"""

from __future__ import annotations

__all__ = ["FptrackError"]


class FptrackError(Exception):
    """An error with a one-line message a person can act on."""
