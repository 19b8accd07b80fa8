"""Safe extraction: every escaping or odd member is refused before anything is written."""

import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

from parameterized import parameterized
from seriesfixtures import BASE_FILES, Fake, make_tarball, one_error_line


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from seriestool.archive import UnsafeArchive, check_members, extract_stripped, sha256_file  # noqa: E402


def _member(name, kind=tarfile.REGTYPE, linkname="", data=b"x"):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.mode = 0o644
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, data
    return info, None


EVIL = {
    "dotdot": [_member("fakepkg-1.0/../evil")],
    "dotdot_nested": [_member("fakepkg-1.0/src/../../evil")],
    "absolute": [_member("/tmp/series-evil-absolute")],
    "symlink_escaping": [_member("fakepkg-1.0/link", tarfile.SYMTYPE, "../../outside")],
    "symlink_absolute": [_member("fakepkg-1.0/link", tarfile.SYMTYPE, "/etc/passwd")],
    "hardlink_escaping": [_member("fakepkg-1.0/hard", tarfile.LNKTYPE, "../outside")],
    "device": [_member("fakepkg-1.0/dev", tarfile.CHRTYPE)],
    "fifo": [_member("fakepkg-1.0/fifo", tarfile.FIFOTYPE)],
    "second_top_level": [_member("other-1.0/file")],
}


class SafeExtractTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = Path(self._tmp.name)

    def tearDown(self):
        self._tmp.cleanup()

    def test_extracts_and_strips_the_top_folder(self):
        archive = make_tarball(self.tmp / "a.tar.gz", "fakepkg-1.0", BASE_FILES)
        dest = extract_stripped(archive, self.tmp / "out")
        self.assertEqual(sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()), sorted(BASE_FILES))
        self.assertEqual((dest / "src/fakepkg/core.py").read_text(encoding="utf-8"), BASE_FILES["src/fakepkg/core.py"])
        self.assertEqual(sorted(p.name for p in self.tmp.iterdir()), ["a.tar.gz", "out"])

    def test_internal_symlink_is_fine(self):
        archive = make_tarball(
            self.tmp / "a.tar.gz",
            "fakepkg-1.0",
            BASE_FILES,
            [_member("fakepkg-1.0/docs/core.py", tarfile.SYMTYPE, "../src/fakepkg/core.py")],
        )
        dest = extract_stripped(archive, self.tmp / "out")
        self.assertTrue((dest / "docs/core.py").is_symlink())

    @parameterized.expand(sorted(EVIL.items()))
    def test_refuses_escaping_members(self, _name, members):
        archive = make_tarball(self.tmp / "evil.tar.gz", "fakepkg-1.0", BASE_FILES, members)
        with tarfile.open(archive) as tar:
            with self.assertRaises(UnsafeArchive):
                check_members(tar.getmembers())
        with self.assertRaises(UnsafeArchive):
            extract_stripped(archive, self.tmp / "out")
        # Nothing was written: not the destination, not a staging folder, not the escaping file.
        self.assertEqual([p.name for p in self.tmp.iterdir()], ["evil.tar.gz"])
        self.assertFalse(Path("/tmp/series-evil-absolute").exists())

    def test_sha256(self):
        path = self.tmp / "f"
        path.write_bytes(b"abc")
        self.assertEqual(sha256_file(path), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")


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
