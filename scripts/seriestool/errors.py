"""The one exception type the command line turns into `series: error: ...` and exit status 2."""


class SeriesError(Exception):
    """Bad input or an environment problem, reported as one line; nothing was half-changed."""
