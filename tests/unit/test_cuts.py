"""cuts.py: how a pull request's cut may differ from its series patch (the lines of the patches it leaves out that
it carries as they are, the removal of lines only those added), and nothing else."""

from seriestool import cuts


def _patch(*hunks):
    """A patch text: (path, [lines with their +, - or space]) per file."""
    text = ""
    for path, lines in hunks:
        text += f"diff --git a/{path} b/{path}\nindex 1..2 100644\n--- a/{path}\n+++ b/{path}\n@@ -1,2 +1,2 @@\n"
        text += "".join(line + "\n" for line in lines)
    return text


MARK = _patch(("state.py", ["-    text = dump(self)", "+    text = dump(set_only(self))", " context"]))
SERIES = _patch(("state.py", [" a: int = 0", "+    skipped: int = field(0, saved_when_set)"]))


def test_the_same_change_differs_in_nothing():
    assert cuts.changed_lines(SERIES) == cuts.changed_lines(SERIES.replace("@@ -1,2", "@@ -7,2"))
    assert cuts.differences(SERIES, SERIES, {"0007": MARK}) == ([], [], [])


def test_a_cut_carries_the_lines_it_needs_of_a_patch_it_leaves_out():
    cut = SERIES + _patch(("state.py", ["-    text = dump(self)", "+    text = dump(set_only(self))"]))
    assert cuts.differences(SERIES, cut, {"0007": MARK}) == ([], [], ["0007"])
    # without that patch among those it leaves out, the lines are its own: a difference
    missing, extra, used = cuts.differences(SERIES, cut, {})
    assert (missing, used) == ([], []) and extra == [
        "state.py: -    text = dump(self)",
        "state.py: +    text = dump(set_only(self))",
    ]


def test_a_cut_may_skip_removing_a_line_only_a_left_out_patch_added():
    series = _patch(("state.py", ["-    text = dump(set_only(self))", "+    text = dumps(set_only(self))"]))
    cut = _patch(("state.py", ["+    text = dumps(set_only(self))"]))
    assert cuts.differences(series, cut, {"0007": MARK}) == ([], [], ["0007"])


def test_a_line_of_the_patch_the_cut_lacks_is_a_difference():
    cut = _patch(("state.py", [" a: int = 0"]))
    missing, extra, _ = cuts.differences(SERIES, cut, {"0007": MARK})
    assert missing == ["state.py: +    skipped: int = field(0, saved_when_set)"] and extra == []


def test_lines_declared_the_cuts_own_explain_one_difference_each():
    cut = _patch(("state.py", [" a: int = 0", "+    skipped: int = field(0)"]))
    missing, extra, _ = cuts.differences(SERIES, cut, {"0007": MARK})
    own = ["state.py: +    skipped: int = field(0, saved_when_set)", "state.py: +    skipped: int = field(0)"]
    assert cuts.own_lines(missing, extra, own) == ([], [], [])
    # a line declared twice explains one difference: the other is stale; an undeclared difference stays
    assert cuts.own_lines(missing, extra, own[:1] * 2) == ([], own[1:], own[:1])
