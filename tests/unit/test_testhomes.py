"""testhomes.py: a patch's new test file moved into its upstream home: its test classes appended, the helpers and
imports the home lacks (deduplicated by name, merged into the home's own import statements and guarded blocks),
a new home created whole, the diff `git apply` takes, and bad input."""

import ast
import textwrap

import pytest
from parameterized import parameterized
from seriestool import testhomes
from seriestool.errors import SeriesError
from seriestool.manifest import Target


HOME = textwrap.dedent(
    '''\
    # Copyright: upstream's header
    """Upstream's topic file."""

    import os

    from transformers import Trainer, TrainingArguments
    from transformers.testing_utils import TestCasePlus


    if is_torch_available():
        import torch


    class RegressionModel:
        """upstream's own"""


    class UpstreamTest(TestCasePlus):
        def test_upstream(self):
            pass
    '''
)

NEW = textwrap.dedent(
    '''\
    # Copyright: the patch's header
    """The patch's new test file."""

    import json
    import os

    from parameterized import parameterized

    from transformers import Trainer, TrainerCallback
    from transformers.testing_utils import TestCasePlus, require_torch


    if is_torch_available():
        import torch
        from torch import nn

    STEPS = 3


    class RegressionModel:
        """the patch's own"""


    def make_rows():
        return [json.dumps({"a": os.sep})]


    # a comment that goes with the class
    @require_torch
    class MovedTest(TestCasePlus):
        @parameterized.expand([(1,), (2,)])
        def test_moved(self, n):
            self.assertEqual(len(make_rows()), 1)


    class OtherMovedTest(TestCasePlus):
        def test_other(self):
            self.assertEqual(STEPS, 3)
    '''
)


def top_names(text):
    return [n.name for n in ast.parse(text).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))]


def test_classes_and_helpers_appended_imports_merged():
    merged, moved = testhomes.move(HOME, NEW, home="tests/t/test_home.py", source="tests/t/test_new.py")
    ast.parse(merged)  # still Python
    assert merged.startswith('# Copyright: upstream\'s header\n"""Upstream\'s topic file."""\n\nimport json\n')
    assert (
        "\n\n\nclass UpstreamTest(TestCasePlus):\n    def test_upstream(self):\n        pass\n\n\n@require"
        not in merged
    )
    assert moved.classes == ["MovedTest", "OtherMovedTest"]
    # the home's RegressionModel is another class: the moved one is renamed, in its uses too
    assert moved.renamed == {"RegressionModel": "RegressionModelNew"} and moved.kept == []
    assert moved.helpers == ["STEPS", "RegressionModelNew", "make_rows"]
    assert top_names(merged) == [
        "RegressionModel",
        "UpstreamTest",
        "RegressionModelNew",
        "make_rows",
        "MovedTest",
        "OtherMovedTest",
    ]
    assert 'class RegressionModelNew:\n    """the patch\'s own"""' in merged
    # imports the home has are skipped; new names join the home's statement of the same module
    assert merged.count("import os\n") == 1 and "import json\nimport os\n" in merged
    assert "from transformers import Trainer, TrainerCallback, TrainingArguments\n" in merged
    assert "from transformers.testing_utils import TestCasePlus, require_torch\n" in merged
    # a new third-party section between the standard library and transformers
    assert "import os\n\nfrom parameterized import parameterized\n\nfrom transformers import" in merged
    # the guarded block gains only what it lacks
    assert "if is_torch_available():\n    import torch\n    from torch import nn\n" in merged
    assert merged.count("import torch") == 1
    # the decorator and the comment above a class go with it; the new file's header and docstring do not
    assert "# a comment that goes with the class\n@require_torch\nclass MovedTest" in merged
    assert "the patch's header" not in merged and "The patch's new test file" not in merged
    assert merged.endswith("self.assertEqual(STEPS, 3)\n")


def test_only_the_classes_asked_for():
    merged, moved = testhomes.move(HOME, NEW, home="h.py", source="n.py", classes=["OtherMovedTest"])
    assert moved.classes == ["OtherMovedTest"] and "class MovedTest" not in merged


@parameterized.expand(
    [
        ("class already upstream", HOME + "\n\nclass MovedTest:\n    pass\n", None, "already defines MovedTest"),
        ("unknown class", HOME, ["NoSuchTest"], "no test class NoSuchTest"),
        ("not python", "def (:\n", None, "not Python"),
    ]
)
def test_bad_input(_, home, classes, message):
    with pytest.raises(SeriesError, match=message):
        testhomes.move(home, NEW, home="h.py", source="n.py", classes=classes)


def test_new_home_keeps_the_file_s_license_and_docstring():
    """Before: a new home file (no such file upstream) started at its imports, without the license header upstream
    requires of every file (a cold review's nit). Now it keeps the head of the file its tests come from."""
    merged, moved = testhomes.move(None, NEW, home="tests/new/test_x.py", source="tests/t/test_new.py")
    assert moved.new_file and moved.kept == []
    assert merged.startswith('# Copyright: the patch\'s header\n"""The patch\'s new test file."""\n')
    assert "import json\nimport os\n\nfrom parameterized import parameterized\n" in merged
    assert top_names(merged) == ["RegressionModel", "make_rows", "MovedTest", "OtherMovedTest"]
    diff = testhomes.unified_diff("tests/new/test_x.py", None, merged)
    assert diff.startswith("diff --git a/tests/new/test_x.py b/tests/new/test_x.py\nnew file mode 100644\n")
    assert "--- /dev/null\n+++ b/tests/new/test_x.py\n@@ -0,0 +1," in diff


def test_main_block_kept_once():
    new = NEW + '\n\nif __name__ == "__main__":\n    make_rows()\n'
    merged, moved = testhomes.move(None, new, home="h.py", source="n.py")
    assert merged.rstrip().endswith("make_rows()") and "__main__" in moved.helpers
    again, moved = testhomes.move(
        merged,
        new.replace("OtherMovedTest", "ThirdTest").replace("class MovedTest", "class X"),
        home="h.py",
        source="n.py",
    )
    assert again.count("__main__") == 1  # the same block
    # the same helpers are not repeated
    assert moved.kept == ["STEPS", "RegressionModel", "make_rows"] and moved.helpers == []
    # another block: the home's would run for the moved tests too (their 2-process test ran the other scenario)
    other = new.replace("    make_rows()\n", "    print(make_rows())\n").replace("class MovedTest", "class Y")
    with pytest.raises(SeriesError, match="give n.py a home of its own"):
        testhomes.move(merged, other.replace("OtherMovedTest", "Z"), home="h.py", source="n.py")
    # a helper the block runs that the home defines differently is renamed, so the blocks differ too
    renamed = new.replace('return [json.dumps({"a": os.sep})]', "return []").replace("class MovedTest", "class W")
    with pytest.raises(SeriesError, match="give n.py a home of its own"):
        testhomes.move(merged, renamed.replace("OtherMovedTest", "V"), home="h.py", source="n.py")


def test_a_helper_defined_differently_is_renamed_where_it_is_used():
    home = (
        "def run_scenario(a):\n    return a\n\n\nclass UpstreamTest:\n    def test_u(self):\n        run_scenario(1)\n"
    )
    new = textwrap.dedent(
        """\
        def run_scenario(a, b):
            return a + b


        class LoggedTest:
            run = staticmethod(run_scenario)

            def test_logged(self):
                assert run_scenario(1, 2) == 3 and self.run_scenario is None
        """
    )
    merged, moved = testhomes.move(home, new, home="h.py", source="tests/trainer/test_trainer_logged_loss.py")
    assert moved.renamed == {"run_scenario": "run_scenario_logged_loss"}
    assert "def run_scenario_logged_loss(a, b):" in merged and "run = staticmethod(run_scenario_logged_loss)" in merged
    assert "assert run_scenario_logged_loss(1, 2) == 3 and self.run_scenario is None" in merged  # not an attribute
    assert "        run_scenario(1)\n" in merged  # upstream's own use


def test_the_diff_applies_with_git(repo):
    (repo.path / "tests").mkdir()
    (repo.path / "tests" / "test_home.py").write_text(HOME, encoding="utf-8")
    repo.run("add", "-A")
    repo.run("commit", "-q", "-m", "upstream")
    merged, _ = testhomes.move(HOME, NEW, home="tests/test_home.py", source="n.py")
    diff = testhomes.unified_diff("tests/test_home.py", HOME, merged)
    diff += testhomes.unified_diff("tests/new/test_new.py", None, NEW)
    (repo.path.parent / "x.diff").write_text(diff, encoding="utf-8")
    repo.run("apply", "--check", str(repo.path.parent / "x.diff"))
    repo.run("apply", str(repo.path.parent / "x.diff"))
    assert (repo.path / "tests" / "test_home.py").read_text(encoding="utf-8") == merged
    assert (repo.path / "tests" / "new" / "test_new.py").read_text(encoding="utf-8") == NEW
    assert testhomes.unified_diff("tests/test_home.py", HOME, HOME) == ""


def test_test_functions_move_too():
    new = "from fakepkg.core import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    home = "import os\n\n\ndef test_upstream():\n    assert os.sep\n"
    merged, moved = testhomes.move(home, new, home="tests/test_core.py", source="tests/regress/test_add.py")
    assert moved.classes == ["test_add"]
    assert merged == "import os\n\nfrom fakepkg.core import add\n\n\ndef test_upstream():\n    assert os.sep\n\n\n" + (
        "def test_add():\n    assert add(2, 3) == 5\n"
    )


@parameterized.expand(
    [
        ("method", "tests.trainer.test_x.Klass::test_a", "Klass::test_a"),
        ("function", "tests.trainer.test_x::test_a", "test_a"),
        ("no package", "test_x.Klass::test_a", "Klass::test_a"),
        ("another file", "tests.other.Klass::test_a", "tests.other.Klass::test_a"),
    ]
)
def test_local_ids(_, junit_id, local):
    assert testhomes._local(junit_id, ["tests/trainer/test_x.py"]) == local


def test_local_ids_below_a_rootdir_above_the_tree():
    junit_id = "pytest-of-root.pytest-1.work.homes.fake.tests.regress.test_add::test_add"
    assert testhomes._local(junit_id, ["tests/regress/test_add.py"]) == "test_add"


def test_a_guarded_block_of_helpers_loses_the_imports_the_home_has():
    new = textwrap.dedent(
        """\
        from transformers import is_torch_available


        if is_torch_available():
            import torch
            from torch import nn, optim

            class Model(nn.Module):
                pass


        class ModelTest:
            def test_model(self):
                assert Model
        """
    )
    merged, moved = testhomes.move(HOME, new, home="h.py", source="n.py")
    assert "if is_torch_available():\n    from torch import nn, optim\n\n    class Model(nn.Module):\n" in merged
    assert merged.count("import torch\n") == 1 and moved.helpers == ["Model"]


def test_an_import_the_home_binds_otherwise_is_named():
    home = "from datasets import Dataset\n\n\nclass UpstreamTest:\n    def test_u(self):\n        pass\n"
    new = "import os\n\nfrom torch.utils.data import Dataset\n\n\nclass T:\n    def test_t(self):\n        Dataset\n"
    merged, moved = testhomes.move(home, new, home="h.py", source="n.py")
    assert moved.shadowed == ["Dataset"] and "torch.utils.data" not in merged
    merged, moved = testhomes.move(home, new.replace("torch.utils.data", "datasets"), home="h.py", source="n.py")
    assert moved.shadowed == []
    merged, moved = testhomes.move(
        home, new.replace("torch.utils.data", "datasets.arrow_dataset"), home="h", source="n"
    )
    assert moved.shadowed == []  # a package's re-export of its module's name


def test_what_is_appended_is_formatted_and_the_home_left_alone(tmp_path):
    pytest.importorskip("ruff", reason="needs ruff: run it with `python3 scripts/series.py selftest`")
    import sys

    home = "x = [1,2]\n"  # upstream's, not formatted: not the diff's to change
    long_call = "make(" + ", ".join(f"argument_number_{i}" for i in range(12)) + ")"
    new = f"def helper():\n    return {long_call}\n\n\nclass T:\n    def test_t(self):\n        helper()\n"
    merged, moved = testhomes.move(home, new, home="h.py", source="n.py")
    found = testhomes.Plan(patch="0001-x.patch", moves=[moved], before={"h.py": home}, after={"h.py": merged})
    found.appended_from["h.py"] = moved.first_line
    assert testhomes.format_moved(found, [sys.executable, "-m", "ruff"], tmp_path) == []
    assert found.after["h.py"].startswith(
        "x = [1,2]\n\n\ndef helper():\n    return make(\n        argument_number_0,\n"
    )


def test_a_guard_the_home_does_not_need_goes():
    """A home that imports torch unguarded gets the moved helpers at module level, not in an `if
    is_torch_available():` block (reviewers ask to drop such a guard in a file that imports torch)."""
    home = "import torch\n\n\nclass U:\n    def test_u(self):\n        torch\n"
    new = (
        "from transformers import is_torch_available\n\n\nif is_torch_available():\n    import torch\n"
        "    from torch import nn\n\n    class Model(nn.Module):\n        pass\n\n\n"
        "class T:\n    def test_t(self):\n        Model, torch\n"
    )
    merged, _ = testhomes.move(home, new, home="h.py", source="n.py")
    assert "if is_torch_available():" not in merged and "\nclass Model(nn.Module):\n" in merged
    assert merged.count("import torch\n") == 1 and "from torch import nn\n" in merged
    guarded, _ = testhomes.move(home.replace("import torch", "import os"), new, home="h.py", source="n.py")
    assert "if is_torch_available():" in guarded  # a home without torch keeps the guard


def test_an_import_only_the_dropped_guard_used_is_removed(tmp_path):
    """The moved tests' `is_torch_available` served only their `if is_torch_available():` block, which the home (that
    imports torch) does not take: the import it brought goes, so that the branch passes `ruff check` (F401)."""
    pytest.importorskip("ruff", reason="needs ruff: run it with `python3 scripts/series.py selftest`")
    import sys

    home = "import torch\n\nfrom transformers import Trainer\n\n\nclass U:\n    def test_u(self):\n        Trainer\n"
    new = (
        "from transformers import Trainer, is_torch_available\n\n\nif is_torch_available():\n    import torch\n\n\n"
        "class T:\n    def test_t(self):\n        Trainer, torch\n"
    )
    merged, moved = testhomes.move(home, new, home="h.py", source="n.py")
    found = testhomes.Plan(patch="0001-x.patch", moves=[moved], before={"h.py": home}, after={"h.py": merged})
    found.appended_from["h.py"] = moved.first_line
    assert testhomes.format_moved(found, [sys.executable, "-m", "ruff"], tmp_path) == []
    assert "is_torch_available" not in found.after["h.py"] and "class T:" in found.after["h.py"]


def test_the_imports_the_moved_tests_bring_are_sorted(tmp_path):
    """A home the branch makes new (or one the moved tests add imports to) passes `ruff check`'s isort rule (I001)."""
    pytest.importorskip("ruff", reason="needs ruff: run it with `python3 scripts/series.py selftest`")
    import sys

    text = "import sys\nimport os\n\nx = os, sys\n"
    found = testhomes.Plan(patch="0001-x.patch", moves=[], before={"h.py": ""}, after={"h.py": text})
    found.appended_from["h.py"] = 1
    assert testhomes.format_moved(found, [sys.executable, "-m", "ruff"], tmp_path) == []
    assert found.after["h.py"].startswith("import os\nimport sys\n")


@parameterized.expand(
    [
        ("no imports on either side", "x = 1\n", "def test_a():\n    pass\n", "x = 1\n\n\ndef test_a():\n    pass\n"),
        ("a docstring", '"""Doc."""\n\nx = 1\n', "import os\n\n\ndef test_a():\n    assert os\n", None),
    ]
)
def test_homes_without_imports(_, home, new, expected):
    merged, _ = testhomes.move(home, new, home="h.py", source="n.py")
    ast.parse(merged)
    if expected is not None:
        assert merged == expected
    else:
        assert merged.startswith('"""Doc."""\n\nimport os\n\nx = 1\n\n\ndef test_a():')


def test_moved_code_goes_before_the_home_s_main_block():
    home = 'import sys\n\n\ndef run(*args):\n    pass\n\n\nif __name__ == "__main__":\n    run(*sys.argv[1:])\n'
    new = "def helper():\n    pass\n\n\nclass T:\n    def test_t(self):\n        helper()\n"
    merged, moved = testhomes.move(home, new, home="h.py", source="n.py")
    assert merged.endswith('    helper()\n\n\nif __name__ == "__main__":\n    run(*sys.argv[1:])\n')
    assert merged.splitlines()[moved.first_line - 1] == "def helper():"


SHARED_NEW = textwrap.dedent(
    '''\
    """The patch's new test file."""

    from transformers import Trainer, is_torch_available
    from transformers.testing_utils import TestCasePlus


    if is_torch_available():
        import torch
        from torch import nn

        # a line model of its own
        class LineModel(nn.Module):
            pass

        class Samples(torch.utils.data.Dataset):
            pass


    def make_trainer():
        return Trainer(model=LineModel(), train_dataset=Samples())


    class ResumeTest(TestCasePlus):
        def test_resume(self):
            self.assertIsInstance(make_trainer().model, LineModel)
    '''
)
SHARED_HOME = textwrap.dedent(
    """\
    from transformers import Trainer, is_torch_available
    from transformers.testing_utils import TestCasePlus

    from .trainer_test_utils import (
        RegressionDataset,
        get_regression_trainer,
    )


    class UpstreamTest(TestCasePlus):
        def test_upstream(self):
            get_regression_trainer(RegressionDataset())
    """
)
MODULE = "tests/trainer/trainer_test_utils.py"


def test_a_declared_shared_helper_replaces_the_local_one():
    merged, moved = testhomes.move(
        SHARED_HOME,
        SHARED_NEW,
        home="tests/trainer/test_trainer_checkpointing.py",
        source="tests/trainer/test_trainer_resume.py",
        shared={"LineModel": "RegressionModel"},
        shared_module=MODULE,
    )
    ast.parse(merged)
    assert moved.shared == {"LineModel": "RegressionModel"}
    # before: LineModel moved with the tests. Now it is dropped (its comment too), its uses renamed, and upstream's
    # RegressionModel joins the home's import from the shared module
    assert "LineModel" not in merged and "a line model of its own" not in merged
    assert "from .trainer_test_utils import RegressionDataset, RegressionModel, get_regression_trainer\n" in merged
    assert "return Trainer(model=RegressionModel(), train_dataset=Samples())" in merged
    assert "self.assertIsInstance(make_trainer().model, RegressionModel)" in merged
    assert "    class Samples(torch.utils.data.Dataset):\n        pass\n" in merged
    assert top_names(merged) == ["UpstreamTest", "make_trainer", "ResumeTest"]
    assert moved.dropped == ["nn"]  # `from torch import nn` only served LineModel


def test_helpers_only_the_replaced_ones_used_are_dropped_with_them():
    new = textwrap.dedent(
        """\
        import torch
        from torch.utils.data import Dataset, IterableDataset


        def sample(i):
            return {"input_x": torch.tensor([float(i)])}


        class Samples(Dataset):
            def __getitem__(self, i):
                return sample(i)


        class Stream(IterableDataset):
            def __iter__(self):
                return (sample(i) for i in range(8))


        class ResumeTest:
            def test_resume(self):
                assert Samples() and Stream() and torch
        """
    )
    merged, moved = testhomes.move(
        SHARED_HOME,
        new,
        home="tests/trainer/test_x.py",
        source="n.py",
        shared={"Samples": "RegressionDataset", "Stream": "SampleIterableDataset"},
        shared_module=MODULE,
    )
    assert moved.dropped == ["Dataset", "IterableDataset", "sample"]
    assert "torch.utils.data" not in merged and "def sample" not in merged and "import torch\n" in merged
    assert "assert RegressionDataset() and SampleIterableDataset() and torch" in merged
    assert "RegressionDataset,\n    SampleIterableDataset,\n    get_regression_trainer" in merged or (
        "import RegressionDataset, SampleIterableDataset, get_regression_trainer\n" in merged
    )


def test_a_shared_helper_is_imported_where_the_home_imports_the_module():
    guarded = textwrap.dedent(
        """\
        from transformers import is_torch_available


        if is_torch_available():
            import torch

            from .trainer_test_utils import RegressionDataset
        """
    )
    merged, _ = testhomes.move(
        guarded,
        SHARED_NEW,
        home="tests/trainer/test_trainer_callback.py",
        source="n.py",
        shared={"LineModel": "RegressionModel", "Samples": "RegressionDataset"},
        shared_module=MODULE,
    )
    # into the home's guarded block, the way it imports from the module; a name it already imports is not repeated
    assert "    from .trainer_test_utils import RegressionDataset, RegressionModel\n" in merged
    assert merged.count("RegressionDataset") == 2 and "class Samples" not in merged
    # the imports only the dropped helpers used go with them
    assert "from torch import nn" not in merged
    # a home that imports nothing from the module gets a top-level relative import (one folder down: `..`)
    merged, _ = testhomes.move(
        None,
        SHARED_NEW,
        home="tests/trainer/distributed/test_new.py",
        source="n.py",
        shared={"LineModel": "RegressionModel"},
        shared_module=MODULE,
    )
    assert "\nfrom ..trainer_test_utils import RegressionModel\n" in merged and "LineModel" not in merged


@parameterized.expand(
    [
        ("tests/trainer/test_x.py", ".trainer_test_utils"),
        ("tests/trainer/distributed/test_x.py", "..trainer_test_utils"),
        ("tests/repo_utils/test_x.py", "..trainer.trainer_test_utils"),
    ]
)
def test_relative_module(home, expected):
    assert testhomes.relative_module(home, MODULE) == expected


@parameterized.expand(
    [
        ("not defined", SHARED_HOME, {"NoSuch": "RegressionModel"}, "n.py defines no NoSuch"),
        ("bound in the file", SHARED_HOME, {"LineModel": "Samples"}, "n.py binds Samples itself"),
        (
            "the home's own",
            SHARED_HOME + "\n\nclass RegressionModel:\n    pass\n",
            {"LineModel": "RegressionModel"},
            "h.py binds RegressionModel to something else",
        ),
    ]
)
def test_bad_shared_declarations(_, home, shared, message):
    with pytest.raises(SeriesError, match=message):
        testhomes.move(home, SHARED_NEW, home="h.py", source="n.py", shared=shared, shared_module=MODULE)


def _new_file_patch(path, text):
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        "From 0 Mon Sep 17 00:00:00 2001\nFrom: A <a@example.com>\nSubject: [PATCH] x\n\nBody.\n---\n"
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


def test_a_chain_moves_each_file_as_the_last_commit_has_it(tmp_path):
    """`branches`' moves: every patch's new file in order, its text as the branch's last commit holds it (a later
    patch may have changed it), the homes as the base holds them, the declared shared helpers replaced."""
    first = "def helper():\n    return 1\n\n\ndef test_first():\n    assert helper() == 1\n"
    second = "def test_second():\n    assert True\n"
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "0001-a.patch").write_text(_new_file_patch("tests/new/test_a.py", first), encoding="utf-8")
    (folder / "0002-b.patch").write_text(_new_file_patch("tests/new/test_b.py", second), encoding="utf-8")
    target = Target("pkg", "pkg", "1.0", "0" * 64, "", "tests/new/", "src", ["0001-a.patch", "0002-b.patch"], folder)
    target.test_homes = {"tests/new/test_a.py": "tests/test_home.py", "tests/new/test_b.py": "tests/test_home.py"}
    target.shared_helpers_module = "tests/utils.py"
    target.shared_helpers = {"tests/new/test_a.py": {"helper": "one"}}
    base = {"tests/test_home.py": "def test_home():\n    pass\n", "tests/utils.py": "def one():\n    return 1\n"}
    now = {"tests/new/test_a.py": first.replace("== 1", "== 1.0"), "tests/new/test_b.py": second}
    found = testhomes.plan_chain(target, ["0001-a.patch", "0002-b.patch"], base.get, now.get)
    assert found.sources == ["tests/new/test_a.py", "tests/new/test_b.py"]
    assert found.before == {"tests/test_home.py": base["tests/test_home.py"]}
    assert found.after["tests/test_home.py"] == (
        "from .utils import one\n\n\ndef test_home():\n    pass\n\n\ndef test_first():\n    assert one() == 1.0\n\n\n"
        "def test_second():\n    assert True\n"
    )
    # a file a later patch removed moves nothing; a shared module upstream lacks is bad input
    assert testhomes.plan_chain(target, ["0001-a.patch"], base.get, {}.get).sources == []
    with pytest.raises(SeriesError, match=r"\[targets.pkg.shared_helpers\]: upstream's tests have no tests/utils.py"):
        testhomes.plan_chain(target, ["0001-a.patch"], {"tests/test_home.py": ""}.get, now.get)


def test_a_patch_s_change_to_a_dependency_s_test_file_is_made_to_its_moved_code(tmp_path):
    """Before: `homes` moved only a patch's new files, so the diff of a patch that also changes a test file of a
    patch it depends on (0019 changes 0005's) left that change out of upstream's tree."""
    first = "def expected():\n    return 1\n\n\ndef test_first():\n    assert expected() == 1\n"
    change = (
        "diff --git a/tests/new/test_a.py b/tests/new/test_a.py\n"
        "--- a/tests/new/test_a.py\n+++ b/tests/new/test_a.py\n"
        "@@ -1,4 +1,4 @@\n def expected():\n-    return 1\n+    return 1.0\n \n \n"
    )
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "0001-a.patch").write_text(_new_file_patch("tests/new/test_a.py", first), encoding="utf-8")
    second = _new_file_patch("tests/new/test_b.py", "def test_second():\n    assert True\n")
    (folder / "0002-b.patch").write_text(second.replace("diff --git", change + "diff --git", 1), encoding="utf-8")
    names = ["0001-a.patch", "0002-b.patch"]
    target = Target(
        "pkg", "pkg", "1.0", "0" * 64, "", "tests/new/", "src", names, folder, depends={names[1]: [names[0]]}
    )
    target.test_homes = {"tests/new/test_a.py": "tests/test_home.py", "tests/new/test_b.py": "tests/test_home.py"}
    (tmp_path / "up" / "tests").mkdir(parents=True)
    (tmp_path / "up" / "tests" / "test_home.py").write_text("def test_home():\n    pass\n", encoding="utf-8")
    found = testhomes.plan(target, names[1], tmp_path / "up")
    assert found.changes == ["tests/new/test_a.py"] and found.depends == [names[0]]
    assert "    return 1\n" in found.before["tests/test_home.py"]  # as 0001's pull request leaves it
    diff = found.diff()
    assert "-    return 1\n+    return 1.0\n" in diff and "+def test_second():\n" in diff
    assert [m.classes for m in found.moves] == [["test_second"]]  # only its own tests run


def test_a_helper_bound_again_goes_with_its_definition():
    """A helper the moved file binds twice (`ROWS = {...}` then `ROWS |= {...}`) keeps both statements: the second
    was taken for a helper the home already had, and the moved tests lost half of it (a cold review of 0011 found its
    ESM test red on its branch)."""
    home = "import os\n\n\nclass UpstreamTest:\n    def test_upstream(self):\n        pass\n"
    test = 'class T:\n    def test_t(self):\n        assert ROWS == {"a": 1, "b": 2}\n'
    new = 'ROWS = {"a": 1}\nROWS |= {"b": 2}\n\n\n' + test
    merged, moved = testhomes.move(home, new, home="h.py", source="n.py")
    assert merged.index('ROWS = {"a": 1}\n') < merged.index('ROWS |= {"b": 2}\n') < merged.index("class T:")
    namespace: dict = {}
    exec(compile(merged, "h.py", "exec"), namespace)
    namespace["T"]().test_t()
    # where the home defines the same first statement, the file's helper (bound again) is its own: renamed, the
    # home's left as it is
    merged, moved = testhomes.move('ROWS = {"a": 1}\n' + home, new, home="h.py", source="n.py")
    assert moved.renamed == {"ROWS": "ROWS_N"}
    namespace = {}
    exec(compile(merged, "h.py", "exec"), namespace)
    namespace["T"]().test_t()
    assert namespace["ROWS"] == {"a": 1}
