"""The research shelf: algorithms built and measured for study that the product does not run (benchmarks and
their tests import them; no product module does). See ``docs/fingerprints.md`` for why each is off the
path."""
