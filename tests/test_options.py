"""Options: one --help group, ini twins, and one-line usage errors naming what is accepted."""

from __future__ import annotations

import pytest

from pytest_mlbench.options import OptionError, build_settings, option_table, parse_list

OPTIONS = ("frameworks", "variants", "device", "precision", "size", "seed")


def test_help_shows_the_group_with_defaults(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*pytest-mlbench: fair benchmarks of autodiff frameworks*"])
    for name in OPTIONS:
        result.stdout.fnmatch_lines([f"*--mlbench-{name}=*"])
    result.stdout.fnmatch_lines(["*present). Default: cpu; ini: mlbench_device.*"])
    result.stdout.fnmatch_lines(["*mlbench_size (string):*"])


@pytest.mark.parametrize(
    ("option", "value", "accepted"),
    [
        ("frameworks", "pytorchh", "choose from: all, numpy, numba, autograd, jax, torch, tensorflow"),
        ("variants", "fast", "choose from: all, eager, jit, xla"),
        ("device", "cuda", "choose from: cpu, gpu, tpu, auto"),
        ("precision", "fp16", "choose from: all, fp64, fp32, tf32, bf16"),
        ("size", "huge", "choose from: smoke, default, paper"),
        ("seed", "abc", "give a seed from 0 to 2**32-1"),
        ("seed", "-1", "give a seed from 0 to 2**32-1"),
    ],
)
def test_bad_value_is_a_one_line_usage_error(pytester: pytest.Pytester, option: str, value: str,
                                             accepted: str) -> None:
    result = pytester.runpytest(f"--mlbench-{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --mlbench-{option}: *{accepted}*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_bad_ini_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmlbench_size = enormous\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --mlbench-size: unknown value 'enormous'; choose from*"])


def test_command_line_beats_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmlbench_size = paper\nmlbench_seed = 7\n")
    result = pytester.runpytest("--mlbench-size=smoke")
    result.stdout.fnmatch_lines(["mlbench: * precision=auto size=smoke seed=7 workers=1,2"])


def test_aliases_and_all() -> None:
    assert parse_list("pytorch, tf,jax", ("numpy", "torch", "tensorflow", "jax"),
                      {"pytorch": "torch", "tf": "tensorflow"}) == ("torch", "tensorflow", "jax")
    assert parse_list("all", ("a", "b")) == ("a", "b")
    settings = build_settings({"variants": "compiled"}, option_table())
    assert settings.variants == ("jit",)


def test_empty_list_is_rejected() -> None:
    with pytest.raises(OptionError, match="empty value; choose from: all, a, b"):
        parse_list(" , ", ("a", "b"))
