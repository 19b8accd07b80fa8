"""Patch-series tool: pinned base checkouts, apply, export and red/green verification."""
