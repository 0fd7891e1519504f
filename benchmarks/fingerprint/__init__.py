"""Benchmarks of fingerprinting speed, per fingerprint and for the page path."""
