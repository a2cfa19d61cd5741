"""``python -m bench [--quick | --full] [--only NAME…] [--runs N] [--out bench/out]``."""

from bench.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
