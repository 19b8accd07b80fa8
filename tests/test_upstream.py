"""`verify --base`: where each patch stands on a base that moved - local upstream repositories built here.

Every base status has a test: applies cleanly, applies with a 3-way merge (drifted context), conflicts
(files and hunks), already upstream (the same change is there), fixed upstream differently (another
change there makes the patch's own tests pass).
"""

import json
import xml.etree.ElementTree as ET

from seriesfixtures import GOOD, TRUNCATE, VERSION, apply_changes, git, table_rows


# Changes `def mul`, three lines below GOOD's change.
MUL_DEFAULT = (
    "core: give mul() a default factor",
    {
        "src/fakepkg/core.py": ("def mul(a, b):", "def mul(a, b=1):"),
        "tests/regress/test_mul_default.py": (
            "from fakepkg.core import mul\n\n\ndef test_mul_default():\n    assert mul(4) == 4\n"
        ),
    },
)


def _upstream(fake, changes, message="upstream moves on"):
    """A clone-like repository of the base with one more commit."""
    repo = fake.upstream_repo(fake.root / "upstream")
    apply_changes(repo, changes)
    git(repo, "commit", "--quiet", "-am", message)
    return repo


def _verify(fake, python, base):
    out = {key: fake.root / f"report.{key}" for key in ("json", "xml", "md")}
    out["md"].write_text("earlier step\n", encoding="utf-8")
    proc = fake.run(
        "verify",
        "--python",
        python,
        "--target",
        "fake",
        "--base",
        base,
        "--json",
        str(out["json"]),
        "--junit",
        str(out["xml"]),
        "--summary",
        str(out["md"]),
    )
    data = json.loads(out["json"].read_text(encoding="utf-8"))
    cases = {(c.get("classname"), c.get("name")): c for c in ET.parse(out["xml"]).getroot().iter("testcase")}
    return proc, data, cases, out["md"].read_text(encoding="utf-8")


def _column(data, key):
    return [p[key] for p in data["patches"]]


def test_already_upstream_three_way_and_clean(fake, test_python):
    names = fake.build_series(GOOD, MUL_DEFAULT, VERSION)
    # Upstream took the first patch as it is, then changed a context line of the second one.
    upstream = fake.upstream_repo(fake.root / "upstream")
    git(upstream, "am", "--quiet", str(fake.patches_dir / "fake" / names[0]))
    apply_changes(upstream, {"src/fakepkg/core.py": ("    return a * b\n", "    return b * a\n")})
    git(upstream, "commit", "--quiet", "-am", "core: reorder mul()")

    proc, data, cases, summary = _verify(fake, test_python, f"git:{upstream.as_uri()}@main")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _column(data, "base_status") == ["already-upstream", "3-way", "clean"]
    assert _column(data, "verdict") == ["upstream", "ok", "ok"]
    assert data["ok"] is True
    assert data["patches"][0]["red"] is None and data["patches"][0]["notes"]
    assert "already upstream" in proc.stdout and "3-way" in proc.stdout
    # The shallow fetch of upstream lacks the blobs the second patch was made against: they come
    # from the pinned sdist plus the series, so that the 3-way merge can run.
    assert git(fake.work / "verify" / "fake", "rev-parse", "--verify", "refs/series/preimages")
    mul = data["patches"][1]
    assert mul["red_without_fix"] and mul["green_with_fix"] and mul["skipped_before"] == []
    assert cases[(f"fake.{names[0]}", "applies")].find("skipped").get("message").startswith("already-upstream")
    assert cases[(f"fake.{names[1]}", "applies")].find("system-out").text == "applies with a 3-way merge"
    assert summary.startswith("earlier step\n### Patch series verify: OK")
    assert f"| `fake/{names[0]}` | upstream | upstream | - | - | - | - | upstream |" in summary  # tier, then applies
    # alone: on the bare base it goes in through the same 3-way merge as in the series
    assert f"| `fake/{names[1]}` | upstream | 3-way | yes | yes 1/1 | yes 1/0 | clean | ok |" in summary


def test_fixed_upstream_differently_is_news_not_a_failure(fake, test_python):
    names = fake.build_series(GOOD, VERSION)
    upstream = _upstream(fake, {"src/fakepkg/core.py": ("return a - b", "return sum((a, b))")})

    proc, data, cases, summary = _verify(fake, test_python, f"path:{upstream}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _column(data, "base_status") == ["fixed-differently", "clean"]
    assert _column(data, "verdict") == ["upstream", "ok"]
    fixed = data["patches"][0]
    assert fixed["applies"] is False and fixed["conflict_files"] == ["src/fakepkg/core.py"]
    assert fixed["red"]["status"] == "not-red" and fixed["red"]["passed"] == 2
    assert "fixed upstream differently" in fixed["notes"][0]
    assert data["patches"][1]["skipped_before"] == [names[0]]
    assert cases[(f"fake.{names[0]}", "applies")].find("skipped") is not None
    assert "fixed upstream differently" in summary and "| fixed upstream |" in summary
    assert "Needs a maintainer" not in summary


def test_conflict_names_files_and_hunks_and_the_rest_is_judged(fake, test_python):
    names = fake.build_series(GOOD, TRUNCATE, VERSION)
    # Upstream rewrote the buggy line, still wrong: the first patch conflicts and its tests still fail;
    # the second builds on the first and conflicts too; the third is independent.
    upstream = _upstream(fake, {"src/fakepkg/core.py": ("return a - b", "return -(b - a)")})

    proc, data, cases, summary = _verify(fake, test_python, f"path:{upstream}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["ok"] is False
    assert _column(data, "base_status") == ["conflict", "conflict", "clean"]
    assert _column(data, "verdict") == ["fail", "fail", "ok"]
    first = data["patches"][0]
    assert first["conflicts"] == [
        {
            "file": "src/fakepkg/core.py",
            "reason": "content differs",
            "hunks": [{"index": 1, "of": 1, "header": "@@ -3,7 +3,7 @@"}],
            "regions": [[6, 6]],
        }
    ]
    assert first["red"]["status"] == "red"
    assert _column(data, "skipped_before") == [[], [names[0]], names[:2]]
    assert "its tests still fail without it" in first["problems"][0]
    assert f"(tried without {names[0]})" in data["patches"][1]["problems"][0]
    assert data["patches"][2]["red_without_fix"] and data["patches"][2]["green_with_fix"]
    rows = table_rows(proc.stdout)
    assert [row["applies"] for row in rows] == ["CONFLICT", "CONFLICT", "yes"]
    assert rows[0]["patch"] == "fake 0001 core: make add() add" and rows[0]["verdict"] == "FAIL"
    assert "3-way merge conflict at base line 6;" in proc.stdout
    assert cases[(f"fake.{names[0]}", "applies")].find("failure") is not None
    assert cases[(f"fake.{names[2]}", "applies")].find("failure") is None
    assert "### Patch series verify: FAILED" in summary and "**Needs a maintainer:**" in summary


def test_checkout_on_a_moved_base_merges_too(fake):
    fake.build_series(GOOD, MUL_DEFAULT)
    upstream = _upstream(fake, {"src/fakepkg/core.py": ("    return a * b\n", "    return b * a\n")})
    dest = fake.root / "moved"
    fake.ok("checkout", "--dir", str(dest), "--base", f"git:{upstream.as_uri()}@main")
    assert git(dest, "rev-list", "--count", "series/base..HEAD") == "2"
    assert "def mul(a, b=1):\n" in (dest / "src/fakepkg/core.py").read_text(encoding="utf-8")
    assert "return b * a" in (dest / "src/fakepkg/core.py").read_text(encoding="utf-8")
