"""One module per command of `scripts/series.py`; only `cli.py` imports them, and none imports another."""
