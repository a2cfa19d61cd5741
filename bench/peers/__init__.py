"""The baselines each Sundial measurement is set against: the raw SQL limit (pgbench running
Sundial's own statements, bench/peers/raw.py) and PgQueuer (bench/peers/pgqueuer.py)."""
