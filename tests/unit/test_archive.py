"""archive.py: which tar members are accepted, the hash, and extraction that leaves nothing behind on failure."""

import io
import tarfile

import pytest
from seriestool.archive import UnsafeArchive, check_members, extract_stripped


TOP = "pkg-1.0"


def member(name, kind=tarfile.REGTYPE, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


def folder(name):
    return member(name, tarfile.DIRTYPE)


def symlink(name, target):
    return member(name, tarfile.SYMTYPE, target)


def hardlink(name, target):
    return member(name, tarfile.LNKTYPE, target)


def refused(members):
    with pytest.raises(UnsafeArchive) as info:
        check_members(members)
    return str(info.value)


ACCEPTED = {
    "plain": [folder(TOP), member(f"{TOP}/a.py"), member(f"{TOP}/src/b.py")],
    "no_folder_entry": [member(f"{TOP}/a.py")],
    "dot_prefix": [folder("./"), folder(f"./{TOP}"), member(f"./{TOP}/a.py")],
    "trailing_slashes": [folder(f"{TOP}/"), member(f"{TOP}//a.py")],
    "symlink_inside": [member(f"{TOP}/a.py"), symlink(f"{TOP}/src/link", "../a.py")],
    "symlink_to_the_top": [member(f"{TOP}/a.py"), symlink(f"{TOP}/src/up", "..")],
    "symlink_sideways": [member(f"{TOP}/docs/a.md"), symlink(f"{TOP}/src/doc", "../docs/./a.md")],
    "hardlink_inside": [member(f"{TOP}/a.py"), hardlink(f"{TOP}/b.py", f"{TOP}/a.py")],
    "hardlink_to_the_top": [member(f"{TOP}/a.py"), hardlink(f"{TOP}/b.py", f"{TOP}/src/../a.py")],
    "hardlink_to_a_hardlink": [
        member(f"./{TOP}/a.py"),
        hardlink(f"{TOP}/b", f"{TOP}/a.py"),
        hardlink(f"{TOP}/c", f"./{TOP}/b"),
    ],
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_accepted(case):
    assert check_members(ACCEPTED[case]) == TOP


REFUSED = {
    "absolute": ([member("/etc/passwd")], "member '/etc/passwd' has an absolute path"),
    "absolute_backslash": ([member("\\evil")], "member '\\\\evil' has an absolute path"),
    "drive": ([member("C:evil")], "member 'C:evil' has an absolute path"),
    "drive_folder": ([folder("C:"), member("C:/evil")], "member 'C:' has an absolute path"),
    "dotdot": ([member(f"{TOP}/../evil")], f"member '{TOP}/../evil' escapes the target folder"),
    "dotdot_nested": ([member(f"{TOP}/a/../../evil")], f"member '{TOP}/a/../../evil' escapes the target folder"),
    "backslash": (
        [member(f"{TOP}/a\\..\\..\\evil")],
        f"member '{TOP}/a\\\\..\\\\..\\\\evil' escapes the target folder",
    ),
    "second_top": (
        [member(f"{TOP}/a.py"), member("other-1.0/b.py")],
        f"member 'other-1.0/b.py' is outside the archive's top-level folder '{TOP}'",
    ),
    "sibling_sharing_the_prefix": (
        [member(f"{TOP}/a.py"), member(f"{TOP}-evil/b.py")],
        f"member '{TOP}-evil/b.py' is outside the archive's top-level folder '{TOP}'",
    ),
    "file_at_the_top": ([member("setup.py")], "member 'setup.py' is not inside a top-level folder"),
    "file_beside_the_top": (
        [member(f"{TOP}/a.py"), member(f"{TOP}")],
        f"member '{TOP}' is not inside a top-level folder",
    ),
    "symlink_as_the_top": (
        [member(f"{TOP}/a.py"), symlink(TOP, "/etc")],
        f"member '{TOP}' is not inside a top-level folder",
    ),
    # A name that is only "." or "./" is the extraction folder itself: only a folder may be that.
    "file_named_dot": ([folder(TOP), member("./")], "member './' is not inside a top-level folder"),
    "symlink_named_dot": ([folder(TOP), symlink(".", "/etc")], "member '.' is not inside a top-level folder"),
    "symlink_named_empty": ([folder(TOP), symlink("", "/etc")], "member '' is not inside a top-level folder"),
    "symlink_absolute": (
        [symlink(f"{TOP}/link", "/etc/passwd")],
        f"symlink '{TOP}/link' points to an absolute path '/etc/passwd'",
    ),
    "symlink_escaping": (
        [symlink(f"{TOP}/link", "../../outside")],
        f"symlink '{TOP}/link' points outside the target folder ('../../outside')",
    ),
    "symlink_to_a_sibling_sharing_the_prefix": (
        [member(f"{TOP}/a.py"), symlink(f"{TOP}/link", f"../{TOP}-evil/x")],
        f"symlink '{TOP}/link' points outside the target folder ('../{TOP}-evil/x')",
    ),
    "symlink_to_the_prefix_itself": (
        [member(f"{TOP}/a.py"), symlink(f"{TOP}/link", f"../{TOP}-evil")],
        f"symlink '{TOP}/link' points outside the target folder ('../{TOP}-evil')",
    ),
    "symlink_nested_escaping": (
        [symlink(f"{TOP}/src/deep/link", "../../../x")],
        f"symlink '{TOP}/src/deep/link' points outside the target folder ('../../../x')",
    ),
    "hardlink_escaping": (
        [hardlink(f"{TOP}/hard", "../outside")],
        f"hard link '{TOP}/hard' points outside the target folder ('../outside')",
    ),
    "hardlink_absolute": (
        [hardlink(f"{TOP}/hard", f"/{TOP}/a.py")],
        f"hard link '{TOP}/hard' points outside the target folder ('/{TOP}/a.py')",
    ),
    "hardlink_to_a_sibling_sharing_the_prefix": (
        [member(f"{TOP}/a.py"), hardlink(f"{TOP}/hard", f"{TOP}-evil/x")],
        f"hard link '{TOP}/hard' points outside the target folder ('{TOP}-evil/x')",
    ),
    "hardlink_to_a_later_file": (
        [hardlink(f"{TOP}/hard", f"{TOP}/a.py"), member(f"{TOP}/a.py")],
        f"hard link '{TOP}/hard' points to '{TOP}/a.py', not a file before it",
    ),
    "hardlink_to_a_folder": (
        [folder(f"{TOP}/src"), hardlink(f"{TOP}/hard", f"{TOP}/src")],
        f"hard link '{TOP}/hard' points to '{TOP}/src', not a file before it",
    ),
    "hardlink_to_a_symlink": (
        [symlink(f"{TOP}/s", "a.py"), hardlink(f"{TOP}/hard", f"{TOP}/s")],
        f"hard link '{TOP}/hard' points to '{TOP}/s', not a file before it",
    ),
    "device": ([member(f"{TOP}/dev", tarfile.CHRTYPE)], f"member '{TOP}/dev' is not a regular file, folder or link"),
    "block": ([member(f"{TOP}/blk", tarfile.BLKTYPE)], f"member '{TOP}/blk' is not a regular file, folder or link"),
    "fifo": ([member(f"{TOP}/fifo", tarfile.FIFOTYPE)], f"member '{TOP}/fifo' is not a regular file, folder or link"),
    "empty": ([], "archive is empty"),
    "only_the_dot_folder": ([folder("."), folder("./")], "archive is empty"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused(case):
    members, message = REFUSED[case]
    assert refused(members) == message


def _tarball(path, members):
    """members: (TarInfo, bytes or None)."""
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def test_extract_stripped(tmp_path):
    link = symlink(f"{TOP}/src/link", "../a.py")
    archive = _tarball(tmp_path / "a.tar.gz", [(folder(TOP), None), (member(f"{TOP}/a.py"), b"A\n"), (link, None)])
    dest = extract_stripped(archive, tmp_path / "out")
    assert dest == tmp_path / "out"
    assert (dest / "a.py").read_bytes() == b"A\n"
    assert (dest / "src" / "link").is_symlink() and (dest / "src" / "link").read_bytes() == b"A\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz", "out"]


def test_an_unsafe_archive_writes_nothing(tmp_path):
    archive = _tarball(tmp_path / "a.tar.gz", [(member(f"{TOP}/a.py"), b"A\n"), (member("../evil"), b"E\n")])
    with pytest.raises(UnsafeArchive, match="escapes the target folder"):
        extract_stripped(archive, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz"]


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_every_refused_archive_writes_nothing(tmp_path, case):
    """What check_members refuses, extract_stripped refuses before anything is written: not the destination, not
    a staging folder, not the escaping file."""
    members, message = REFUSED[case]
    archive = _tarball(tmp_path / "a.tar.gz", [(info, b"x" if info.isreg() else None) for info in members])
    with pytest.raises(UnsafeArchive) as raised:
        extract_stripped(archive, tmp_path / "out")
    assert str(raised.value) == message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz"]
    assert not (tmp_path.parent / "evil").exists() and not (tmp_path.parent / "outside").exists()


def test_a_file_that_is_not_an_archive(tmp_path):
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(b"not a tarball")
    with pytest.raises(UnsafeArchive, match=r"^cannot read archive: "):
        extract_stripped(archive, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz"]


def test_a_hard_link_to_a_member_not_in_the_archive(tmp_path):
    # tarfile itself fails with a KeyError when it extracts such a link
    archive = _tarball(tmp_path / "a.tar.gz", [(hardlink(f"{TOP}/hard", f"{TOP}/missing"), None)])
    with pytest.raises(
        UnsafeArchive, match=rf"^hard link '{TOP}/hard' points to '{TOP}/missing', not a file before it$"
    ):
        extract_stripped(archive, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz"]


def test_extraction_clears_risky_modes(tmp_path):
    # tarfile's "data" filter: no setuid bit, no write bit for group and others
    risky = member(f"{TOP}/run.sh")
    risky.mode = 0o4777
    archive = _tarball(tmp_path / "b.tar.gz", [(risky, b"#!/bin/sh\n")])
    dest = extract_stripped(archive, tmp_path / "out")
    assert (dest / "run.sh").stat().st_mode & 0o7777 == 0o755


def test_a_leftover_staging_folder_is_never_extracted_into(tmp_path):
    archive = _tarball(tmp_path / "a.tar.gz", [(member(f"{TOP}/a.py"), b"A\n")])
    leftover = tmp_path / "out.extract" / TOP
    leftover.mkdir(parents=True)
    (leftover / "junk.py").write_text("junk\n", encoding="utf-8")
    with pytest.raises(FileExistsError):
        extract_stripped(archive, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz"]
    assert sorted(p.name for p in extract_stripped(archive, tmp_path / "out").iterdir()) == ["a.py"]
