"""Model-based tests: an in-memory model of PRODUCT.md §2 driven against the real service."""
