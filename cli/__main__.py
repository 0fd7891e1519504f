"""``python -m fptrack.cli``: the ``fptrack`` command line."""

from fptrack.cli import main

main()
