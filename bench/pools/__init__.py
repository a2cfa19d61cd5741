"""Namespaces on pools (issue #18, point 4), measured in one run: what routing every request to
its namespace's pool costs the server against a single database, the database's CPU per
message, and one pool against two for a database-heavy workload. bench/README.md ("Pools") says
how to read it.

``python -m bench --only pools [--quick | --full]``, or ``python -m bench.pools``.

Two phases, each with real ``sundial serve`` processes and the suite's load generator
(``bench.loadgen``):

1. **Routing overhead.** Two servers side by side on one embedded PostgreSQL: (a) without
   ``SUNDIAL_POOLS``, its namespace on the single database; (b) with ``SUNDIAL_POOLS`` naming a
   second database of the same PostgreSQL, its namespace placed there, so every request is
   routed. ``enqueue_b1`` and ``process_b1`` alternate between them; the server's CPU per
   message (b)/(a) is the overhead. Beside it: the router's own CPU per lookup, in process, and
   what each server spends idle.
2. **Two pools against one.** One server whose ``SUNDIAL_POOLS`` names a second PostgreSQL
   (another :class:`app.embedded.LocalCluster`); the load is split over two namespaces, both on
   the first PostgreSQL (one pool) or one on each (two pools), alternately; throughput and the
   CPU both PostgreSQLs spent per message.
"""

# The parts: the databases and the namespaces on them (tenants.py), load generators run side by
# side with the CPU of every process counted around them, and idle (loads.py), one measurement
# with its checks (measures.py), the two phases (overhead.py, split.py), the router's own cost in
# process (router.py), the figures and the capacity model (model.py, pure), the report
# (report.py) and the run that holds them together and always cleans up (run.py); __main__.py
# is the command line.
