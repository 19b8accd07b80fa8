"""sha256 digests, the one way the tool hashes: a file's bytes, and the parts of a key."""

import hashlib
from pathlib import Path


BLOCK = 1 << 20  # bytes read at a time


def sha256_file(path):
    """The hex sha256 of the file at `path`, read in blocks (an sdist may be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_of(*parts):
    """The hex sha256 of `parts` one after the other, nothing between them: bytes as they are, a str in UTF-8,
    a Path the bytes of that file."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, Path):
            part = part.read_bytes()
        digest.update(part.encode() if isinstance(part, str) else part)
    return digest.hexdigest()
