"""A series that landed upstream (patches 1..k in the base, found as a stack), and recorded dependencies:
the manifest's `[targets.<name>.depends]`, its validation, and how `verify`, `pr` and `export` show it."""

import json

import pytest
from seriesfixtures import GOOD, NOT_RED, TRUNCATE, VERSION, git, one_error_line, table_rows


def record_depends(fake, depends):
    """Append a `[targets.fake.depends]` table (patch -> earlier patches) to the fixture manifest."""
    rows = "".join(f'"{key}" = {json.dumps(values)}\n' for key, values in depends.items())
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write(f"\n[targets.fake.depends]\n# patch -> the earlier patches it needs\n{rows}")


def _landed_upstream(fake, names, k):
    """A clone of the base where the first k patches landed (as upstream merges them: one commit each)."""
    upstream = fake.upstream_repo(fake.root / f"upstream-{k}")
    for name in names[:k]:
        git(upstream, "am", "--quiet", str(fake.patches_dir / "fake" / name))
    return upstream


def _report(fake, python, *args):
    out = fake.root / "report.json"
    proc = fake.run("verify", "--python", python, "--json", str(out), *args)
    return proc, json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_base_holding_the_first_k_patches(fake, test_python, k):
    names = fake.build_series(GOOD, TRUNCATE, VERSION)
    record_depends(fake, {names[1]: [names[0]]})
    upstream = _landed_upstream(fake, names, k)

    proc, data = _report(fake, test_python, "--target", "fake", "--base", f"path:{upstream}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [p["base_status"] for p in data["patches"]] == ["already-upstream"] * k + ["clean"] * (3 - k)
    assert [p["verdict"] for p in data["patches"]] == ["upstream"] * k + ["ok"] * (3 - k)
    assert proc.stdout.count("already upstream (the base has the whole patch)") == k

    # `apply` skips exactly those, applies the rest and exits 0 (the README's submit flow).
    proc = fake.ok("apply", "--repo", str(upstream))
    states = [" ".join(line.split()[1:]) for line in proc.stdout.splitlines()[:3]]
    assert states == ["already present"] * k + ["applied"] * (3 - k)
    assert proc.stdout.splitlines()[-1] == f"branch series/fake: {3 - k} applied, {k} already present"
    assert git(upstream, "rev-list", "--count", "main..series/fake") == str(3 - k)

    # `checkout` on that base leaves them out too.
    git(upstream, "switch", "--quiet", "main")
    dest = fake.root / f"moved-{k}"
    proc = fake.ok("checkout", "--dir", str(dest), "--base", f"path:{upstream}")
    assert proc.stderr.count(": already upstream\n") == k
    assert [line.split()[3].rstrip(":") for line in proc.stderr.splitlines() if "left out" in line] == names[:k]
    assert git(dest, "rev-list", "--count", "series/base..HEAD") == str(3 - k)


def test_dependencies_are_shown_and_hidden_ones_are_problems(fake, test_python):
    names = fake.build_series(GOOD, TRUNCATE)
    # TRUNCATE does not apply alone, and the manifest does not say what it needs: a hidden dependency.
    proc, data = _report(fake, test_python)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    second = data["patches"][1]
    assert second["verdict"] == "fail" and second["depends_on"] == [] and second["applies_alone"] is False
    assert "records no earlier patch it needs (hidden dependency)" in second["problems"][0]
    assert second["red_without_fix"] and second["green_with_fix"]

    record_depends(fake, {names[1]: [names[0]]})
    proc, data = _report(fake, test_python)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [p["depends_on"] for p in data["patches"]] == [[], [names[0]]]
    assert [p["verdict"] for p in data["patches"]] == ["ok", "ok"]
    assert [row["alone"] for row in table_rows(proc.stdout)] == ["yes", "needs 0001"]

    # `pr` of the dependent patch names the one it needs, by title and branch; the first one names none.
    body = fake.ok("pr", "0002").stdout
    assert '\n  "core: make add() add" (branch trainer-series/core-make-add-add)\n' in body
    assert "\nDependencies:\n" not in fake.ok("pr", "0001").stdout


def test_a_recorded_dependency_that_is_not_needed_is_fine(fake, test_python):
    names = fake.build_series(GOOD, NOT_RED)
    record_depends(fake, {names[1]: [names[0]]})
    proc, data = _report(fake, test_python, "--patch", "0001")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["patches"][1]["applies_alone"] is True and data["patches"][1]["depends_on"] == [names[0]]


def test_export_keeps_the_depends_table_and_warns_when_it_goes_stale(fake):
    names = fake.build_series(GOOD, TRUNCATE)
    record_depends(fake, {names[1]: [names[0]]})
    before = fake.manifest.read_text(encoding="utf-8")
    fake.ok("checkout", "--replace")
    assert "warning" not in fake.ok("export").stderr
    assert fake.manifest.read_text(encoding="utf-8") == before
    # Reword the second commit: its file name changes, the table still names the old one.
    git(fake.checkout_dir, "commit", "--quiet", "--amend", "-m", "core: truncate the sum")
    proc = fake.ok("export")
    assert f"[targets.fake.depends] in series.toml names patches export no longer produced ({names[1]})" in proc.stderr
    assert "0002-core-truncate-the-sum.patch" in fake.manifest.read_text(encoding="utf-8")
    assert "is not in the patches list" in one_error_line(fake.run("pr", "0001"))


@pytest.mark.parametrize(
    "depends, message",
    [
        ({"0009-nope.patch": ["A"]}, "'0009-nope.patch' is not in the patches list"),
        ({"B": ["0009-nope.patch"]}, "needs '0009-nope.patch', which is not in the patches list"),
        ({"A": ["B"]}, "which does not come before it"),
        ({"B": ["B"]}, "which does not come before it"),
    ],
    ids=["unknown-key", "unknown-value", "later", "itself"],
)
def test_bad_depends_is_one_clear_error(fake, depends, message):
    names = fake.build_series(GOOD, TRUNCATE)
    named = {"A": names[0], "B": names[1]}
    record_depends(fake, {named.get(k, k): [named.get(v, v) for v in vs] for k, vs in depends.items()})
    line = one_error_line(fake.run("pr", "0001"))
    assert "[targets.fake.depends]" in line and message in line


def test_depends_must_map_to_a_list(fake):
    names = fake.build_series(GOOD, TRUNCATE)
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write(f'\n[targets.fake.depends]\n"{names[1]}" = "{names[0]}"\n')
    assert "must map to a list of patch file names" in one_error_line(fake.run("pr", "0001"))
