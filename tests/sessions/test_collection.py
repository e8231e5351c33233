"""Collection: readable ids, -k selection, skip reasons, workload folders checked (every broken
rule of every folder reported at once, the other folders collected as usual), and the plugin's
fixtures for users' own tests."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.synthetic import toy_spec

TEST_MODULE = """
def test_reference(mlbench_workload):
    mlbench_workload.verify()

def test_train_step(mlbench_case, benchmark):
    mlbench_case.run(benchmark)
"""

TOY_SPEC = toy_spec('{"smoke": (Shape({"n": 16}),), "default": (Shape({"n": 64}),),\n'
                    '           "paper": (Shape({"n": 64}, "n64"), Shape({"n": 256}, "n256"))}',
                    "{IMPLS}")

TOY_NUMPY = """
class Trainer:
    def __init__(self, case):
        self.w, self.d = case.params["w"], case.data  # each step reads its batch
        self.lr = case.learning_rate
    def params(self):
        return {"w": self.w}
    def loss_and_grads(self):
        r = self.d["x"] @ self.w - self.d["y"]
        return 0.5 * (r * r).mean(), {"w": self.d["x"].T @ r / len(r)}
    def step(self):
        loss, g = self.loss_and_grads()
        self.w = self.w - self.lr * g["w"]
        return loss

def build(case):
    return Trainer(case)
"""

FAKE_ADAPTER = """
from pytest_mlbench.frameworks.numpy_ import NumpyAdapter

class Fake(NumpyAdapter):
    name = "fakefw"
    modules = ("no_such_module_for_mlbench",)
    extra = "fakefw"

def pytest_mlbench_adapters(config):
    return {"fakefw": Fake}
"""


def make_suite(pytester: pytest.Pytester, impls: str = '{"numpy": ("eager",)}',
               files: tuple[str, ...] = ("numpy",), name: str = "toy") -> None:
    # a basename of its own: the real suites/test_workloads.py may be imported already
    pytester.makepyfile(**{"suites/test_toy_suite": TEST_MODULE})
    spec = TOY_SPEC.replace("{IMPLS}", impls).replace('name="toy"', f'name="{name}"')
    pytester.makepyfile(**{f"suites/{name}/spec": spec})
    for framework in files:
        pytester.makepyfile(**{f"suites/{name}/impl_{framework}": TOY_NUMPY})


def test_ids_read_like_the_docs(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    result = pytester.runpytest("--collect-only", "-q", "suites", "--mlbench-precision=fp32,fp64")
    result.stdout.fnmatch_lines([
        "suites/test_toy_suite.py::test_reference[[]toy[]]",
        "suites/test_toy_suite.py::test_train_step[[]toy-numpy-eager-cpu-fp32[]]",
        "suites/test_toy_suite.py::test_train_step[[]toy-numpy-eager-cpu-fp64[]]",
    ])


def test_shape_labels_join_the_id_and_k_selects(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    result = pytester.runpytest("--collect-only", "-q", "suites", "--mlbench-size=paper",
                                "-k", "toy and n256 and numpy")
    result.stdout.fnmatch_lines(["*test_train_step[[]toy-n256-numpy-eager-cpu-fp32[]]",
                                 "*1/4 tests collected (3 deselected)*"])


def test_main_marker_selects_the_headline_shape_and_task_only(pytester: pytest.Pytester) -> None:
    """-m mlbench_main (the main job) keeps the shapes and tasks a spec marks main: the sweep's
    other points and the other tasks are deselected, and --strict-markers knows the marker."""
    make_suite(pytester)
    spec = pytester.path / "suites" / "toy" / "spec.py"
    text = spec.read_text()
    text = text.replace('Shape({"n": 64}, "n64")', 'Shape({"n": 64}, "n64", main=False)')
    text = text.replace("from pytest_mlbench import Shape, Workload",
                        "from pytest_mlbench import Shape, Workload, sgd, train")
    text = text.replace("learning_rate=0.1,", "tasks=(train(sgd(0.1)), "
                                              "train(sgd(0.05), 'slow', main=False)),")
    spec.write_text(text)
    result = pytester.runpytest("--collect-only", "-q", "--strict-markers", "suites",
                                "--mlbench-size=paper", "-m", "mlbench_main",
                                "-k", "test_train_step")
    result.stdout.fnmatch_lines(["*test_train_step[[]toy-n256-sgd-numpy-eager-cpu-fp32[]]",
                                 "*1/6 tests collected (5 deselected)*"])


def test_the_suite_passes_checked_but_untimed(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    result = pytester.runpytest("suites", "--mlbench-size=smoke", "--benchmark-disable")
    result.assert_outcomes(passed=2)


BESIDE = """
import os, time
from pytest_mlbench.plugin import STATE

def test_0_runs_first(request):
    state = request.config.stash[STATE]
    assert state.campaign_started is (os.environ["EXPECT"] == "started")
    if os.environ["EXPECT"] == "fail":
        assert False, "a test that fails before the cases"
"""


@pytest.mark.parametrize("mode", ["check", "time"])
def test_a_session_that_times_nothing_checks_its_cases_beside_the_other_tests(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """--benchmark-disable: the campaign starts with the session's first test (its progress
    comes between tests, its workers from the environment as it was then); a timed session
    starts it at its first case, with nothing else running."""
    make_suite(pytester)
    pytester.makepyfile(**{"suites/test_0_beside": BESIDE})
    monkeypatch.setenv("EXPECT", "started" if mode == "check" else "lazy")
    timing = ["--benchmark-disable"] if mode == "check" else ["--benchmark-max-time=0.05",
                                                              "--mlbench-processes=1"]
    result = pytester.runpytest("suites", "--mlbench-size=smoke", "-p", "no:cacheprovider",
                                *timing)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*mlbench [[]process 1/1[]] toy*"])
    # a timed session's table comes with one line saying what its figures mean
    legend = [line for line in result.stdout.lines if line.startswith("normalised: step time")]
    assert len(legend) == (0 if mode == "check" else 1), result.stdout.str()


def test_a_session_ended_early_ends_its_campaign(pytester: pytest.Pytester,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """-x stops at a failing test before any case: the campaign running beside it is
    cancelled, no worker outlives the session, no thread reports an exception."""
    make_suite(pytester)
    pytester.makepyfile(**{"suites/test_0_beside": BESIDE})
    owner = f"ended-early-{os.getpid()}"
    monkeypatch.setenv("EXPECT", "fail")
    monkeypatch.setenv("MLBENCH_TEST_OWNER", owner)
    result = pytester.runpytest("suites", "--mlbench-size=smoke", "--benchmark-disable", "-x",
                                "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    assert "Exception in thread" not in result.stdout.str() + result.stderr.str()
    left = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.status() != psutil.STATUS_ZOMBIE \
                    and child.environ().get("MLBENCH_TEST_OWNER") == owner:
                left.append(child.pid)
    assert left == []


def test_missing_framework_skips_naming_the_extra(pytester: pytest.Pytester) -> None:
    make_suite(pytester, '{"numpy": ("eager",), "fakefw": ("eager",)}', ("numpy", "fakefw"))
    pytester.makeconftest(FAKE_ADAPTER)
    result = pytester.runpytest("suites", "--benchmark-disable", "--mlbench-size=smoke", "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED * fakefw is not installed (no module "
                                 "no_such_module_for_mlbench): pip install "
                                 "'pytest-mlbench[[]fakefw[]]'"])


def test_absent_device_and_unsupported_precision_skip_with_reason(
        pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    result = pytester.runpytest("suites", "--benchmark-disable", "--mlbench-size=smoke", "-rs",
                                "--mlbench-device=gpu", "--mlbench-precision=fp32,bf16",
                                "-k", "train_step")
    result.stdout.fnmatch_lines(["SKIPPED [[]2[]] * numpy runs on the CPU only"])
    result = pytester.runpytest("suites", "--benchmark-disable", "--mlbench-size=smoke", "-rs",
                                "--mlbench-precision=bf16", "-k", "train_step")
    result.stdout.fnmatch_lines(["SKIPPED * numpy has no bfloat16 arithmetic"])


def test_a_declared_unsupported_case_skips_at_the_spec_line_that_declares_it(
        pytester: pytest.Pytester) -> None:
    make_suite(pytester, '{"numpy": ("eager",)},\n    unsupported={\n'
                         '        ("numpy", "fp64"): "the spec says no"}')
    lines = (pytester.path / "suites" / "toy" / "spec.py").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if '("numpy", "fp64")' in text)
    result = pytester.runpytest("suites", "--benchmark-disable", "--mlbench-size=smoke", "-rs",
                                "--mlbench-precision=fp64", "-k", "train_step",
                                "--mlbench-workers=1")
    result.assert_outcomes(skipped=1)  # no worker starts: the spec said no before
    result.stdout.fnmatch_lines([f"SKIPPED [[]1[]] suites/toy/spec.py:{line}: the spec says no"])


def test_hook_can_drop_cases(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    pytester.makeconftest("""
        def pytest_mlbench_modify_cases(config, cases):
            cases[:] = [c for c in cases if c.precision != "fp64"]
    """)
    result = pytester.runpytest("--collect-only", "-q", "suites", "--mlbench-precision=fp32,fp64")
    result.stdout.fnmatch_lines(["*2 tests collected*"])


def test_every_broken_rule_of_a_folder_is_reported_at_once_and_other_folders_still_run(
        pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    make_suite(pytester, '{"numpy": ("eager",), "torch": ("eager",)}', ("numpy", "jax"),
               name="broken")
    result = pytester.runpytest("suites", "--benchmark-disable", "--mlbench-size=smoke", "-v")
    result.stdout.fnmatch_lines([
        "*test_reference[[]toy[]] PASSED*", "*test_train_step[[]toy-numpy-eager-cpu-fp32[]] PASSED*",
        "*test_train_step[[]broken-invalid[]] FAILED*"])
    result.stdout.fnmatch_lines(["*workload folder broken breaks 2 rule(s) of ADDING_WORKLOADS.md:",
                                 "*broken/impl_jax.py: is not declared in SPEC.implementations",
                                 "*broken/impl_torch.py: is missing, but SPEC.implementations "
                                 "names 'torch'"])
    assert "Traceback" not in result.stdout.str()


def test_user_tests_get_framework_device_precision_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_fixtures(mlbench_framework, mlbench_device, mlbench_precision, mlbench_rng):
            assert mlbench_framework.name == "numpy" and mlbench_device == "cpu"
            assert mlbench_precision.dtype in ("float32", "float64")
            assert mlbench_rng.standard_normal() != mlbench_rng.standard_normal()
    """)
    result = pytester.runpytest("-v", "--mlbench-frameworks=numpy",
                                "--mlbench-precision=fp32,fp64")
    result.stdout.fnmatch_lines(["*test_fixtures[[]numpy-cpu-fp32[]] PASSED*",
                                 "*test_fixtures[[]numpy-cpu-fp64[]] PASSED*"])


def test_a_tests_own_parametrize_wins(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.parametrize("mlbench_precision", ["mine"])
        @pytest.mark.parametrize("mlbench_device", ["my-device"])
        @pytest.mark.parametrize("mlbench_framework", ["my-framework"])
        def test_own(mlbench_framework, mlbench_device, mlbench_precision):
            assert (mlbench_framework, mlbench_device, mlbench_precision) == (
                "my-framework", "my-device", "mine")
    """)
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_own[[]my-framework-my-device-mine[]] PASSED*"])


def test_a_missing_framework_skips_a_users_test_naming_the_extra(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(FAKE_ADAPTER)
    pytester.makepyfile("""
        def test_fixture(mlbench_framework):
            pass
    """)
    result = pytester.runpytest("-rs", "--mlbench-frameworks=fakefw")
    result.stdout.fnmatch_lines(["SKIPPED * fakefw is not installed*"])


@pytest.mark.parametrize(("edit", "said"), [
    (('sizes={"smoke"', 'sizes="smoke", unused={"smoke"'),
     "sizes='smoke' (str) must map each size profile"),
    (("learning_rate=0.1", 'learning_rate="0.1"'),
     "learning_rate='0.1' must be a positive number (not a string)"),
    (('flops_per_step=lambda d: 4 * d["n"] * 3', 'flops_per_step=lambda d: "many"'),
     "task 'sgd': its FLOPs function returned 'many' (str) for dims {'n': 16}; it must return "
     "a non-negative integer"),
    (("make_data=lambda", "make_data=3, unused=lambda"), "make_data=3 (int) must be a function"),
    (('Shape({"n": 16})', 'Shape({"n": "16"})'),
     "sizes['smoke']: Shape dims={'n': '16'} (dict) must map names to positive integers"),
    (('{"numpy": ("eager",)}', '{"numpy": "eager"}'),
     "implementations={'numpy': 'eager'} (dict) must map a framework name to a tuple"),
])
def test_a_spec_field_of_the_wrong_type_is_its_folders_failing_case_only(
        pytester: pytest.Pytester, edit: tuple[str, str], said: str) -> None:
    """A wrong field breaks one folder (one line naming the field, what it got, what is
    accepted), never the collection of every workload."""
    make_suite(pytester)
    make_suite(pytester, name="bad")
    spec = pytester.path / "suites" / "bad" / "spec.py"
    text = spec.read_text()
    assert edit[0] in text
    text = text.replace(edit[0], edit[1])
    if "unused=" in text:  # keep the rest of the call valid Python: drop the stray keyword
        text = text.replace("unused=", "_unused=").replace(
            "SPEC = Workload(", "def _W(_unused=None, **kw):\n    return Workload(**kw)\n"
                                "SPEC = _W(")
    spec.write_text(text)
    result = pytester.runpytest("suites", "--collect-only", "-q", "--mlbench-size=smoke")
    result.stdout.fnmatch_lines(["*test_train_step[[]toy-numpy-eager-cpu-fp32[]]*",
                                 "*test_train_step[[]bad-invalid[]]*"])
    result = pytester.runpytest("suites", "--benchmark-disable", "--mlbench-size=smoke",
                                "-k", "invalid")
    escaped = "".join({"[": "[[]", "]": "[]]"}.get(c, c) for c in said)  # fnmatch's classes
    result.stdout.fnmatch_lines([f"*bad/spec.py: {escaped}*"])
    assert "Traceback" not in result.stdout.str()


def test_an_empty_suites_folder_is_a_skip_saying_there_is_no_workload_folder(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**{"suites/test_toy_suite": TEST_MODULE})
    result = pytester.runpytest("suites", "--benchmark-disable", "-rs")
    result.stdout.fnmatch_lines(["SKIPPED [[]2[]] *: no workload folder under *suites (a "
                                 "workload is a folder with a spec.py*"])


def test_k_finds_a_case_by_its_task_and_optimizer_even_when_its_id_names_neither() -> None:
    """gpt trains with Adam, its only task, so its ids carry no task label: ``-k adam``
    selects it all the same (the task's label, kind and optimizer are keywords of a case)."""
    root = Path(__file__).resolve().parents[2]
    found = subprocess.run([sys.executable, "-m", "pytest", "suites", "--collect-only", "-q",
                            "--mlbench-size=smoke", "-k", "adam", "-p", "no:cacheprovider"],
                           cwd=root, capture_output=True, text=True, timeout=120)
    ids = [line for line in found.stdout.splitlines() if "::test_case[" in line]
    assert any("[gpt-" in i for i in ids) and any("[mlp_optim-adam-" in i for i in ids), ids
    assert not any("[mlp-" in i or "[vit-" in i for i in ids), ids  # SGD cases stay out
