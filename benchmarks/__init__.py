"""Benchmarks: scripts that measure fptrack and print a table, then one JSON line. Run from the repository's
root, ``python -m benchmarks.<group>.<name> [--quick]``; ``make bench-quick`` runs every one with ``--quick``
(tests/integration/benchmarks/test_quick.py too).

Grouped by subject: ``pipeline`` (crawl throughput, capacity), ``crawl`` (rendering, huge pages, a crawl
shared by processes), ``scale`` (the store and the registry as they grow), ``accuracy`` (recall and precision
on generated pirate webs, discovery), ``monitoring`` (re-checks, takedown figures), ``admin`` (the web
interface under load), ``fingerprint`` (fingerprinting speed). In a group, a module whose name starts with an
underscore is a helper, any other a benchmark. Shared by all: :mod:`benchmarks.harness` (command line,
tables, JSON line, CPU time), :mod:`benchmarks.corpus` (../shared/corpus), and the generated pirate webs
(:mod:`benchmarks.pirate_web`, :mod:`benchmarks.pipeline_site`); the loopback servers come from ``testbed``,
shared with the tests.
"""
