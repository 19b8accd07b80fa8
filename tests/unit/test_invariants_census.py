"""scripts/invariants/census.py: the tree's census (0017's repository check) run and read, on stand-in scripts that
print what the check prints."""

import textwrap

from invariants import census


def _script(tmp_path, body):
    path = tmp_path / "check_loss_kwargs_declarations.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return str(path)


def test_a_census_that_fails_names_its_heads(tmp_path):
    script = _script(
        tmp_path,
        """
        import sys
        print("Not checked (2):")
        print("- AModel: cannot import")
        print("- BModel: a property")
        print("Declared `accepts_loss_kwargs = False` although their loss divides by it (1; ...):")
        print("- CModel")
        print("2 heads are handed `num_items_in_batch` ... hand the count to its loss:")
        print("- SegformerForSemanticSegmentation")
        print("- DModel")
        sys.exit(1)
        """,
    )
    result = census.run(script)
    assert result["exit"] == 1 and result["not_checked"] == 2 and result["declared_averaged"] == 1
    assert result["failing"] == ["SegformerForSemanticSegmentation", "DModel"]
    assert census.found(result) == [
        "2 head(s) handed num_items_in_batch although their loss ignores it: SegformerForSemanticSegmentation, DModel"
    ]


def test_a_census_that_passes_finds_nothing(tmp_path):
    script = _script(tmp_path, 'print("Not checked (1):")\nprint("- AModel: cannot import")\n')
    result = census.run(script)
    assert result["exit"] == 0 and result["failing"] == [] and result["not_checked"] == 1
    assert census.found(result) == []


def test_a_census_that_crashes_or_hangs_is_a_finding(tmp_path):
    result = census.run(_script(tmp_path, "raise ImportError('no module named x')\n"))
    assert census.found(result) == ["the census did not run to its end: ImportError: no module named x"]
    result = census.run(_script(tmp_path, "import time\ntime.sleep(5)\n"), timeout=0.5)
    assert census.found(result) == ["the census did not run to its end: the census took more than 0s"]


def test_the_census_reads_the_checked_line_and_a_run_that_checks_nothing(tmp_path):
    """The check prints "Checked N of M model classes." on every run, and fails, saying why on stdout, where it could
    check no class."""
    body = 'print("Checked 1 of 2 model classes.")\nprint("Not checked (1):")\nprint("- AModel: cannot import")\n'
    result = census.run(_script(tmp_path, body))
    assert result["exit"] == 0 and result["not_checked"] == 1 and census.found(result) == []
    body = (
        "import sys\n"
        'print("Checked 0 of 1 model classes.")\n'
        'print("Not checked (1):")\n'
        'print("- AModel: cannot import")\n'
        'print("No model class could be checked.")\n'
        "sys.exit(1)\n"
    )
    result = census.run(_script(tmp_path, body))
    assert census.found(result) == ["the census did not run to its end: No model class could be checked."]
