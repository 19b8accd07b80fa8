"""Safe extraction through the command line: `checkout` refuses an sdist with an escaping member (one error
line, exit 2, no checkout). The refusals themselves, member by member, are in tests/unit/test_archive.py."""

import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

from parameterized import parameterized
from seriesfixtures import BASE_FILES, Fake, make_tarball, one_error_line


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from seriestool.digests import sha256_file  # noqa: E402


def _member(name, kind=tarfile.REGTYPE, linkname="", data=b"x"):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.mode = 0o644
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, data
    return info, None


EVIL = {  # a few of tests/unit/test_archive.py's REFUSED, through the command line
    "dotdot": [_member("fakepkg-1.0/../evil")],
    "absolute": [_member("/tmp/series-evil-absolute")],
    "symlink_escaping": [_member("fakepkg-1.0/link", tarfile.SYMTYPE, "../../outside")],
}


class CheckoutRefusesEvilSdistTest(unittest.TestCase):
    """The same refusal through the command line: one error line, exit 2, no checkout."""

    @parameterized.expand([("dotdot",), ("absolute",), ("symlink_escaping",)])
    def test_checkout_refuses(self, kind):
        with tempfile.TemporaryDirectory() as tmp:
            fake = Fake(tmp)
            evil = make_tarball(Path(tmp) / "evil" / fake.sdist.name, "fakepkg-1.0", BASE_FILES, EVIL[kind])
            fake.sha = sha256_file(evil)
            fake.write_manifest()
            fake.seed_cache(evil.read_bytes())
            proc = fake.run("checkout")
            line = one_error_line(proc)
            self.assertIn("refusing to extract fakepkg-1.0.tar.gz", line)
            self.assertFalse((fake.work / "checkouts" / "fake").exists())
            self.assertEqual(list((fake.work / "checkouts").iterdir()), [])
            self.assertFalse(Path(tmp, "evil").joinpath("..", "outside").exists())
