"""patchfile.py: the message and the per-file hunks of a format-patch file, and whether it is whole."""

import pytest
from seriestool import patchfile


HEAD = """\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: Ada Author <ada@example.com>
Date: Mon, 1 Jan 2001 00:00:00 +0000
Subject: [PATCH] core: make add() add, a subject long enough to be folded by
 git format-patch

The bug, and the fix.

Fixes nothing.
---
 src/core.py | 4 ++--
 1 file changed, 2 insertions(+), 2 deletions(-)

"""

MODIFY = """\
diff --git a/src/core.py b/src/core.py
index 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 100644
--- a/src/core.py
+++ b/src/core.py
@@ -1,4 +1,4 @@ def header():
 def add(a, b):
-    return a - b
+    return a + b
{blank}
{blank}
@@ -10,2 +10,3 @@ def mul(a, b):
 def mul(a, b):
+    \"\"\"Multiply.\"\"\"
     return a * b
""".format(blank=" ")

ADD = """\
diff --git a/tests/test_add.py b/tests/test_add.py
new file mode 100644
index 0000000000000000000000000000000000000000..3333333333333333333333333333333333333333
--- /dev/null
+++ b/tests/test_add.py
@@ -0,0 +1,2 @@
+def test_add():
+    assert True
\\ No newline at end of file
"""

DELETE = """\
diff --git a/old.txt b/old.txt
deleted file mode 100644
index 4444444444444444444444444444444444444444..0000000000000000000000000000000000000000
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
"""

MODE = """\
diff --git a/run.sh b/run.sh
old mode 100644
new mode 100755
"""

QUOTED = """\
diff --git "a/docs/\\303\\244 b.md" "b/docs/\\303\\244 b.md"
index 5555555555555555555555555555555555555555..6666666666666666666666666666666666666666 100644
--- "a/docs/\\303\\244 b.md"\t
+++ "b/docs/\\303\\244 b.md"\t
@@ -1 +1 @@
-x
+y
"""

TAIL = "-- \n2.43.0\n\n"


def _write(tmp_path, text, name="0001-x.patch"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_read_a_whole_patch(tmp_path):
    parsed = patchfile.read(_write(tmp_path, HEAD + MODIFY + ADD + DELETE + MODE + QUOTED + TAIL))
    assert parsed.subject == "core: make add() add, a subject long enough to be folded by git format-patch"
    assert parsed.author == "Ada Author <ada@example.com>"
    assert parsed.body == "The bug, and the fix.\n\nFixes nothing."
    assert [(f.old_path, f.new_path, f.status) for f in parsed.files] == [
        ("src/core.py", "src/core.py", "M"),
        (None, "tests/test_add.py", "A"),
        ("old.txt", None, "D"),
        ("run.sh", "run.sh", "M"),
        ("docs/\u00e4 b.md", "docs/\u00e4 b.md", "M"),
    ]
    assert [f.path for f in parsed.files] == ["src/core.py", "tests/test_add.py", "old.txt", "run.sh", "docs/ä b.md"]
    assert parsed.paths() == ["src/core.py", "tests/test_add.py", "old.txt", "run.sh", "docs/ä b.md"]
    assert patchfile.problems(parsed) == []
    assert parsed.added() == parsed.added("tests/") == ["tests/test_add.py"]  # new files only
    assert parsed.added("src/") == [] and parsed.added("tests/test_b") == []

    core = parsed.file("src/core.py")
    assert core.header == MODIFY.splitlines()[:4]
    assert [(h.header, h.old_start, h.old_count, h.complete) for h in core.hunks] == [
        ("@@ -1,4 +1,4 @@ def header():", 1, 4, True),
        ("@@ -10,2 +10,3 @@ def mul(a, b):", 10, 2, True),
    ]
    assert core.hunks[0].lines == [" def add(a, b):", "-    return a - b", "+    return a + b", " ", " "]
    assert core.one_hunk_patch(core.hunks[1]) == "\n".join(MODIFY.splitlines()[:4] + MODIFY.splitlines()[10:]) + "\n"

    added = parsed.file("tests/test_add.py")
    assert added.hunks[0].old_count == 0 and added.hunks[0].old_start == 0
    assert added.hunks[0].lines[-1] == "\\ No newline at end of file"
    deleted = parsed.file("old.txt")
    assert (deleted.hunks[0].old_count, deleted.hunks[0].lines) == (1, ["-gone"])
    assert parsed.file("run.sh").hunks == [] and parsed.file("run.sh").header == MODE.splitlines()
    # the last hunk ends at its counts: the signature after it is not a deleted line
    assert [h.lines for h in parsed.file("docs/ä b.md").hunks] == [["-x", "+y"]]
    assert parsed.file("nope.py") is None


def test_a_subject_without_the_prefix_and_a_message_without_a_body(tmp_path):
    text = "From: a@b\nSubject: [PATCH v2 3/7] plain   subject\n\n" + MODIFY
    parsed = patchfile.read(_write(tmp_path, text))
    assert (parsed.subject, parsed.body, parsed.author) == ("plain subject", "", "a@b")
    assert [f.path for f in parsed.files] == ["src/core.py"]


def test_a_file_with_no_blank_line_holds_nothing(tmp_path):
    parsed = patchfile.read(_write(tmp_path, "From: a@b\nSubject: x"))
    assert (parsed.subject, parsed.body, parsed.files) == ("x", "", [])
    assert patchfile.problems(parsed) == ["it holds no diff"]


def test_paths_are_listed_once_each(tmp_path):
    rename_like = "diff --git a/a.py b/b.py\n--- a/a.py\n+++ b/b.py\n@@ -1 +1 @@\n-x\n+y\n"
    parsed = patchfile.read(_write(tmp_path, HEAD + MODIFY + rename_like + MODIFY.replace("core", "other")))
    assert parsed.paths() == ["src/core.py", "a.py", "b.py", "src/other.py"]
    assert parsed.file("b.py").path == "b.py" and parsed.file("a.py") is parsed.file("b.py")


def test_names_from_the_diff_line_when_there_are_no_sides():
    (diff,) = patchfile.parse_diff(["diff --git a/old.bin b/new.bin", "Binary files differ"])
    assert (diff.old_path, diff.new_path, diff.hunks) == ("old.bin", "new.bin", [])


def test_a_hunk_header_without_counts_means_one_line():
    (diff,) = patchfile.parse_diff(["diff --git a/x b/x", "--- a/x", "+++ b/x", "@@ -3 +3 @@", "-a", "+b", "tail"])
    (hunk,) = diff.hunks
    assert (hunk.old_start, hunk.old_count, hunk.lines, hunk.complete) == (3, 1, ["-a", "+b"], True)


def _hunk(lines):
    return patchfile.parse_diff(["diff --git a/x b/x", "--- a/x", "+++ b/x", *lines])[0].hunks


HUNKS = {
    # header, body, complete
    "whole": ("@@ -1,2 +1,2 @@", [" a", "-b", "+c"], True),
    "old_side_short": ("@@ -1,3 +1,2 @@", [" a", "-b", "+c"], False),
    # The old side is reached (1 line), the new side is not (3 lines): not whole.
    "new_side_short": ("@@ -1,1 +1,3 @@", [" a", "+b"], False),
    "only_additions_short": ("@@ -0,0 +1,2 @@", ["+a"], False),
    "only_deletions_short": ("@@ -1,2 +0,0 @@", ["-a"], False),
    "empty_line_is_context": ("@@ -1,2 +1,2 @@", [" a", ""], True),
    "stops_at_the_next_file": ("@@ -1,2 +1,2 @@", [" a", "diff --git a/y b/y"], False),
}


@pytest.mark.parametrize("case", sorted(HUNKS))
def test_whether_a_hunk_is_whole(case):
    header, body, complete = HUNKS[case]
    hunks = _hunk([header, *body])
    assert hunks[0].complete is complete
    assert hunks[0].lines == [line for line in body if not line.startswith("diff")]


def test_a_hunk_ends_where_its_counts_are_reached():
    first, second = _hunk(["@@ -1 +1 @@", "-a", "+b", "garbage", "@@ -5 +5 @@", " x"])
    assert (first.lines, first.complete) == (["-a", "+b"], True)
    assert (second.lines, second.complete) == ([" x"], True)


def test_a_patch_cut_after_a_whole_line_of_its_last_hunk(tmp_path):
    # The file ends with a newline after " a": the empty string after it is not a context line.
    text = HEAD + "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-b\n+c\n a\n"
    whole = patchfile.read(_write(tmp_path, text + " d\n"))
    assert patchfile.problems(whole) == []
    cut = patchfile.read(_write(tmp_path, text))
    assert patchfile.problems(cut) == ["hunk 1 of x (@@ -1,3 +1,3 @@) is cut short"]


def test_a_patch_whose_last_context_line_is_empty_is_whole(tmp_path):
    # An empty context line written without its space (as some tools do) is still a line.
    text = HEAD + "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-b\n+c\n\n"
    assert patchfile.problems(patchfile.read(_write(tmp_path, text))) == []


PROBLEMS = {
    "header_without_new_side": ("diff --git a/x b/x\n--- a/x\n", ["the header of x is cut short"]),
    "header_without_hunks": ("diff --git a/x b/x\n--- a/x\n+++ b/x\n", ["the header of x is cut short"]),
    "second_hunk_cut": (
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n@@ -9,2 +9,2 @@ f\n-a\n",
        ["hunk 2 of x (@@ -9,2 +9,2 @@ f) is cut short"],
    ),
    "two_files_cut": (
        "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1 @@\n-a\n"
        "diff --git a/y b/y\n--- a/y\n+++ b/y\n@@ -1,3 +1 @@\n-a\n",
        ["hunk 1 of x (@@ -1,2 +1 @@) is cut short", "hunk 1 of y (@@ -1,3 +1 @@) is cut short"],
    ),
    "new_file_cut_in_the_header": (
        "diff --git a/n.py b/n.py\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n",
        ["the header of diff --git a/n.py b/n.py is cut short"],
    ),
}


@pytest.mark.parametrize("case", sorted(PROBLEMS))
def test_problems(tmp_path, case):
    diff, expected = PROBLEMS[case]
    assert patchfile.problems(patchfile.read(_write(tmp_path, HEAD + diff))) == expected


def test_a_header_cut_before_any_side_names_its_diff_line():
    parsed = patchfile.PatchFile(subject="s", author="a", body="", files=patchfile.parse_diff(["diff --git x"]))
    assert parsed.files[0].path is None
    assert patchfile.problems(parsed) == []
    half = patchfile.FileDiff(old_path=None, new_path=None, header=["diff --git x", "+++ b/x"])
    assert patchfile.problems(patchfile.PatchFile("s", "a", "", [half])) == ["the header of diff --git x is cut short"]


def test_quoted_paths():
    assert patchfile._unquote('"a/\\303\\244\\tb"') == "a/\u00e4\tb"
    assert patchfile._unquote("a/plain") == "a/plain"
    assert patchfile._unquote('"a/half') == '"a/half'
    assert patchfile._side("--- a/x.py", "a/") == "x.py"
    assert patchfile._side("+++ b/x.py\t", "b/") == "x.py"
    assert patchfile._side("--- /dev/null", "a/") is None
    assert patchfile._side("--- x.py", "a/") == "x.py"


def test_status_and_path_of_a_file_diff():
    assert patchfile.FileDiff(None, "n").status == "A"
    assert patchfile.FileDiff("o", None).status == "D"
    assert patchfile.FileDiff("o", None).path == "o"
    assert patchfile.FileDiff("o", "n").status == "M"
    assert patchfile.FileDiff("o", "n").path == "n"
