"""The load generator: a separate process (``python -m bench.loadgen`` with a JSON spec on stdin,
a JSON result on stdout), asyncio + aiohttp for Sundial, asyncpg for PgQueuer.

The modes: bench/loadgen/sundial.py (through the HTTP API), bench/loadgen/peers.py (the raw
LISTEN/NOTIFY limit and PgQueuer); what they measure with: bench/loadgen/measure.py.

Every timed mode runs ``warmup`` seconds unmeasured, then counts only the operations that both
started and finished inside the ``duration`` window. A client finishes the request pair it is
in (dequeue, then its ack) before it stops, so a timed run leaves no message leased.
"""
