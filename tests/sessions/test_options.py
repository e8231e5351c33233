"""Options: one --help group, ini twins, and one-line usage errors naming what is accepted."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_mlbench.options import (
    OptionError,
    build_settings,
    option_table,
    parse_list,
    parse_workers,
)

OPTIONS = ("frameworks", "variants", "device", "precision", "size", "seed", "workers",
           "threads", "processes", "affinity", "compile-cache")

SUITES = Path(__file__).resolve().parents[2] / "suites"
SETTINGS_TEST = """
def test_settings(mlbench_settings):
    print("SETTINGS", mlbench_settings.size, mlbench_settings.seed, mlbench_settings.workers)
"""


def test_help_shows_the_group_with_defaults(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*pytest-mlbench: fair benchmarks of autodiff frameworks*"])
    for name in OPTIONS:
        result.stdout.fnmatch_lines([f"*--mlbench-{name}=*"])
    result.stdout.fnmatch_lines(["*present). Default: cpu; ini: mlbench_device.*"])
    result.stdout.fnmatch_lines(["*mlbench_size (args):*"])


@pytest.mark.parametrize(
    ("option", "value", "accepted"),
    [
        ("frameworks", "pytorchh", "choose from: all, numpy, numba, autograd, jax, torch, tensorflow"),
        ("variants", "fast", "choose from: all, eager, jit, xla"),
        ("device", "cuda", "choose from: cpu, gpu, tpu, auto"),
        ("precision", "fp16", "choose from: all, fp64, fp32, tf32, bf16, amp"),
        ("size", "huge", "choose from: smoke, default, paper"),
        ("seed", "abc", "give a seed from 0 to 2**32-1"),
        ("seed", "-1", "give a seed from 0 to 2**32-1"),
        ("workers", "1,x", "'x' is not a worker count; give an integer from 1 to 1024"),
        ("processes", "0", "'0' is not a process count"),
        ("affinity", "loose", "unknown value 'loose'; choose from: "),
        ("compile-cache", "tox.ini", "'tox.ini' is a file, not a folder"),
        ("hosts", "cluster", "unknown value 'cluster'; choose from: local, external"),
        ("listen", "myhost", "'myhost' is not HOST:PORT; give e.g. 127.0.0.1:29555"),
        ("listen", ":29555:7", "':29555:7' is not HOST:PORT; give e.g. 127.0.0.1:29555"),
        ("listen", "::1:29555", "'::1:29555' is not HOST:PORT"),
        ("wait-workers", "0", "'0' is not a number of seconds"),
    ],
)
def test_bad_value_is_a_one_line_usage_error(pytester: pytest.Pytester, option: str, value: str,
                                             accepted: str) -> None:
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest(f"--mlbench-{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --mlbench-{option}: *{accepted}*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_bad_ini_value_is_a_usage_error_naming_the_ini_key(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmlbench_size = enormous\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ini mlbench_size: unknown value 'enormous'; choose "
                                 "from*"])


def test_command_line_beats_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmlbench_size = paper\nmlbench_seed = 7\nmlbench_workers = 1 4\n")
    pytester.makepyfile(test_settings=SETTINGS_TEST)
    result = pytester.runpytest("--mlbench-size=smoke", "-s")
    result.stdout.fnmatch_lines(["*SETTINGS smoke 7 (1, 4)*"])


def test_an_empty_value_is_refused_wherever_it_comes_from(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--mlbench-size=")
    result.stderr.fnmatch_lines(["ERROR: --mlbench-size: empty value; give a value or leave the "
                                 "option out (default: default)"])


def test_aliases_and_all() -> None:
    assert parse_list("pytorch, tf,jax", ("numpy", "torch", "tensorflow", "jax"),
                      {"pytorch": "torch", "tf": "tensorflow"}) == ("torch", "tensorflow", "jax")
    assert parse_list("all", ("a", "b")) == ("a", "b")
    settings = build_settings({"variants": "compiled"}, option_table())
    assert settings.variants == ("jit",)


def test_empty_list_and_all_mixed_with_names_are_rejected() -> None:
    with pytest.raises(OptionError, match="empty value; choose from: all, a, b"):
        parse_list(" , ", ("a", "b"))
    with pytest.raises(OptionError, match="'all' already means every value"):
        parse_list("all,a", ("a", "b"))


def test_workers_option_parses_a_comma_list() -> None:
    assert parse_workers("1,2,4") == (1, 2, 4)
    assert parse_workers(" 4, 2 ,4") == (4, 2)
    assert build_settings({}, option_table()).workers == (1, 2)


@pytest.mark.parametrize("bad", ["0", "two", "1,,2", "-1", "2.5", "5000"])
def test_bad_workers_value_names_option_and_fix(bad: str) -> None:
    with pytest.raises(OptionError, match=r"^--mlbench-workers: .* is not a worker count; give "
                                          r"an integer from 1 to \d+, or a comma list such as "
                                          r"1,2,4$"):
        build_settings({"workers": bad}, option_table())


@pytest.mark.parametrize("timing", [["--benchmark-disable"], []])
def test_the_compile_cache_serves_every_session(pytester: pytest.Pytester,
                                                timing: list[str]) -> None:
    """A timed session and one that times nothing keep compiled code in the same folder (the
    compile column says which figures came from it); ``cold`` gives a session its own."""
    from pytest_mlbench.engine.pools import compile_caches

    folder = pytester.path / "kept"
    pytester.makeini(f"[pytest]\nmlbench_suites = {SUITES}\n")
    pytester.makepyfile(test_one="def test_case(mlbench_case):\n    pass\n")
    result = pytester.runpytest("--collect-only", f"--mlbench-compile-cache={folder}", *timing)
    result.stdout.fnmatch_lines([f"mlbench: * compile-cache={folder}"])
    cold = pytester.runpytest("--collect-only", "--mlbench-compile-cache=COLD", *timing)
    cold.stdout.fnmatch_lines(["mlbench: * compile-cache=cold"])
    env = compile_caches("/session", {}, str(folder), xla=str(folder))
    assert env["TORCHINDUCTOR_CACHE_DIR"] == f"{folder}/inductor"
    assert env["NUMBA_CACHE_DIR"] == f"{folder}/numba"
    assert env["JAX_COMPILATION_CACHE_DIR"] == f"{folder}/jax"
    assert env["MLBENCH_TF_SCRATCH"] == "/session/tf-tmp"  # a killed worker's litter: the session's
    assert compile_caches("/session", {})["TORCHINDUCTOR_CACHE_DIR"] == "/session/inductor"
    assert compile_caches("/session", {})["JAX_ENABLE_COMPILATION_CACHE"] == "false"


def test_listen_takes_a_host_and_port_and_an_ipv6_host_in_brackets() -> None:
    from pytest_mlbench.options import parse_listen

    assert parse_listen(":29555") == "127.0.0.1:29555" and parse_listen("0") == "127.0.0.1:0"
    assert parse_listen("0.0.0.0:29555") == "0.0.0.0:29555"
    assert parse_listen("[::1]:29555") == "[::1]:29555"
    for bad in ("[::1:29555", "host]:1", "[]:1"):
        with pytest.raises(OptionError, match="is not HOST:PORT"):
            parse_listen(bad)


def test_listen_without_external_hosts_is_said_to_be_unused(pytester: pytest.Pytester) -> None:
    """Not refused (a project's ini may keep its cluster's address for the runs that ask for
    external hosts), but said under the header, naming where it came from."""
    pytester.makeini(f"[pytest]\nmlbench_suites = {SUITES}\nmlbench_wait_workers = 60\n")
    pytester.makepyfile(test_one="def test_case(mlbench_case):\n    pass\n")
    result = pytester.runpytest("--collect-only", "--mlbench-listen=0.0.0.0:29555")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "mlbench: --mlbench-listen is unused: it is for --mlbench-hosts=external, and this "
        "session starts its workers itself",
        "mlbench: ini mlbench_wait_workers is unused: *"])
    quiet = pytester.runpytest("--collect-only", "--mlbench-hosts=external",
                               "--mlbench-listen=0.0.0.0:29555")
    assert "is unused" not in quiet.stdout.str()


def test_collect_only_prints_no_estimate_of_the_run_it_does_not_make(
        pytester: pytest.Pytester) -> None:
    """--collect-only only collects: "about N min on this host" belongs to a session that
    will time its cases (here --setup-plan: the same header, nothing run)."""
    pytester.makeini(f"[pytest]\nmlbench_suites = {SUITES}\n")
    pytester.makepyfile(test_one="def test_case(mlbench_case):\n    pass\n")
    selected = ["-k", "mlp- and numpy", "--mlbench-workers=1"]
    planned = pytester.runpytest("--setup-plan", *selected)
    planned.stdout.fnmatch_lines(["mlbench: * case(s) x 3 process(es): about * on this host *"])
    collected = pytester.runpytest("--collect-only", *selected)
    assert collected.ret == pytest.ExitCode.OK
    assert "on this host" not in collected.stdout.str()


def test_a_folder_of_user_files_as_compile_cache_is_a_usage_error(
        pytester: pytest.Pytester) -> None:
    """A session would write into the folder and ``cache clear`` would later be asked to empty
    it: a folder holding the user's own files is refused as the session collects, untouched."""
    pytester.makeini(f"[pytest]\nmlbench_suites = {SUITES}\n")
    pytester.makepyfile(test_one="def test_case(mlbench_case):\n    pass\n")
    mine = pytester.mkdir("thesis")
    (mine / "thesis.tex").write_text("\\documentclass{book}")
    result = pytester.runpytest("--benchmark-disable", "--mlbench-frameworks=numpy",
                                f"--mlbench-compile-cache={mine}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --mlbench-compile-cache: {mine} holds files "
                                 "pytest-mlbench did not make (thesis.tex) and no "
                                 ".pytest-mlbench-made mark; give a new or empty folder *"])
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]


def test_a_compile_cache_that_cannot_be_made_is_a_usage_error(pytester: pytest.Pytester) -> None:
    """The folder is made as the session collects its cases: one that cannot be (under a
    file) stops it before anything runs, in one line, exit 4."""
    pytester.makeini(f"[pytest]\nmlbench_suites = {SUITES}\n")
    pytester.makepyfile(test_one="def test_case(mlbench_case):\n    pass\n")
    result = pytester.runpytest("--benchmark-disable", "--mlbench-frameworks=numpy",
                                f"--mlbench-compile-cache={pytester.path / 'tox.ini' / 'cache'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --mlbench-compile-cache: cannot use */tox.ini/cache as "
                                 "the compile cache (Not a directory); give a folder you can "
                                 "write *"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
