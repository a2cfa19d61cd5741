"""Two pools, as in tests/pools: the catalogue's database and pool ``b``."""

from tests.pools.conftest import engine_b, pooled, settings

__all__ = ["engine_b", "pooled", "settings"]
