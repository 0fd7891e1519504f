"""``python -m fptrack.cli``: the ``fptrack`` command line."""

from fptrack.cli.main import main

main()
