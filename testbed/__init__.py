"""The test bed that tests and benchmarks share (never shipped): generated chapter pages, JavaScript-rendered
pages, kana prose and a search provider, served by HTTP servers on 127.0.0.1, and a probe of whether a service
(PostgreSQL, Redis) answers."""
