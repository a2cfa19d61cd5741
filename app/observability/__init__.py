"""Prometheus metrics (``GET /metrics``): what they are, where they come from, and how several
worker processes are added up. See docs/monitoring.md for the list and their meaning.

- :mod:`~app.observability.metrics`: the process metrics (counters, gauges), one definition each.
- :mod:`~app.observability.observer`: the queue service's hook that counts committed changes.
- :mod:`~app.observability.sampler`: a per-process task per pool that samples its connection
  pool, long-poll waiters and scheduler into gauges and counters.
- :mod:`~app.observability.database`: the database-wide gauges, from one cached query per pool
  and scrape.
- :mod:`~app.observability.multiprocess`: the per-run directory that ``sundial serve`` workers
  share, and cleanup after dead workers.
- :mod:`~app.observability.server`: the per-process bundle the app starts and stops.
- :mod:`~app.observability.endpoint`: the ``/metrics`` handler.
- :mod:`~app.observability.http`: the HTTP timing middleware (request counts and latency).
"""
