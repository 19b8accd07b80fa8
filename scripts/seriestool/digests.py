"""sha256 digests, the one way the tool hashes: a file's bytes, and the parts of a key."""

import hashlib
import os
from pathlib import Path


BLOCK = 1 << 20  # bytes read at a time


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The hex sha256 of the file at `path`, read in blocks (an sdist may be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_of(*parts: str | bytes | Path) -> str:
    """The hex sha256 of `parts` one after the other, nothing between them: bytes as they are, a str in UTF-8,
    a Path the bytes of that file."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.read_bytes() if isinstance(part, Path) else part
        digest.update(data.encode() if isinstance(data, str) else data)
    return digest.hexdigest()
