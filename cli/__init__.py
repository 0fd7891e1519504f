"""The ``fptrack`` command line (click), a module per command group in the manner of warehouse's ``cli``.

:mod:`cli.main` holds the root group and attaches the groups; :mod:`cli.common` what they share (the
context object, the one error wrapper, the table printer). ``python -m fptrack.cli`` and the console script
``fptrack`` both run :func:`fptrack.cli.main.main`. Every subcommand has ``--help``.
"""
