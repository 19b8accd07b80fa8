#!/usr/bin/env python3
"""Patch-series tool: `python3 scripts/series.py --help`. Standard library only, Python 3.11+."""

import sys
from pathlib import Path


if sys.version_info < (3, 11):  # noqa: UP036 - this file must still parse and say why
    sys.exit("series: error: Python 3.11 or newer is needed")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from seriestool.cli import main  # noqa: E402


if __name__ == "__main__":
    sys.exit(main())
