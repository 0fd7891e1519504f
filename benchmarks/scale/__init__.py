"""Benchmarks of the store and the registry as they grow: pages, compare, the Simhash index, networks."""
