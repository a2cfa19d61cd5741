"""Two pools (tests/pools/conftest.py): the test's database and a second one, pool ``b``."""

from tests.pools.conftest import engine_b, pooled, settings

__all__ = ["engine_b", "pooled", "settings"]
