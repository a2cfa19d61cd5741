"""Fault-injection suite: real server processes, a real PostgreSQL, real faults (see campaign.py).

Run the CI-sized campaign with ``pytest tests/faults`` and a longer one with
``python -m tests.faults --duration 300``.
"""
