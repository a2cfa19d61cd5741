"""Sundial on a replicated database (issue #15), in one run: what synchronous replication costs
in throughput against a single node, and how long writes stop during a planned switchover and
after the sudden loss of the primary. bench/README.md ("Failover") says how to read it.

``python -m bench --only failover [--quick | --full]``, or ``python -m bench.failover``.

Two real ``sundial serve`` processes run side by side for the whole run: one on a single
embedded PostgreSQL (:class:`app.embedded.LocalCluster`), one on a pg_auto_failover formation
(:class:`app.embedded.formation.Formation`: a monitor, a primary, its synchronous standby). Both
reach their database over TCP loopback (the formation's URL names its nodes by host and port),
so the only difference measured is replication. The load generator is the suite's
(``bench.loadgen``).
"""

# The parts: the two databases (databases.py), the throughput pair (throughput.py), the writers
# that watch a failover (writers.py), the faults (outage.py), the report (report.py) and the run
# that holds them together and always cleans up (run.py); __main__.py is the command line.
