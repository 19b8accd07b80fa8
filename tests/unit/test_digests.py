"""digests.py: the one way the tool hashes a file or the parts of a key."""

import hashlib
from pathlib import Path

from seriestool import digests


def test_sha256_file_is_sha256(tmp_path):
    path = tmp_path / "abc"
    path.write_bytes(b"abc")
    assert digests.sha256_file(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    big = tmp_path / "blob"
    data = b"x" * (2 * digests.BLOCK + 7)  # more than one read block
    big.write_bytes(data)
    assert digests.sha256_file(big) == hashlib.sha256(data).hexdigest()
    assert digests.sha256_file(str(big)) == digests.sha256_file(big)


def test_sha256_of_parts(tmp_path):
    path = tmp_path / "part"
    path.write_bytes(b"\xffdata")
    whole = hashlib.sha256(b"key\0" + b"\xffdata" + b"\x00raw").hexdigest()
    assert digests.sha256_of("key\0", Path(path), b"\x00raw") == whole
    # nothing between the parts: only their bytes, in order, count
    assert digests.sha256_of("ab", "c") == digests.sha256_of("abc") == hashlib.sha256(b"abc").hexdigest()
    assert digests.sha256_of("é") == hashlib.sha256("é".encode()).hexdigest()
    assert digests.sha256_of() == hashlib.sha256().hexdigest()
    # a str that names a file is text, not the file
    assert digests.sha256_of(str(path)) == hashlib.sha256(str(path).encode()).hexdigest()
