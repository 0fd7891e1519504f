"""Benchmarks of monitoring: finding changes on a live pirate web (re-checks), takedown figures at scale."""
