"""Sundial's benchmark suite: the real server over HTTP, side by side with the raw SQL limit
(pgbench running Sundial's own statements) and with PgQueuer, on one PostgreSQL, in one run.

Run it with ``python -m bench --quick`` (or ``./dev bench --quick``); see bench/README.md.
"""
