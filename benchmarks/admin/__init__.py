"""Benchmarks of the web interface: page latency over a large store, and throughput under load (wrk)."""
