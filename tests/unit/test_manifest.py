"""manifest.py: every validation message, the target model, patch lookup and the in-place rewrite of a list."""

import re
import textwrap

import pytest
from seriestool import manifest
from seriestool.errors import SeriesError


SHA = "a" * 64
P1, P2, P3 = "0001-one.patch", "0002-two.patch", "0003-three.patch"
DS = "[targets.fake.downstream]\n"
UT = "tests/t/test_a.py"
UTC = "[targets.fake.upstream_tests_changed]\n"


def _table(name="fake", *, names=(P1, P2, P3), drop=(), **extra):
    """A `[targets.<name>]` table as TOML; `extra` values are TOML literals, `drop` leaves keys out."""
    keys = {
        "package": '"fakepkg"',
        "version": '"1.0"',
        "sha256": f'"{SHA}"',
        "git_url": '"https://example.invalid/fakepkg.git"',
        "tests": '"tests/regress/"',
        "patches": "[" + ", ".join(f'"{p}"' for p in names) + "]",
    }
    keys.update(extra)
    body = "".join(f"{key} = {value}\n" for key, value in keys.items() if key not in drop)
    return f"[targets.{name}]\n{body}"


def _load(tmp_path, text):
    path = tmp_path / "series.toml"
    path.write_text(text, encoding="utf-8")
    return manifest.load(path)


def _error(tmp_path, text):
    path = tmp_path / "series.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SeriesError) as info:
        manifest.load(path)
    return str(info.value).replace(str(path), "PATH")


def test_a_full_target_and_its_defaults(tmp_path):
    text = _table(
        "main",
        source_dir='"lib"',
        verify_with='["other"]',
        reviewers='["@alice", "@bob"]',
        upstream_tests='["tests/trainer/test_trainer.py"]',
    )
    text += f'\n[targets.main.depends]\n"{P3}" = ["{P1}", "{P2}"]\n\n' + _table("other", names=())
    loaded = _load(tmp_path, text)
    assert list(loaded.targets) == ["main", "other"]
    main = loaded.targets["main"]
    assert (main.name, main.package, main.version, main.sha256) == ("main", "fakepkg", "1.0", SHA)
    assert (main.git_url, main.tests, main.source_dir) == (
        "https://example.invalid/fakepkg.git",
        "tests/regress/",
        "lib",
    )
    assert main.patches == [P1, P2, P3]
    assert main.patch_dir == tmp_path / "main"
    assert main.patch_paths() == [tmp_path / "main" / p for p in (P1, P2, P3)]
    assert main.verify_with == ["other"] and main.reviewers == ["@alice", "@bob"]
    assert main.depends == {P3: [P1, P2]}
    assert main.upstream_tests == ["tests/trainer/test_trainer.py"]
    other = loaded.targets["other"]
    assert other.source_dir == "src" and other.patches == []
    assert (other.verify_with, other.reviewers, other.depends, other.upstream_tests) == ([], [], {}, [])


def test_values_are_read_as_text(tmp_path):
    target = _load(tmp_path, _table(version="2.5", tests='"tests"')).targets["fake"]
    assert target.version == "2.5" and target.tests == "tests"


BAD = {
    "not_toml": ("[targets.fake\n", r"manifest PATH is not valid TOML: .+"),
    "no_targets": ("schema = 1\n", r"manifest PATH has no \[targets.<name>\] tables"),
    "unknown_top_key": (
        'title = "x"\n',
        r"manifest PATH: the top level has an unknown key 'title' \(known: schema, targets\)",
    ),
    "empty_targets": ("[targets]\n", r"manifest PATH has no \[targets.<name>\] tables"),
    "targets_not_a_table": ("targets = 3\n", r"manifest PATH has no \[targets.<name>\] tables"),
    "lacks_keys": (_table(drop=("sha256", "tests")), r"manifest PATH: \[targets.fake\] lacks sha256, tests"),
    "lacks_patches": (_table(drop=("patches",)), r"manifest PATH: \[targets.fake\] lacks patches"),
    "sha_upper": (
        _table(sha256=f'"{"A" * 64}"'),
        r"manifest PATH: \[targets.fake\] sha256 is not 64 lowercase hex digits",
    ),
    "sha_short": (_table(sha256=f'"{"a" * 63}"'), r".*sha256 is not 64 lowercase hex digits"),
    "sha_long": (_table(sha256=f'"{"a" * 65}"'), r".*sha256 is not 64 lowercase hex digits"),
    "tests_absolute": (
        _table(tests='"/tests/"'),
        r"manifest PATH: \[targets.fake\] tests must be a relative path prefix",
    ),
    "tests_dotdot": (_table(tests='"tests/../../etc/"'), r".*tests must be a relative path prefix"),
    "tests_dotdot_first": (_table(tests='"../tests/"'), r".*tests must be a relative path prefix"),
    "tests_dotdot_only": (_table(tests='".."'), r".*tests must be a relative path prefix"),
    "patches_not_list": (
        _table(patches=f'"{P1}"'),
        r"manifest PATH: \[targets.fake\] patches must be a list of file names",
    ),
    "patches_not_text": (_table(patches="[1]"), r".*patches must be a list of file names"),
    "bad_patch_name": (
        _table(names=("1-one.patch",)),
        r"manifest PATH: \[targets.fake\] bad patch file name '1-one.patch'",
    ),
    "bad_patch_suffix": (_table(names=("0001-one.diff",)), r".*bad patch file name '0001-one.diff'"),
    "bad_patch_slash": (_table(names=("0001-a/b.patch",)), r".*bad patch file name '0001-a/b.patch'"),
    "patch_twice": (_table(names=(P1, P2, P1)), r"manifest PATH: \[targets.fake\] lists a patch twice"),
    "verify_with_itself": (
        _table(verify_with='["fake"]'),
        r"manifest PATH: \[targets.fake\] verify_with must list other targets",
    ),
    "verify_with_unknown": (_table(verify_with='["nope"]'), r".*verify_with must list other targets"),
    "verify_with_not_list": (_table(verify_with='"fake"'), r".*verify_with must list other targets"),
    "reviewers_no_at": (
        _table(reviewers='["alice"]'),
        r"manifest PATH: \[targets.fake\] reviewers must be a list of @handles",
    ),
    "reviewers_not_list": (_table(reviewers='"@alice"'), r".*reviewers must be a list of @handles"),
    "reviewers_not_text": (_table(reviewers="[1]"), r".*reviewers must be a list of @handles"),
    "upstream_tests_not_py": (
        _table(upstream_tests='["tests/data.json"]'),
        r"manifest PATH: \[targets.fake\] upstream_tests must list relative .py files \(tests/...\)",
    ),
    "upstream_tests_absolute": (
        _table(upstream_tests='["/tests/test_x.py"]'),
        r".*upstream_tests must list relative .py files \(tests/...\)",
    ),
    "upstream_tests_dotdot": (
        _table(upstream_tests='["tests/../x/test_x.py"]'),
        r".*upstream_tests must list relative .py files \(tests/...\)",
    ),
    "upstream_tests_not_text": (
        _table(upstream_tests="[1]"),
        r".*upstream_tests must list relative .py files \(tests/...\)",
    ),
    "upstream_tests_not_list": (
        _table(upstream_tests='"tests/test_x.py"'),
        r".*upstream_tests must list relative .py files \(tests/...\)",
    ),
    "depends_not_table": (
        _table(depends="[1]"),
        r"manifest PATH: \[targets.fake.depends\] must be a table of patch = \[earlier patches\]",
    ),
    "depends_unknown_patch": (
        _table() + f'[targets.fake.depends]\n"0009-x.patch" = ["{P1}"]\n',
        r"manifest PATH: \[targets.fake.depends\]: '0009-x.patch' is not in the patches list",
    ),
    "depends_not_list": (
        _table() + f'[targets.fake.depends]\n"{P2}" = "{P1}"\n',
        rf"manifest PATH: \[targets.fake.depends\]: '{P2}' must map to a list of patch file names",
    ),
    "depends_not_text": (
        _table() + f'[targets.fake.depends]\n"{P2}" = [1]\n',
        rf".*'{P2}' must map to a list of patch file names",
    ),
    "depends_needs_unknown": (
        _table() + f'[targets.fake.depends]\n"{P2}" = ["0009-x.patch"]\n',
        rf"manifest PATH: \[targets.fake.depends\]: '{P2}' needs '0009-x.patch', which is not in the patches list",
    ),
    "depends_needs_later": (
        _table() + f'[targets.fake.depends]\n"{P2}" = ["{P3}"]\n',
        rf"manifest PATH: \[targets.fake.depends\]: '{P2}' needs '{P3}', which does not come before it",
    ),
    "depends_needs_itself": (
        _table() + f'[targets.fake.depends]\n"{P2}" = ["{P2}"]\n',
        rf".*'{P2}' needs '{P2}', which does not come before it",
    ),
    "depends_twice": (
        _table() + f'[targets.fake.depends]\n"{P3}" = ["{P1}", "{P1}"]\n',
        rf"manifest PATH: \[targets.fake.depends\]: '{P3}' lists a patch twice",
    ),
    "lacks_package": (_table(drop=("package",)), r"manifest PATH: \[targets.fake\] lacks package"),
    "lacks_version": (_table(drop=("version",)), r"manifest PATH: \[targets.fake\] lacks version"),
    "lacks_git_url": (_table(drop=("git_url",)), r"manifest PATH: \[targets.fake\] lacks git_url"),
    "unknown_target_key": (
        _table(soruce_dir='"src"'),
        r"manifest PATH: \[targets.fake\] has an unknown key 'soruce_dir' \(did you mean 'source_dir'\?\)",
    ),
    "unknown_target_key_far_off": (
        _table(zzz="1"),
        r"manifest PATH: \[targets.fake\] has an unknown key 'zzz' \(known: package, version, .*, downstream, issues, "
        r"test_homes, shared_helpers, saved_state, releases, companions, backports, fork, cuts, repo_checks\)",
    ),
    "downstream_not_table": (
        _table(downstream="[1]"),
        r"manifest PATH: \[targets.fake.downstream\] must be a table of patch = \[\{ scenarios = \[...\], "
        r'reason = "..." \}, ...\]',
    ),
    "downstream_unknown_patch": (
        _table() + DS + '"0009-x.patch" = [{ scenarios = ["a"], reason = "r" }]\n',
        r"manifest PATH: \[targets.fake.downstream\]: '0009-x.patch' is not in the patches list",
    ),
    "downstream_not_list": (
        _table() + DS + f'"{P1}" = {{ scenarios = ["a"], reason = "r" }}\n',
        rf"manifest PATH: \[targets.fake.downstream\]: '{P1}' must map to a list of \{{ scenarios, reason \}} tables",
    ),
    "downstream_empty_list": (
        _table() + DS + f'"{P1}" = []\n',
        rf".*: '{P1}' must map to a list of \{{ scenarios, reason \}} tables",
    ),
    "downstream_entry_not_table": (
        _table() + DS + f'"{P1}" = ["a"]\n',
        rf"manifest PATH: \[targets.fake.downstream\]: '{P1}' lists 'a', not a \{{ scenarios, reason \}} table",
    ),
    "downstream_unknown_key": (
        _table() + DS + f'"{P1}" = [{{ scenarios = ["a"], reason = "r", why = "w", also = 1 }}]\n',
        rf"manifest PATH: \[targets.fake.downstream\]: '{P1}': unknown key\(s\) also, why "
        r"\(scenarios, reason, fields\)",
    ),
    "downstream_no_scenarios": (
        _table() + DS + f'"{P1}" = [{{ reason = "r" }}]\n',
        rf"manifest PATH: \[targets.fake.downstream\]: '{P1}': scenarios must be a pattern or a list of patterns",
    ),
    "downstream_empty_scenarios": (
        _table() + DS + f'"{P1}" = [{{ scenarios = [], reason = "r" }}]\n',
        r".*scenarios must be a pattern or a list of patterns",
    ),
    "downstream_empty_pattern": (
        _table() + DS + f'"{P1}" = [{{ scenarios = ["a", ""], reason = "r" }}]\n',
        r".*scenarios must be a pattern or a list of patterns",
    ),
    "downstream_pattern_not_text": (
        _table() + DS + f'"{P1}" = [{{ scenarios = ["a", 1], reason = "r" }}]\n',
        r".*scenarios must be a pattern or a list of patterns",
    ),
    "downstream_scenarios_number": (
        _table() + DS + f'"{P1}" = [{{ scenarios = 1, reason = "r" }}]\n',
        r".*scenarios must be a pattern or a list of patterns",
    ),
    "downstream_no_reason": (
        _table() + DS + f'"{P1}" = [{{ scenarios = "a" }}]\n',
        rf"manifest PATH: \[targets.fake.downstream\]: '{P1}': every declaration needs a reason of one line",
    ),
    "downstream_blank_reason": (
        _table() + DS + f'"{P1}" = [{{ scenarios = "a", reason = "  " }}]\n',
        r".*every declaration needs a reason of one line",
    ),
    "downstream_two_line_reason": (
        _table() + DS + f'"{P1}" = [{{ scenarios = "a", reason = "one\\ntwo" }}]\n',
        r".*every declaration needs a reason of one line",
    ),
    "downstream_reason_not_text": (
        _table() + DS + f'"{P1}" = [{{ scenarios = "a", reason = 1 }}]\n',
        r".*every declaration needs a reason of one line",
    ),
    "downstream_unknown_field": (
        _table() + DS + f'"{P1}" = [{{ scenarios = "a", reason = "r", fields = ["weights", "speed"] }}]\n',
        rf"manifest PATH: \[targets.fake.downstream\]: '{P1}': fields must list outcome fields "
        r"\(global_step, updates, scheduler_steps, events, weights, log_history, error, nonfinite_grads\)",
    ),
    "downstream_no_fields": (
        _table() + DS + f'"{P1}" = [{{ scenarios = "a", reason = "r", fields = [] }}]\n',
        r".*fields must list outcome fields .*",
    ),
    "upstream_tests_changed_not_table": (
        _table(upstream_tests=f'["{UT}"]', upstream_tests_changed="[1]"),
        r"manifest PATH: \[targets.fake.upstream_tests_changed\] must be a table of patch = "
        r'\[\{ test = "tests/...py::...", reason = "..." \}, ...\]',
    ),
    "upstream_tests_changed_unknown_patch": (
        _table(upstream_tests=f'["{UT}"]') + UTC + f'"0009-x.patch" = [{{ test = "{UT}::T::t", reason = "r" }}]\n',
        r"manifest PATH: \[targets.fake.upstream_tests_changed\]: '0009-x.patch' is not in the patches list",
    ),
    "upstream_tests_changed_not_list": (
        _table(upstream_tests=f'["{UT}"]') + UTC + f'"{P1}" = {{ test = "{UT}::T::t", reason = "r" }}\n',
        rf"manifest PATH: \[targets.fake.upstream_tests_changed\]: '{P1}' must map to a list of \{{ test, reason \}} "
        r"tables",
    ),
    "upstream_tests_changed_empty_list": (
        _table(upstream_tests=f'["{UT}"]') + UTC + f'"{P1}" = []\n',
        rf".*: '{P1}' must map to a list of \{{ test, reason \}} tables",
    ),
    "upstream_tests_changed_entry_not_table": (
        _table(upstream_tests=f'["{UT}"]') + UTC + f'"{P1}" = ["{UT}::T::t"]\n',
        rf"manifest PATH: \[targets.fake.upstream_tests_changed\]: '{P1}' lists '{UT}::T::t', not a "
        r"\{ test, reason \} table",
    ),
    "upstream_tests_changed_unknown_key": (
        _table(upstream_tests=f'["{UT}"]') + UTC + f'"{P1}" = [{{ test = "{UT}::T::t", reason = "r", why = "w" }}]\n',
        rf"manifest PATH: \[targets.fake.upstream_tests_changed\]: '{P1}': unknown key\(s\) why "
        r"\(test, reason, diff\)",
    ),
    "upstream_tests_changed_no_test": (
        _table(upstream_tests=f'["{UT}"]') + UTC + f'"{P1}" = [{{ reason = "r" }}]\n',
        rf"manifest PATH: \[targets.fake.upstream_tests_changed\]: '{P1}': test must be a pytest node id "
        r"\(tests/...py::Class::test_name\), not None",
    ),
    "upstream_tests_changed_test_not_text": (
        _table(upstream_tests=f'["{UT}"]') + UTC + f'"{P1}" = [{{ test = 1, reason = "r" }}]\n',
        r".*: test must be a pytest node id \(tests/...py::Class::test_name\), not 1",
    ),
    "upstream_tests_changed_file_only": (
        _table(upstream_tests=f'["{UT}"]') + UTC + f'"{P1}" = [{{ test = "{UT}", reason = "r" }}]\n',
        rf".*: test must be a pytest node id \(tests/...py::Class::test_name\), not '{UT}'",
    ),
    "upstream_tests_changed_empty_part": (
        _table(upstream_tests=f'["{UT}"]') + UTC + f'"{P1}" = [{{ test = "{UT}::T::", reason = "r" }}]\n',
        r".*: test must be a pytest node id .*",
    ),
    "upstream_tests_changed_spaced_part": (
        _table(upstream_tests=f'["{UT}"]') + UTC + f'"{P1}" = [{{ test = "{UT}:: T::t", reason = "r" }}]\n',
        r".*: test must be a pytest node id .*",
    ),
    "upstream_tests_changed_other_file": (
        _table(upstream_tests=f'["{UT}"]')
        + UTC
        + f'"{P1}" = [{{ test = "tests/t/test_b.py::T::t", reason = "r" }}]\n',
        rf"manifest PATH: \[targets.fake.upstream_tests_changed\]: '{P1}': tests/t/test_b.py::T::t is not in a file "
        rf"of \[targets.fake\] upstream_tests \({UT}\)",
    ),
    "upstream_tests_changed_no_upstream_tests": (
        _table() + UTC + f'"{P1}" = [{{ test = "{UT}::T::t", reason = "r" }}]\n',
        rf".*: '{P1}': {UT}::T::t is not in a file of \[targets.fake\] upstream_tests \(none\)",
    ),
    "upstream_tests_changed_twice": (
        _table(upstream_tests=f'["{UT}"]')
        + UTC
        + f'"{P1}" = [{{ test = "{UT}::T::t", reason = "r" }}]\n'
        + f'"{P2}" = [{{ test = "{UT}::T::t", reason = "r" }}]\n',
        rf"manifest PATH: \[targets.fake.upstream_tests_changed\]: '{P2}': {UT}::T::t is declared twice "
        rf"\(also by '{P1}'\)",
    ),
    "upstream_tests_changed_no_reason": (
        _table(upstream_tests=f'["{UT}"]') + UTC + f'"{P1}" = [{{ test = "{UT}::T::t" }}]\n',
        rf"manifest PATH: \[targets.fake.upstream_tests_changed\]: '{P1}': every declaration needs a reason of one "
        r"line",
    ),
    "upstream_tests_changed_blank_reason": (
        _table(upstream_tests=f'["{UT}"]') + UTC + f'"{P1}" = [{{ test = "{UT}::T::t", reason = " " }}]\n',
        r".*every declaration needs a reason of one line",
    ),
    "upstream_tests_changed_two_line_reason": (
        _table(upstream_tests=f'["{UT}"]') + UTC + f'"{P1}" = [{{ test = "{UT}::T::t", reason = "a\\nb" }}]\n',
        r".*every declaration needs a reason of one line",
    ),
    "upstream_tests_changed_reason_not_text": (
        _table(upstream_tests=f'["{UT}"]') + UTC + f'"{P1}" = [{{ test = "{UT}::T::t", reason = 1 }}]\n',
        r".*every declaration needs a reason of one line",
    ),
    "downstream_fields_not_list": (
        _table() + DS + f'"{P1}" = [{{ scenarios = "a", reason = "r", fields = "weights" }}]\n',
        r".*fields must list outcome fields .*",
    ),
}


def test_downstream_declarations_are_read(tmp_path):
    text = _table() + "[targets.fake.downstream]\n"
    text += f'"{P1}" = [{{ scenarios = "trl/*", reason = " why \t" }}, {{ scenarios = ["a", "b"], reason = "r", '
    text += 'fields = ["error"] }]\n'
    text += f'"{P3}" = [{{ scenarios = ["c"], reason = "r3" }}]\n'
    [target] = _load(tmp_path, text).targets.values()
    assert target.downstream == {
        P1: [
            {"scenarios": ["trl/*"], "reason": "why", "fields": list(manifest.DOWNSTREAM_DEFAULT_FIELDS)},
            {"scenarios": ["a", "b"], "reason": "r", "fields": ["error"]},
        ],
        P3: [{"scenarios": ["c"], "reason": "r3", "fields": list(manifest.DOWNSTREAM_DEFAULT_FIELDS)}],
    }
    # By default a declaration covers every field but a new error and non-finite gradients.
    assert manifest.DOWNSTREAM_DEFAULT_FIELDS == manifest.DOWNSTREAM_FIELDS[:6]
    assert "error" not in manifest.DOWNSTREAM_DEFAULT_FIELDS and "weights" in manifest.DOWNSTREAM_DEFAULT_FIELDS


def test_upstream_test_changes_are_read(tmp_path):
    text = _table(upstream_tests=f'["{UT}", "tests/t/test_b.py"]') + UTC
    text += f'"{P1}" = [{{ test = "{UT}::T::test_x", reason = " asserts the bug \t" }}, '
    text += '{ test = "tests/t/test_b.py::test_f[a b]", reason = "r2" }]\n'
    text += f'"{P3}" = [{{ test = "{UT}::T::test_y", reason = "r3" }}]\n'
    [target] = _load(tmp_path, text).targets.values()
    assert target.upstream_tests_changed == {
        P1: [
            {"test": f"{UT}::T::test_x", "reason": "asserts the bug"},
            {"test": "tests/t/test_b.py::test_f[a b]", "reason": "r2"},
        ],
        P3: [{"test": f"{UT}::T::test_y", "reason": "r3"}],
    }
    assert _load(tmp_path, _table()).targets["fake"].upstream_tests_changed == {}


@pytest.mark.parametrize("case", sorted(BAD))
def test_every_validation_message(tmp_path, case):
    text, expected = BAD[case]
    message = _error(tmp_path, text)
    assert re.fullmatch(expected, message), message


def test_a_missing_manifest(tmp_path):
    with pytest.raises(SeriesError, match=r"^manifest .*nope\.toml does not exist$"):
        manifest.load(tmp_path / "nope.toml")


def test_a_manifest_that_is_not_utf8(tmp_path):
    path = tmp_path / "series.toml"
    path.write_bytes(b'title = "\xff"\n')
    with pytest.raises(SeriesError, match=r"is not valid TOML: .*codec"):
        manifest.load(path)


def test_the_first_bad_target_is_named(tmp_path):
    text = _table("good") + "\n" + _table("bad", sha256='"x"')
    assert "[targets.bad] sha256" in _error(tmp_path, text)


def test_a_tests_prefix_may_hold_dots_in_names(tmp_path):
    target = _load(tmp_path, _table(tests='"tests/..hidden/"', upstream_tests='["tests/x..y/test_a.py"]'))
    assert target.targets["fake"].tests == "tests/..hidden/"


def test_target_lookup(tmp_path):
    loaded = _load(tmp_path, _table("a") + "\n" + _table("b"))
    assert loaded.target("b").name == "b"
    assert [t.name for t in loaded.select()] == ["a", "b"]
    assert [t.name for t in loaded.select("b")] == ["b"]
    assert loaded.default_target().name == "a" and loaded.default_target("b").name == "b"
    with pytest.raises(SeriesError, match=r"^unknown target 'c' \(targets in series\.toml: a, b\)$"):
        loaded.select("c")
    with pytest.raises(SeriesError, match=r"^unknown target 'c' \(targets in series\.toml: none\)$"):
        manifest.Manifest(path=tmp_path / "series.toml", targets={}).target("c")
    with pytest.raises(SeriesError, match=r"series\.toml declares no targets$"):
        manifest.Manifest(path=tmp_path / "series.toml", targets={}).default_target()


def test_depends_on_follows_the_chain_in_series_order(tmp_path):
    p4 = "0004-four.patch"
    text = _table(names=(P1, P2, P3, p4))
    text += f'[targets.fake.depends]\n"{p4}" = ["{P3}"]\n"{P3}" = ["{P1}"]\n"{P2}" = ["{P1}"]\n'
    target = _load(tmp_path, text).targets["fake"]
    assert target.depends_on(p4) == [P1, P3]
    assert target.depends_on(P2) == [P1]
    assert target.depends_on(P1) == []


def test_check_patch_files(tmp_path):
    target = _load(tmp_path, _table(names=(P1, P2))).targets["fake"]
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / P1).write_text("x", encoding="utf-8")
    with pytest.raises(SeriesError) as info:
        manifest.check_patch_files(target)
    assert str(info.value) == f"patch {P2} of fake is listed but {tmp_path / 'fake' / P2} is missing"
    (tmp_path / "fake" / P2).write_text("x", encoding="utf-8")
    manifest.check_patch_files(target)


def test_find_patch(tmp_path):
    target = _load(tmp_path, _table()).targets["fake"]
    assert manifest.find_patch(target, P2) == P2
    assert manifest.find_patch(target, "0002-two") == P2
    assert manifest.find_patch(target, "0003") == P3
    with pytest.raises(SeriesError) as info:
        manifest.find_patch(target, "0004")
    assert str(info.value) == f"unknown patch '0004' for fake (patches: {P1}, {P2}, {P3})"
    target.patches = []
    with pytest.raises(SeriesError, match=r"\(patches: none\)$"):
        manifest.find_patch(target, "0001")


MANIFEST = textwrap.dedent(
    f"""\
    # the series
    [targets.first]
    package = "fakepkg"   # a comment
    version = "1.0"
    sha256 = "{SHA}"
    git_url = "https://example.invalid/x.git"
    tests = "tests/"
    patches = [
        "{P1}",
    ]
    reviewers = ["@a"]

    [targets.first.depends]

    [targets.second]
    package = "other"
    version = "1.0"
    sha256 = "{SHA}"
    git_url = "https://example.invalid/y.git"
    tests = "tests/"
    patches = ["{P1}"]
    """
)


def test_rewrite_patch_list_changes_that_list_only(tmp_path):
    path = tmp_path / "series.toml"
    path.write_text(MANIFEST, encoding="utf-8")
    loaded = manifest.load(path)
    assert manifest.rewrite_patch_list(loaded, "first", [P1, P2]) is True
    expected = MANIFEST.replace(f'patches = [\n    "{P1}",\n]', f'patches = [\n    "{P1}",\n    "{P2}",\n]')
    assert path.read_text(encoding="utf-8") == expected
    assert loaded.targets["first"].patches == [P1, P2]
    assert manifest.load(path).targets["second"].patches == [P1]
    assert manifest.rewrite_patch_list(loaded, "first", [P1, P2]) is False
    assert manifest.rewrite_patch_list(loaded, "second", []) is True
    assert path.read_text(encoding="utf-8") == expected.replace(f'patches = ["{P1}"]', "patches = []")
    assert loaded.targets["second"].patches == []


def test_rewrite_patch_list_errors_leave_the_file_alone(tmp_path):
    path = tmp_path / "series.toml"
    path.write_text(MANIFEST, encoding="utf-8")
    loaded = manifest.load(path)
    with pytest.raises(SeriesError, match=r"series\.toml: cannot find \[targets\.third\]$"):
        manifest.rewrite_patch_list(loaded, "third", [P1])
    path.write_text(MANIFEST.replace(f'patches = ["{P1}"]', f'patches=\t["{P1}"]  '), encoding="utf-8")
    manifest.rewrite_patch_list(manifest.load(path), "second", [P2])
    assert f'patches = [\n    "{P2}",\n]  \n' in path.read_text(encoding="utf-8")
    # a list written as an inline table value of another key is not the patches list
    text = MANIFEST.replace(f'patches = ["{P1}"]\n', f'other = {{ patches = ["{P1}"] }}\n')
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SeriesError, match=r"cannot find the patches list of \[targets\.second\]$"):
        manifest.rewrite_patch_list(loaded, "second", [P1])
    assert path.read_text(encoding="utf-8") == text
    # nor is the list of the next target, wherever it is in the file
    text = MANIFEST.replace(f'patches = [\n    "{P1}",\n]\n', "") + "# " + "-" * 400 + "\n"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SeriesError, match=r"cannot find the patches list of \[targets\.first\]$"):
        manifest.rewrite_patch_list(loaded, "first", [P2])
    assert path.read_text(encoding="utf-8") == text


def test_rewrite_patch_list_with_a_bracket_in_a_comment_is_refused_not_half_written(tmp_path):
    path = tmp_path / "series.toml"
    text = MANIFEST.replace(f'    "{P1}",\n]', f'    "{P1}",  # see [1]\n]')
    path.write_text(text, encoding="utf-8")
    loaded = manifest.load(path)
    with pytest.raises(SeriesError, match=r"rewriting the patches list of first went wrong$"):
        manifest.rewrite_patch_list(loaded, "first", [P1, P2])
    assert path.read_text(encoding="utf-8") == text
    assert loaded.targets["first"].patches == [P1]


def test_the_submission_tables_issues_test_homes_saved_state_and_an_upstream_test_diff(tmp_path):
    (tmp_path / "issues").mkdir()
    (tmp_path / "issues" / "one.md").write_text("Title\n\nBody\n", encoding="utf-8")
    (tmp_path / "ut.diff").write_text("--- a/tests/t.py\n+++ b/tests/t.py\n", encoding="utf-8")
    text = _table("fake", upstream_tests='["tests/t.py"]')
    text += f'\n[targets.fake.issues]\n"{P1}" = {{ issue = "#12" }}\n"{P2}" = {{ text = "issues/one.md" }}\n'
    text += f'"{P3}" = {{ issue = "org/x#3", text = "issues/one.md" }}\n'
    text += '\n[targets.fake.test_homes]\n"tests/regress/test_a.py" = "tests/t.py"\n'
    text += '"tests/regress/test_a.py::B" = "u.py"\n'
    text += '\n[targets.fake.saved_state]\nfile = "src/s.py"\nclass = "State"\nunknown_field = "raises"\n'
    text += (
        '\n[targets.fake.shared_helpers]\nmodule = "tests/utils.py"\n"tests/regress/test_a.py" = { Line = "Model" }\n'
    )
    text += f'\n{UTC}"{P1}" = [{{ test = "tests/t.py::T::test_x", reason = "r", diff = "ut.diff" }}]\n'
    fake = _load(tmp_path, text).targets["fake"]
    assert fake.issues == {
        P1: {"issue": "#12"},
        P2: {"text": "issues/one.md"},
        P3: {"issue": "org/x#3", "text": "issues/one.md"},
    }
    assert fake.test_homes == {"tests/regress/test_a.py": "tests/t.py", "tests/regress/test_a.py::B": "u.py"}
    assert fake.saved_state == {"file": "src/s.py", "class": "State", "unknown_field": "raises"}
    assert fake.shared_helpers_module == "tests/utils.py"
    assert fake.shared_helpers == {"tests/regress/test_a.py": {"Line": "Model"}}
    assert fake.upstream_tests_changed[P1] == [{"test": "tests/t.py::T::test_x", "reason": "r", "diff": "ut.diff"}]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (f'[targets.fake.issues]\n"{P1}" = {{ issue = "12" }}\n', "issue must be #N or owner/name#N, not '12'"),
        (f'[targets.fake.issues]\n"{P1}" = {{ text = "nope.md" }}\n', "text 'nope.md' does not exist in"),
        (f'[targets.fake.issues]\n"{P1}" = {{ text = "../x.md" }}\n', "text must be a relative path below"),
        (f'[targets.fake.issues]\n"{P1}" = {{ url = "x" }}\n', "must map to { issue"),
        ('[targets.fake.issues]\n"0009-x.patch" = { issue = "#1" }\n', "'0009-x.patch' is not in the patches list"),
        ('[targets.fake.test_homes]\n"src/a.py" = "tests/t.py"\n', "must be a test file below tests/regress/"),
        ('[targets.fake.test_homes]\n"tests/regress/a.py" = 3\n', "must map to a relative .py file"),
        ('[targets.fake.saved_state]\nfile = "src/s.py"\n', "[targets.fake.saved_state] lacks class"),
        ('[targets.fake.shared_helpers]\n"tests/regress/a.py" = { A = "B" }\n', "shared_helpers] lacks module"),
        ('[targets.fake.shared_helpers]\nmodule = "/u.py"\n', "module must be a relative .py file"),
        ('[targets.fake.shared_helpers]\nmodule = "u.py"\n"src/a.py" = { A = "B" }\n', "must be a test file below"),
        ('[targets.fake.shared_helpers]\nmodule = "u.py"\n"tests/regress/a.py" = "B"\n', "must map to a table"),
        (
            '[targets.fake.shared_helpers]\nmodule = "u.py"\n"tests/regress/a.py" = { A = "b c" }\n',
            "two Python identif",
        ),
        ('[targets.fake.saved_state]\nfile = "a"\nclass = "B"\nklass = "C"\n', "unknown key 'klass'"),
        (f'{UTC}"{P1}" = [{{ test = "tests/t.py::T::t", reason = "r", diff = "no.diff" }}]\n', "diff 'no.diff' does"),
    ],
)
def test_bad_submission_tables_are_one_clear_error(tmp_path, table, message):
    text = _table("fake", upstream_tests='["tests/t.py"]') + "\n" + table
    assert message in _error(tmp_path, text)


FORK = "[targets.fake.fork]\n"


def _tiered(tmp_path, fork, *, issues=(P2, P3), depends=""):
    """A target whose patches P2 and P3 have issue texts (`issues`), with `fork` as its [targets.fake.fork] body."""
    (tmp_path / "issues").mkdir(exist_ok=True)
    (tmp_path / "issues" / "one.md").write_text("Title\n\nBody\n", encoding="utf-8")
    text = _table("fake") + "\n[targets.fake.issues]\n"
    text += "".join(f'"{patch}" = {{ text = "issues/one.md" }}\n' for patch in issues)
    return text + (f"\n[targets.fake.depends]\n{depends}" if depends else "") + f"\n{FORK}{fork}"


def test_the_fork_tier_is_read_and_every_other_patch_is_upstream_tier(tmp_path):
    text = _tiered(tmp_path, f'"{P2}" = " a new public knob \t"\n', depends=f'"{P2}" = ["{P1}"]\n')
    fake = _load(tmp_path, text).targets["fake"]
    assert fake.fork == {P2: "a new public knob"}
    assert [fake.tier(p) for p in (P1, P2, P3)] == ["upstream", "fork", "upstream"]


def test_tiers_of_a_valid_manifest(tmp_path):
    text = _tiered(tmp_path, f'"{P2}" = "why"\n"{P3}" = "why too"\n', depends=f'"{P3}" = ["{P1}", "{P2}"]\n')
    fake = _load(tmp_path, text).targets["fake"]
    assert [fake.tier(p) for p in (P1, P2, P3)] == [manifest.UPSTREAM_TIER, manifest.FORK_TIER, manifest.FORK_TIER]
    assert fake.upstream_tier() == [P1]
    assert _load(tmp_path, _table()).targets["fake"].fork == {}
    assert _load(tmp_path, _table()).targets["fake"].upstream_tier() == [P1, P2, P3]


@pytest.mark.parametrize(
    ("fork", "options", "message"),
    [
        ('"0009-x.patch" = "why"\n', {}, r"\[targets.fake.fork\]: '0009-x.patch' is not in the patches list"),
        (f'"{P2}" = ""\n', {}, rf"\[targets.fake.fork\]: '{P2}': the reason must be one line of text"),
        (f'"{P2}" = "two\\nlines"\n', {}, rf"\[targets.fake.fork\]: '{P2}': the reason must be one line of text"),
        (f'"{P2}" = ["why"]\n', {}, rf"\[targets.fake.fork\]: '{P2}': the reason must be one line of text"),
        (
            f'"{P1}" = "why"\n',
            {},
            rf"\[targets.fake.fork\]: '{P1}' has no issue text in \[targets.fake.issues\]: a fork-tier patch is "
            r"proposed upstream as an issue first \(give it \{ text = \"issues/<topic>.md\" \}\)",
        ),
        (
            f'"{P2}" = "why"\n',
            {"depends": f'"{P3}" = ["{P1}", "{P2}"]\n'},
            rf"\[targets.fake.depends\]: '{P3}' is upstream tier but needs '{P2}', which is fork tier "
            r"\(\[targets.fake.fork\]\): an upstream-tier patch depends on upstream-tier patches only",
        ),
    ],
    ids=["unknown-patch", "empty-reason", "two-lines", "not-text", "no-issue-text", "upstream-needs-fork"],
)
def test_bad_tiers_are_one_clear_error(tmp_path, fork, options, message):
    error = _error(tmp_path, _tiered(tmp_path, fork, **options))
    assert "\n" not in error and re.fullmatch(r"manifest PATH: " + message, error), error


def test_the_fork_table_must_be_a_table(tmp_path):
    error = _error(tmp_path, _table(fork='"0002-two.patch"'))
    assert (
        error == 'manifest PATH: [targets.fake.fork] must be a table of patch = "why it is carried for forks, not '
        'submitted as a PR"'
    )


def test_an_issue_number_alone_is_not_the_text_of_a_fork_tier_patch(tmp_path):
    text = _table("fake") + f'\n[targets.fake.issues]\n"{P2}" = {{ issue = "#4" }}\n\n{FORK}"{P2}" = "why"\n'
    assert "has no issue text in [targets.fake.issues]" in _error(tmp_path, text)


RC = "[targets.fake.repo_checks]\n"


def test_repo_checks_are_read(tmp_path):
    text = _table("fake") + f'\n{RC}"{P2}" = [\n'
    text += '    { make_target = "check-repo", command = " python utils/check_x.py" },\n'
    text += '    { make_target = "check-repo", command = "python utils/check_y.py --strict" },\n]\n'
    fake = _load(tmp_path, text).targets["fake"]
    assert fake.repo_checks == {
        P2: [
            {"make_target": "check-repo", "command": "python utils/check_x.py"},
            {"make_target": "check-repo", "command": "python utils/check_y.py --strict"},
        ]
    }
    assert _load(tmp_path, _table("fake")).targets["fake"].repo_checks == {}


SHAPE = '{ make_target = "check-repo", command = "python utils/check_x.py" }'


@pytest.mark.parametrize(
    "entry",
    [
        '{ make_target = "check-repo" }',  # no command
        '{ command = "python utils/check_x.py" }',  # no target
        '{ make_target = "check-repo", command = "python utils/check_x.py", prefix = "-" }',  # unknown key
        '{ make_target = "check repo", command = "python utils/check_x.py" }',  # not a make target
        '{ make_target = "check-repo:", command = "python utils/check_x.py" }',
        '{ make_target = "check-repo", command = "" }',
        '{ make_target = "check-repo", command = "python a.py\\npython b.py" }',  # two lines
        '{ make_target = "check-repo", command = "-python utils/check_x.py" }',  # make's prefix: the neighbours'
        '{ make_target = "check-repo", command = 3 }',
        '"python utils/check_x.py"',  # not a table
    ],
)
def test_a_malformed_repo_check_is_one_clear_error(tmp_path, entry):
    message = _error(tmp_path, _table("fake") + f'\n{RC}"{P1}" = [{entry}]\n')
    assert message.startswith(f"manifest PATH: [targets.fake.repo_checks]: '{P1}': each entry is {SHAPE} ("), message
    assert message.count("\n") == 0 and "not " in message


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (f'{RC}"0009-x.patch" = [{SHAPE}]\n', "[targets.fake.repo_checks]: '0009-x.patch' is not in the patches list"),
        (f'{RC}"{P1}" = []\n', f"'{P1}' must map to a list of {SHAPE} tables"),
        (f'{RC}"{P1}" = {SHAPE}\n', f"'{P1}' must map to a list of {SHAPE} tables"),
        (f'{RC}"{P1}" = [{SHAPE}, {SHAPE}]\n', "'python utils/check_x.py' is declared twice for check-repo"),
    ],
)
def test_bad_repo_checks_tables_are_one_clear_error(tmp_path, table, message):
    assert message in _error(tmp_path, _table("fake") + "\n" + table)
    assert "[targets.fake.repo_checks] must be a table of" in _error(tmp_path, _table("fake", repo_checks="3"))
