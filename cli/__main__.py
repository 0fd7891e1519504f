"""``python -m fptrack.cli``: the ``fptrack`` command line."""

import gc

# The command line's imports (click, the settings, SQLAlchemy) make objects that live as long as the process:
# no collection walks them meanwhile, nor after (jobs.bootstrap.collector_paused, done by hand: that module
# is one of these imports). 0.03 s of CPU at every command's start.
gc.disable()
try:
    from fptrack.cli.main import main
finally:
    gc.freeze()
    gc.enable()

main()
