"""Collection: readable ids, -k selection, skip reasons, and workload folders checked."""

from __future__ import annotations

import textwrap

import pytest

TEST_MODULE = """
from pytest_mlbench.harness import check_reference

def test_reference_gradient(mlbench_workload, mlbench_settings):
    check_reference(*mlbench_workload, mlbench_settings.seed)

def test_train_step(mlbench_case, benchmark):
    mlbench_case.run(benchmark)
"""

TOY_SPEC = """
import numpy as np
from pytest_mlbench.workload import Shape, Workload

def loss(p, d):
    r = d["x"] @ p["w"] - d["y"]
    return 0.5 * np.mean(r * r)

def grad(p, d):
    r = d["x"] @ p["w"] - d["y"]
    return {"w": d["x"].T @ r / len(r)}

SPEC = Workload(
    name="toy", summary="least squares", learning_rate=0.1,
    sizes={"smoke": (Shape({"n": 16}),), "default": (Shape({"n": 64}),),
           "paper": (Shape({"n": 64}, "n64"), Shape({"n": 256}, "n256"))},
    make_data=lambda rng, d: {"x": rng.standard_normal((d["n"], 3)),
                              "y": rng.standard_normal((d["n"], 1))},
    make_params=lambda rng, d: {"w": rng.standard_normal((3, 1))},
    loss=loss, grad=grad, flops_per_step=lambda d: 4 * d["n"] * 3,
    implementations={IMPLS},
)
"""

TOY_NUMPY = """
class Trainer:
    def __init__(self, case):
        self.w, self.x, self.y, self.lr = case.params["w"], case.data["x"], case.data["y"], case.learning_rate
    def params(self):
        return {"w": self.w}
    def loss_and_grads(self):
        r = self.x @ self.w - self.y
        return 0.5 * (r * r).mean(), {"w": self.x.T @ r / len(r)}
    def step(self):
        loss, g = self.loss_and_grads()
        self.w = self.w - self.lr * g["w"]
        return loss

def build(case):
    return Trainer(case)
"""


def make_suite(pytester: pytest.Pytester, impls: str = '{"numpy": ("eager",)}',
               files: tuple[str, ...] = ("numpy",)) -> None:
    # a basename of its own: the real suites/test_workloads.py may be imported already
    pytester.makepyfile(**{"suites/test_toy_suite": TEST_MODULE})
    pytester.makepyfile(**{"suites/toy/spec": TOY_SPEC.replace("{IMPLS}", impls)})
    for name in files:
        pytester.makepyfile(**{f"suites/toy/impl_{name}": TOY_NUMPY})


def test_ids_read_like_the_docs(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    result = pytester.runpytest("--collect-only", "-q", "suites", "--mlbench-precision=fp32,fp64")
    result.stdout.fnmatch_lines([
        "suites/test_toy_suite.py::test_reference_gradient[[]toy[]]",
        "suites/test_toy_suite.py::test_train_step[[]toy-numpy-eager-cpu-fp32[]]",
        "suites/test_toy_suite.py::test_train_step[[]toy-numpy-eager-cpu-fp64[]]",
    ])


def test_shape_labels_join_the_id_and_k_selects(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    result = pytester.runpytest("--collect-only", "-q", "suites", "--mlbench-size=paper",
                                "-k", "toy and n256 and numpy")
    result.stdout.fnmatch_lines(["*test_train_step[[]toy-n256-numpy-eager-cpu-fp32[]]",
                                 "*1/4 tests collected (3 deselected)*"])


def test_suite_passes_and_prints_the_table(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    result = pytester.runpytest("suites", "--mlbench-size=smoke", "--benchmark-min-rounds=3",
                                "--benchmark-max-time=0.01")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*mlbench: step time normalised to the fastest*",
                                 "toy cpu fp32", "*numpy-eager * 1.00 *"])


def test_missing_framework_skips_naming_the_extra(pytester: pytest.Pytester) -> None:
    make_suite(pytester, '{"numpy": ("eager",), "fakefw": ("eager",)}', ("numpy", "fakefw"))
    pytester.makeconftest("""
        from pytest_mlbench.frameworks.numpy_ import NumpyAdapter

        class Fake(NumpyAdapter):
            name = "fakefw"
            modules = ("no_such_module_for_mlbench",)
            extra = "fakefw"

        def pytest_mlbench_adapters(config):
            return {"fakefw": Fake}
    """)
    result = pytester.runpytest("suites", "--benchmark-disable", "--mlbench-size=smoke", "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED * fakefw is not installed (no module "
                                 "no_such_module_for_mlbench): pip install 'pytest-mlbench[[]fakefw[]]'"])


def test_absent_device_and_unsupported_precision_skip_with_reason(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    result = pytester.runpytest("suites", "--benchmark-disable", "--mlbench-size=smoke", "-rs",
                                "--mlbench-device=gpu", "-k", "train_step")
    result.stdout.fnmatch_lines(["SKIPPED * numpy runs on the CPU only"])
    result = pytester.runpytest("suites", "--benchmark-disable", "--mlbench-size=smoke", "-rs",
                                "--mlbench-precision=bf16", "-k", "train_step")
    result.stdout.fnmatch_lines(["SKIPPED * numpy has no bfloat16 arithmetic"])


def test_hook_can_drop_cases(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    pytester.makeconftest("""
        def pytest_mlbench_modify_cases(config, cases):
            cases[:] = [c for c in cases if c.precision != "fp64"]
    """)
    result = pytester.runpytest("--collect-only", "-q", "suites", "--mlbench-precision=fp32,fp64")
    result.stdout.fnmatch_lines(["*2 tests collected*"])


@pytest.mark.parametrize(("impls", "files", "message"), [
    ('{"numpy": ("eager",)}', ("numpy", "jax"), "impl_jax.py is not declared in SPEC.implementations"),
    ('{"numpy": ("eager",), "torch": ("eager",)}', ("numpy",), "impl_torch.py is missing"),
])
def test_undeclared_or_missing_impl_is_a_clear_error(pytester: pytest.Pytester, impls: str,
                                                     files: tuple[str, ...], message: str) -> None:
    make_suite(pytester, impls, files)
    result = pytester.runpytest("--collect-only", "suites")
    result.stdout.fnmatch_lines([f"*{message}*"])
    assert "Traceback" not in result.stdout.str()


def test_user_tests_get_framework_device_precision_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(textwrap.dedent("""
        def test_fixtures(framework, device, precision, mlbench_rng):
            assert framework.name == "numpy" and device == "cpu"
            assert precision.dtype in ("float32", "float64")
            assert mlbench_rng.standard_normal() == mlbench_rng.standard_normal() or True
    """))
    result = pytester.runpytest("-v", "--mlbench-frameworks=numpy", "--mlbench-precision=fp32,fp64")
    result.stdout.fnmatch_lines(["*test_fixtures[[]numpy-cpu-fp32[]] PASSED*",
                                 "*test_fixtures[[]numpy-cpu-fp64[]] PASSED*"])


def test_a_tests_own_parametrize_wins(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.parametrize("precision", ["mine"])
        def test_own(precision):
            assert precision == "mine"
    """)
    pytester.runpytest().assert_outcomes(passed=1)
