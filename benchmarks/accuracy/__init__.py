"""Benchmarks of recall and precision on generated pirate webs, and of discovering pirate networks."""
