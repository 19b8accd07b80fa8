"""Safe extraction of source archives (project-agnostic)."""

import os
import posixpath
import shutil
import tarfile
from collections.abc import Iterable
from pathlib import Path


class UnsafeArchive(Exception):
    """An archive member would land outside the extraction folder, or is not a plain file."""


def _inside(path: str, root: str) -> bool:
    """Whether the normalised posix `path` lies inside `root` (a single top-level folder name)."""
    norm = posixpath.normpath(path)
    return norm == root or norm.startswith(root + "/")


def check_members(members: Iterable[tarfile.TarInfo]) -> str:
    """Validate tar members; return the single top-level folder name they all live in.

    Refuses absolute names, `..` components, links leaving the top folder, hard links to anything but
    a regular file earlier in the archive, device files, members that are not below one top-level
    folder and archives whose members do not share one (as sdists do).
    """
    top = None
    files = set()  # the files so far: what a hard link may point to
    for member in members:
        name = member.name
        if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
            raise UnsafeArchive(f"member {name!r} has an absolute path")
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if not parts:  # the extraction folder itself: only a folder may be that
            if not member.isdir():
                raise UnsafeArchive(f"member {name!r} is not inside a top-level folder")
            continue
        if ".." in parts or "\\" in name:
            raise UnsafeArchive(f"member {name!r} escapes the target folder")
        if top is None:
            top = parts[0]
        elif parts[0] != top:
            raise UnsafeArchive(f"member {name!r} is outside the archive's top-level folder {top!r}")
        if len(parts) == 1 and not member.isdir():
            raise UnsafeArchive(f"member {name!r} is not inside a top-level folder")
        if member.issym():
            if member.linkname.startswith("/"):
                raise UnsafeArchive(f"symlink {name!r} points to an absolute path {member.linkname!r}")
            target = posixpath.join(posixpath.dirname("/".join(parts)), member.linkname)
            if not _inside(target, top):
                raise UnsafeArchive(f"symlink {name!r} points outside the target folder ({member.linkname!r})")
        elif member.islnk():
            if member.linkname.startswith("/") or not _inside(member.linkname, top):
                raise UnsafeArchive(f"hard link {name!r} points outside the target folder ({member.linkname!r})")
            if posixpath.normpath(member.linkname) not in files:
                raise UnsafeArchive(f"hard link {name!r} points to {member.linkname!r}, not a file before it")
        elif not (member.isreg() or member.isdir()):
            raise UnsafeArchive(f"member {name!r} is not a regular file, folder or link")
        if member.isreg() or member.islnk():
            files.add("/".join(parts))
    if top is None:
        raise UnsafeArchive("archive is empty")
    return top


def extract_stripped(archive: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Path:
    """Extract a .tar.gz whose members share one top-level folder into the new folder `dest`.

    Every member is checked before anything is written, and extraction also uses tarfile's
    "data" filter. `dest` must not exist; on failure it is not left behind.
    """
    dest = Path(dest)
    staging = dest.with_name(dest.name + ".extract")
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            top = check_members(members)
            staging.mkdir()
            if hasattr(tarfile, "data_filter"):
                try:
                    tar.extractall(staging, members=members, filter="data")
                except tarfile.FilterError as exc:
                    raise UnsafeArchive(str(exc)) from exc
            else:  # Python < 3.11.4: the explicit checks above are all there is
                tar.extractall(staging, members=members)
        os.rename(staging / top, dest)
    except tarfile.TarError as exc:
        raise UnsafeArchive(f"cannot read archive: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest
