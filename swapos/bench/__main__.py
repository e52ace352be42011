"""Entry point of ``python -m swapos.bench``."""

from __future__ import annotations

import sys

from swapos.bench.cli import main

if __name__ == "__main__":
    sys.exit(main(configure_logs=True))
