"""Model-based tests: an in-memory model of docs/concepts.md driven against the real service."""
