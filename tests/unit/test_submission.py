"""submission.py: what `pr` reads from a patch's diff: the test classes of a new test file, and the fields and
properties a patch adds to the class a checkpoint saves (a field saved only when set, a property kept in
`stateful_callbacks` through a helper an earlier patch added)."""

from pathlib import Path

from seriestool import patchfile, submission
from seriestool.manifest import Target


HEAD = "From 0 Mon Sep 17 00:00:00 2001\nFrom: A <a@example.com>\nSubject: [PATCH] {subject}\n\nBody.\n---\n"

FIELDS = """diff --git a/src/pkg/state.py b/src/pkg/state.py
--- a/src/pkg/state.py
+++ b/src/pkg/state.py
@@ -10,6 +10,16 @@ class State:
     Args:
+        position (`int`): documented, not a field.
     \"\"\"
\x20
     step: int = 0
+    position: int | None = dataclasses.field(
+        default=None, metadata={"saved_when_set": True}
+    )
+    always: int = 0
+
+    def _kept(self, name):
+        return self.stateful_callbacks.get(name, 0)
+
\x20
 class Other:
+    not_ours: int = 0
"""

PROPERTY = """diff --git a/src/pkg/state.py b/src/pkg/state.py
--- a/src/pkg/state.py
+++ b/src/pkg/state.py
@@ -30,6 +30,20 @@ class State:
         return 1
\x20
+    @property
+    def skipped(self) -> int:
+        \"\"\"A count.\"\"\"
+        return self._kept("skipped")
+
+    @skipped.setter
+    def skipped(self, value):
+        self._kept("skipped")
+
+    @property
+    def computed(self) -> int:
+        return self.step * 2
+
\x20
 class Other:
"""

TESTS = """diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1,12 @@
+class Recorder:
+    def on_step(self):
+        pass
+
+
+class NewTest(TestCase):
+    def test_one(self):
+        pass
+
+
+def helper():
+    def test_not_a_method():
"""


def _target(tmp_path: Path, patches: dict[str, str], **saved) -> Target:
    folder = tmp_path / "pkg"
    folder.mkdir(exist_ok=True)
    for name, diff in patches.items():
        (folder / name).write_text(HEAD.format(subject=name) + diff, encoding="utf-8")
    saved_state = {"file": "src/pkg/state.py", "class": "State", "saved_when_set": "saved_when_set"}
    saved_state.update(kept_in="stateful_callbacks", **saved)
    return Target("pkg", "pkg", "1.0", "0" * 64, "", "tests/", "src", list(patches), folder, saved_state=saved_state)


def test_the_fields_and_properties_a_patch_adds_to_the_saved_class(tmp_path):
    target = _target(tmp_path, {"0001-a.patch": FIELDS, "0002-b.patch": PROPERTY})
    first = submission.state_additions(target, "0001-a.patch")
    assert [(m.kind, m.name, m.saved_when_set) for m in first] == [
        ("field", "position", True),
        ("field", "always", False),
    ]
    second = submission.state_additions(target, "0002-b.patch")
    # `skipped` keeps its value through `_kept`, which an earlier patch added and which reads stateful_callbacks
    assert [(m.kind, m.name, m.kept_in) for m in second] == [
        ("property", "skipped", True),
        ("property", "computed", False),
    ]


def test_no_saved_class_declared_or_none_touched(tmp_path):
    target = _target(tmp_path, {"0001-a.patch": TESTS})
    assert submission.state_additions(target, "0001-a.patch") == []
    target.saved_state = {}
    assert submission.state_additions(target, "0001-a.patch") is None


def test_the_test_classes_of_a_new_file_are_those_with_a_test_method(tmp_path):
    path = tmp_path / "0001-t.patch"
    path.write_text(HEAD.format(subject="t") + TESTS, encoding="utf-8")
    diff = patchfile.read(path).file("tests/test_new.py")
    assert submission.test_classes(diff) == ["NewTest"]


PLAIN = """diff --git a/src/pkg/state.py b/src/pkg/state.py
--- a/src/pkg/state.py
+++ b/src/pkg/state.py
@@ -10,6 +10,7 @@ class State:
     \"\"\"
\x20
     step: int = 0
+    skipped: int = 0
\x20
 class Other:
"""


def test_pr_names_the_patch_that_makes_a_plain_field_load_in_the_release(tmp_path):
    from seriestool.commands import pr

    patches = {"0001-load.patch": TESTS, "0002-field.patch": PLAIN}
    target = _target(tmp_path, patches, unknown_field="raises TypeError", loaded_by="0001-load.patch")
    text = " ".join(pr.saved_state_lines(target, "0002-field.patch"))
    assert "- field `skipped`: saved in every checkpoint" in text
    assert "do NOT load in pkg 1.0: it raises TypeError on `skipped`." in text
    assert "With the pull request of 0001-load merged first, they load there" in text
    target.saved_state.pop("loaded_by")
    assert "merged first" not in " ".join(pr.saved_state_lines(target, "0002-field.patch"))


def test_pr_diffstat_says_whether_a_moved_test_file_joins_an_upstream_file_or_is_new():
    """Before: every moved test file was "appended on the branch", also a 2-process test whose home upstream does not
    have, which the branch creates (cold reviews of 0011-0016: the notes did not match the branch)."""
    from seriestool.commands import pr

    new_file = "diff --git a/{0} b/{0}\nnew file mode 100644\n--- /dev/null\n+++ b/{0}\n@@ -0,0 +1 @@\n+x = 1\n"
    text = new_file.format("tests/t/test_a.py") + new_file.format("tests/t/test_b_processes.py")
    patch = patchfile.PatchFile("s", "a", "", patchfile.parse_diff(text.splitlines()))
    moved = {"tests/t/test_a.py": "tests/t/test_topic.py", "tests/t/test_b_processes.py": "tests/t/dist/test_b.py"}
    rows = pr.diffstat(patch, moved, existing=["tests/t/test_topic.py"])
    assert rows[0].startswith("tests/t/test_topic.py (its tests, appended on the branch)")
    assert rows[1].startswith("tests/t/dist/test_b.py (its tests, a new file on the branch)")
    assert all("appended" in row for row in pr.diffstat(patch, moved))


def test_pr_quotes_the_commit_message_as_its_branch_holds_it():
    """Before: the notes quoted "Tests (tests/trainer/test_trainer_stream_epoch.py)" where the branch's commit, as
    `branches` rewrites it, names tests/trainer/test_trainer_data.py (a cold review of 0009)."""
    from seriestool.commands import pr

    body = "Tests (tests/t/test_a.py): red.\n\nAlso tests/t/test_b.py, not moved."
    moved = {"tests/t/test_a.py": "tests/t/test_topic.py"}
    assert pr.as_on_branch(body, moved) == "Tests (tests/t/test_topic.py): red.\n\nAlso tests/t/test_b.py, not moved."
    assert pr.as_on_branch(body, {}) == body


def test_pr_diffstat_counts_a_moved_test_file_as_its_branch_holds_it():
    """Before: the notes gave a moved test file the patch's count (its license, imports and helpers that upstream's
    shared ones replace): +53 for the 16 lines 0023's branch adds (cold reviews of 0007, 0009, 0023, 0022)."""
    from seriestool.commands import pr

    lines = "".join(f"+x{i} = {i}\n" for i in range(5))
    head = "diff --git a/tests/t/test_a.py b/tests/t/test_a.py\nnew file mode 100644\n--- /dev/null\n"
    text = f"{head}+++ b/tests/t/test_a.py\n@@ -0,0 +1,5 @@\n{lines}"
    patch = patchfile.PatchFile("s", "a", "", patchfile.parse_diff(text.splitlines()))
    moved = {"tests/t/test_a.py": "tests/t/test_topic.py"}
    assert pr.diffstat(patch, moved)[0].endswith("+5 -0")
    assert pr.diffstat(patch, moved, on_branch={"tests/t/test_topic.py": [2, 0]})[0].endswith("+2 -0")
