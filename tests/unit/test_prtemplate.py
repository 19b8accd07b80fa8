"""prtemplate.py: which template a target's pull request follows, and the branch name of each patch."""

from types import SimpleNamespace

import pytest
from seriestool import prtemplate

from .conftest import commit, make_patch


@pytest.mark.parametrize(
    ("url", "repo"),
    [
        ("https://github.com/huggingface/transformers.git", "huggingface/transformers"),
        ("https://github.com/huggingface/transformers", "huggingface/transformers"),
        ("https://github.com/huggingface/transformers/", "huggingface/transformers"),
        ("git@github.com:huggingface/accelerate.git", "huggingface/accelerate"),
        ("ssh://git@github.com/o.r-g/n_a.me.git", "o.r-g/n_a.me"),
        ("https://gitlab.com/huggingface/transformers.git", None),
        ("https://github.com/huggingface", None),
        ("http://github.com/huggingface/transformers.git", None),
        ("https://github.com/a/b/c", None),
    ],
)
def test_github_repo(url, repo):
    assert prtemplate.github_repo(url) == repo


def test_the_template_of_a_target():
    def target(url):
        return SimpleNamespace(git_url=url)

    transformers = prtemplate.for_target(target("https://github.com/huggingface/transformers.git"))
    assert transformers is prtemplate.TEMPLATES["huggingface/transformers"]
    assert transformers.policy is not None and transformers.reviewers == ("@SunMarc",)
    accelerate = prtemplate.for_target(target("git@github.com:huggingface/accelerate.git"))
    assert accelerate.repo == "huggingface/accelerate" and accelerate.policy is None
    assert prtemplate.for_target(target("https://example.invalid/x.git")) is prtemplate.GENERIC
    assert prtemplate.for_target(target("https://github.com/someone/else.git")) is prtemplate.GENERIC


@pytest.mark.parametrize(
    ("subject", "limit", "expected"),
    [
        ("Trainer: count only real optimizer steps", 60, "trainer-count-only-real-optimizer-steps"),
        ("Don't drop the model's state", 60, "dont-drop-the-models-state"),
        ("Don\u2019t stop", 60, "dont-stop"),
        ("a bb ccc", 4, "a-bb"),  # cut at a word boundary
        ("a bb ccc", 6, "a-bb"),
        ("a bb ccc", 8, "a-bb-ccc"),
        ("a bb ccc", 7, "a-bb"),
        ("abcdefgh ij", 4, "abcd"),  # the first word alone is too long: cut
        ("!!! ???", 60, "patch"),
        ("", 60, "patch"),
        ("UPPER case 2", 60, "upper-case-2"),
    ],
)
def test_slug(subject, limit, expected):
    assert prtemplate.slug(subject, limit) == expected


def test_slug_default_limit():
    long = " ".join(["word"] * 30)
    assert len(prtemplate.slug(long)) <= prtemplate.SLUG_MAX and prtemplate.slug(long).startswith("word-word")
    assert len(prtemplate.slug(long)) > prtemplate.SLUG_MAX - 5


def test_branch_names_are_unique_in_series_order():
    names = prtemplate.branch_names(
        [("0001-a.patch", "Fix it"), ("0002-b.patch", "Other"), ("0003-c.patch", "fix it"), ("0004-d.patch", "Fix IT")]
    )
    assert names == {
        "0001-a.patch": "trainer-series/fix-it",
        "0002-b.patch": "trainer-series/other",
        "0003-c.patch": "trainer-series/fix-it-2",
        "0004-d.patch": "trainer-series/fix-it-3",
    }
    assert prtemplate.branch_names([]) == {}


def test_branches_of_a_target(repo, tmp_path):
    commit(repo, {"a.py": "A = 1\n"})
    first = make_patch(repo, {"a.py": "A = 2\n"}, "Trainer: keep A", tmp_path / "p1")
    second = make_patch(repo, {"b.py": "B = 2\n"}, "Trainer: keep A", tmp_path / "p2")
    second = second.rename(first.parent / "0002-again.patch")
    target = SimpleNamespace(patches=[first.name, second.name], patch_path=lambda name: first.parent / name, fork={})
    assert prtemplate.branches_of(target) == {
        first.name: "trainer-series/trainer-keep-a",
        second.name: "trainer-series/trainer-keep-a-2",
    }
    # A fork-tier patch's branch is named as fork-only.
    target.fork = {second.name: "a new knob"}
    assert prtemplate.branches_of(target) == {
        first.name: "trainer-series/trainer-keep-a",
        second.name: "trainer-series/fork-only/trainer-keep-a",
    }


def test_fork_tier_branches_are_fork_only_and_never_blocked_by_an_upstream_one():
    pairs = [("0001-a.patch", "Fork only"), ("0002-b.patch", "Fix it"), ("0003-c.patch", "Fix it")]
    assert prtemplate.branch_names(pairs, fork={"0003-c.patch"}) == {
        # `trainer-series/fork-only` would keep git from making any `trainer-series/fork-only/...` branch
        "0001-a.patch": "trainer-series/fork-only-2",
        "0002-b.patch": "trainer-series/fix-it",
        "0003-c.patch": "trainer-series/fork-only/fix-it",
    }
