"""The plugin's options: one table, one parse function per option, one Settings result.

Every option has an ini-file twin of the same name with dashes turned to underscores
(``--mlbench-size`` and ``mlbench_size``); the command line wins over the ini file. Ini values
may be written as strings or, in ``[tool.pytest.ini_options]``, as TOML lists. An empty value
is a usage error wherever it comes from: an unset CI variable must not silently turn an option
off. Errors name where the value came from (``--mlbench-size`` or ``ini mlbench_size``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_mlbench.parallel import HOSTS, STRATEGIES, refusal
from pytest_mlbench.precision import POLICIES

# the gate's marker, registered by plugin.py in every session (its text lives here, with the
# --mlbench-gate-threshold it defaults to, so that registering it imports nothing heavy)
GATE_MARKER = ("mlbench_gate(threshold): per-benchmark gate threshold, a percentage such as '25%' "
               "(default: --mlbench-gate-threshold)")

FRAMEWORKS = ("numpy", "numba", "autograd", "jax", "torch", "tensorflow")
FRAMEWORK_ALIASES = {"np": "numpy", "pytorch": "torch", "tf": "tensorflow"}
VARIANTS = ("eager", "jit", "xla")
VARIANT_ALIASES = {"compiled": "jit"}
DEVICES = ("cpu", "gpu", "tpu", "auto")
SIZES = ("smoke", "default", "paper", "gpu")  # gpu: only the workloads that have it
AFFINITIES = ("off", "pin")
AUTO = ("auto",)  # --mlbench-precision left unset: a workload's default_precisions apply
FALLBACK_PRECISION = "fp32"  # for workloads that declare no default precision
# Three keep the main job (-m mlbench_main) short (its minutes: docs/MEASURING.md); the A/B
# gate's workflow asks for three too: its paired test takes the session's other cases'
# spread (spread.Prior), so two degrees of freedom a case are not all it has (docs/GATE.md)
DEFAULT_PROCESSES = 3
GATE_PROCESSES = 3
MAX_WORKERS = 1024


class OptionError(ValueError):
    """A bad option value; the message names the option, the value and what is accepted."""


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask), which is what a worker can use."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class Settings:
    frameworks: tuple[str, ...]
    variants: tuple[str, ...]
    device: str
    precisions: tuple[str, ...]
    size: str
    seed: int
    # True when no precision was given (option and ini left at ``auto``): each workload's
    # ``default_precisions`` then apply, and ``precisions`` holds the fallback for the rest.
    precision_auto: bool = False
    workers: tuple[int, ...] = (1, 2)  # worker counts; >1 adds parallel cases
    strategies: tuple[str, ...] = tuple(STRATEGIES)  # the parallel strategies to run
    nodes: tuple[int, ...] = (1,)  # node counts a parallel case's workers are launched as
    threads: int = 1  # compute threads of every framework in every case
    processes: int = DEFAULT_PROCESSES  # fresh worker processes each timed case is sampled in
    affinity: str = "off"  # leave thread placement to the OS, or pin the busy threads
    ab: str = ""  # "" or the revision (git ref, or python:<interpreter>) to compare against
    compile_cache: str = ""  # a folder kept across sessions, "cold", or "" (the default one)
    force_size: bool = False  # run a size on a device it is not made for (the gpu size on a CPU)
    hosts: str = "local"  # external: parallel cases' workers are ones a launcher started
    listen: str = "127.0.0.1:0"  # where a session with external hosts waits for them
    wait_workers: int = 300  # seconds an external pool waits for its workers


# -- parse functions: a string in, a value or OptionError out ---------------------------------

def parse_list(
    value: str, choices: Iterable[str], aliases: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """Parse a comma list against ``choices``; ``all`` alone means every choice, order kept."""
    choices = tuple(choices)
    aliases = aliases or {}
    items = [item.strip().lower() for item in value.split(",") if item.strip()]
    if not items:
        raise OptionError(f"empty value; choose from: all, {', '.join(choices)}")
    if "all" in items:
        if items != ["all"]:
            raise OptionError(f"{value.strip()!r}: 'all' already means every value and cannot "
                              f"be combined with others; give all, or a list of: "
                              f"{', '.join(choices)}")
        return choices
    out: list[str] = []
    for item in items:
        name = aliases.get(item, item)
        if name not in choices:
            raise OptionError(f"unknown value {item!r}; choose from: all, {', '.join(choices)}")
        if name not in out:
            out.append(name)
    return tuple(out)


def parse_one(value: str, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    item = value.strip().lower()
    if item not in choices:
        raise OptionError(f"unknown value {value!r}; choose from: {', '.join(choices)}")
    return item


def parse_precisions(value: str) -> tuple[str, ...]:
    """A comma list of policies, or ``auto`` alone: let each workload say (see build_settings)."""
    if value.strip().lower() == "auto":
        return AUTO
    return parse_list(value, POLICIES)


def _positive(item: str, what: str, high: int, example: str) -> int:
    if not item.isdigit() or not 1 <= int(item) <= high:
        raise OptionError(f"{item!r} is not {what}; give an integer from 1 to {high}, {example}")
    return int(item)


def parse_workers(value: str) -> tuple[int, ...]:
    """A comma list of worker counts (``1,2,4``), order kept, repeats dropped."""
    return _counts(value, "a worker count")


def _counts(value: str, what: str) -> tuple[int, ...]:
    out: list[int] = []
    for item in (part.strip() for part in value.split(",")):
        count = _positive(item, what, MAX_WORKERS, "or a comma list such as 1,2,4")
        if count not in out:
            out.append(count)
    return tuple(out)


def parse_threads(value: str) -> int:
    """``all`` (every usable core) or a number of threads up to the usable cores."""
    cores = usable_cores()
    if value.strip().lower() == "all":
        return cores
    return _positive(value.strip(), "a thread count", cores,
                     f"or all (this machine lets this process use {cores} cores)")


def parse_processes(value: str) -> int:
    return _positive(value.strip(), "a process count", 1000, "such as 5")


def parse_seed(value: str) -> int:
    try:
        seed = int(value)
    except ValueError:
        raise OptionError(f"{value!r} is not an integer; give a seed from 0 to 2**32-1") from None
    if not 0 <= seed < 2**32:
        raise OptionError(f"{seed} is out of range; give a seed from 0 to 2**32-1")
    return seed


def parse_name(value: str) -> str:
    """A baseline name: letters, digits, '.', '_' and '-', starting with a letter or digit."""
    name = value.strip()
    if not name[:1].isalnum() or not all(c.isalnum() or c in "._-" for c in name):
        raise OptionError(f"{value!r} is not a baseline name; use letters, digits, '.', '_' "
                          "and '-', starting with a letter or digit")
    return name


def parse_percent(value: str) -> float:
    """``10%`` -> 0.10. A bare number is refused: 0.1 could mean 10% or 0.1%."""
    text = value.strip()
    if not text.endswith("%"):
        raise OptionError(f"{value!r} has no '%'; give a percentage such as 10% (a bare "
                          "number is refused: 0.1 could mean 0.1% or 10%)")
    try:
        pct = float(text[:-1])
    except ValueError:
        raise OptionError(f"{value!r} is not a percentage; give e.g. 10%") from None
    if not 0 < pct <= 1000:
        raise OptionError(f"{value!r} is out of range; give a percentage above 0% up to 1000%")
    return pct / 100


def parse_alpha(value: str) -> float:
    try:
        alpha = float(value)
    except ValueError:
        raise OptionError(f"{value!r} is not a number; give a p-value between 0 and 1") from None
    if not 0 < alpha < 1:
        raise OptionError(f"{value!r} is out of range; give a p-value between 0 and 1")
    return alpha


def parse_text(value: str) -> str:
    return value.strip()


def parse_switch(value: str) -> bool:
    table = {"yes": True, "true": True, "on": True, "1": True,
             "no": False, "false": False, "off": False, "0": False}
    try:
        return table[value.strip().lower()]
    except KeyError:
        raise OptionError(f"{value!r} is not yes or no") from None


def parse_ab(value: str) -> str:
    """A git revision (``origin/main``, a sha) or ``python:<interpreter>``."""
    text = value.strip()
    if text.startswith("python:") and not text[len("python:"):].strip():
        raise OptionError("python: needs the path of the other environment's interpreter, "
                          "e.g. python:/opt/venv-old/bin/python")
    if any(c.isspace() for c in text):
        raise OptionError(f"{value!r} is not a git revision or python:<interpreter>")
    return text


def parse_folder(value: str) -> str:
    """A folder path (made when first used); refused if it names an existing file."""
    text = os.path.expanduser(value.strip())
    if os.path.exists(text) and not os.path.isdir(text):
        raise OptionError(f"{value!r} is a file, not a folder")
    return os.path.abspath(text)


def parse_listen(value: str) -> str:
    """``HOST:PORT`` (``:PORT`` or ``PORT``: loopback; an IPv6 host in brackets,
    ``[::1]:29555``); port 0 picks a free one. A host with a colon outside brackets
    (``:29555:7``) is refused: it names no address."""
    text = value.strip()
    host, _, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]") and len(host) > 2
    if not port.isdigit() or not 0 <= int(port) < 65536 or any(c.isspace() for c in text) \
            or (":" in host and not bracketed) or ("[" in host or "]" in host) != bracketed:
        raise OptionError(f"{value!r} is not HOST:PORT; give e.g. 127.0.0.1:29555 (loopback), "
                          "0.0.0.0:29555 (every interface: other hosts' workers), [::1]:29555 "
                          "(IPv6), or 0 for a free port")
    return f"{host or '127.0.0.1'}:{int(port)}"


# given without --mlbench-hosts=external, these are unused: said in a line, not refused (a
# project's ini may hold its cluster's settings for the runs that ask for external hosts)
EXTERNAL_ONLY = ("listen", "wait-workers")


def unused_lines(raw: Mapping[str, Any], settings: Settings) -> list[str]:
    """A line for each option given (``raw``, as build_settings takes it) that this session
    does not use."""
    if settings.hosts == "external":
        return []
    given = [(name, raw[name]) for name in EXTERNAL_ONLY if raw.get(name) is not None]
    return [f"mlbench: {_source(name, value)} is unused: it is for --mlbench-hosts=external, "
            "and this session starts its workers itself" for name, value in given]


def _source(name: str, value: Any) -> str:
    if isinstance(value, tuple) and value[:1] == ("ini",):
        return f"ini mlbench_{name.replace('-', '_')}"
    return f"--mlbench-{name}"


def parse_wait(value: str) -> int:
    return _positive(value.strip(), "a number of seconds", 86400, "such as 300")


def parse_compile_cache(value: str) -> str:
    """``cold``, or a folder (parse_folder)."""
    return "cold" if value.strip().lower() == "cold" else parse_folder(value)


# -- the table ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Option:
    name: str
    default: str  # "" means off; shown in --help
    help: str
    parse: Callable[[str], Any]
    many: bool = False  # a comma list (an ini TOML list is accepted too)
    switch: bool = False  # may be given bare (--mlbench-save-partial) for "yes"
    shown_default: str = ""  # what --help says the default is, where "" does not mean off

    @property
    def default_text(self) -> str:
        """The default as --help and the empty-value error say it."""
        return self.shown_default or self.default or "off"

    @property
    def key(self) -> str:
        """The dest and ini name: ``--mlbench-gate-threshold`` is ``mlbench_gate_threshold``."""
        return "mlbench_" + self.name.replace("-", "_")

    @property
    def flag(self) -> str:
        return f"--mlbench-{self.name}"


def option_table(frameworks: tuple[str, ...] = FRAMEWORKS) -> tuple[Option, ...]:
    """The case options, in help order; ``frameworks`` includes any added through the
    adapters hook."""
    return (
        Option("frameworks", "all",
               f"comma list of frameworks to run: all, {', '.join(frameworks)}",
               lambda v: parse_list(v, frameworks, FRAMEWORK_ALIASES), many=True),
        Option("variants", "all",
               "comma list of variants: all, eager, jit (alias compiled: jax.jit, torch.compile, "
               "tf.function, numba.njit), xla (tf.function with jit_compile=True; torch on "
               "torch_xla's XLA device)",
               lambda v: parse_list(v, VARIANTS, VARIANT_ALIASES), many=True),
        Option("device", "cpu", "device to run on: cpu, gpu, tpu, auto (the best one present)",
               lambda v: parse_one(v, DEVICES)),
        Option("precision", "auto",
               "comma list of precision policies: auto (each workload's declared default, "
               f"else {FALLBACK_PRECISION}), all, "
               + ", ".join(f"{p.name} ({p.summary})" for p in POLICIES.values()),
               parse_precisions, many=True),
        Option("size", "default", "size profile: smoke (seconds, for tests), default, paper "
               "(the seed articles' full sizes), gpu (GPT-2 124M and ViT-B/16, for one GPU: "
               "the workloads that have it)", lambda v: parse_one(v, SIZES)),
        Option("force-size", "no",
               "run a size on a device it is not made for (the gpu size on a CPU: minutes a "
               "step), which otherwise skips saying so; give it bare or yes/no",
               parse_switch, switch=True),
        Option("seed", "0", "seed of the NumPy Generator that makes every input and weight",
               parse_seed),
        Option("workers", "1,2",
               "comma list of worker counts (devices or processes); counts above 1 add "
               "parallel cases for the implementations that declare them", parse_workers,
               many=True),
        Option("strategies", ",".join(STRATEGIES),
               "comma list of the parallel strategies run at worker counts above 1: "
               + ", ".join(f"{k} ({v})" for k, v in STRATEGIES.items()),
               lambda v: parse_list(v, STRATEGIES), many=True),
        Option("nodes", "1",
               "comma list of node counts: a parallel case's workers launched as that many "
               "groups of processes joining one job (torch's env:// rendezvous, "
               "jax.distributed), each group a node of its own on this machine",
               lambda v: _counts(v, "a node count"), many=True),
        # one by default: on a busy or small host, a framework's second compute thread shares a
        # core with the OS and the harness, and eager dispatch then slows by up to 30x (torch
        # eager, 2 cores); every framework gets the same count, so the comparison is fair
        Option("hosts", "local",
               "where parallel cases' workers come from: local (this session starts them) or "
               "external (workers a cluster launcher starts on each host, `python -m "
               "pytest_mlbench.worker`, connect to the session: it prints the torchrun and "
               "srun commands and waits for them; docs/DISTRIBUTED.md)",
               lambda v: parse_one(v, HOSTS)),
        Option("listen", "127.0.0.1:0",
               "with --mlbench-hosts=external: the address the session waits for its workers "
               "on, HOST:PORT (loopback by default; 0.0.0.0:PORT for other hosts); workers prove "
               "the session's token ($MLBENCH_TOKEN, else a fresh one in a 0600 file it names) "
               "before a byte is read", parse_listen),
        Option("wait-workers", "300",
               "with --mlbench-hosts=external: seconds a parallel case's pool waits for its "
               "workers to connect before its cases fail naming the missing ranks", parse_wait),
        Option("threads", "1",
               "compute threads of every framework in every case (torch, TF intra-op, XLA, "
               "BLAS, numba), set through each framework's controls and verified: a number, or "
               "all (every usable core)", parse_threads),
        Option("processes", str(DEFAULT_PROCESSES),
               "fresh worker processes each timed case is sampled in (variance lives between "
               "processes); more gives tighter intervals and takes longer", parse_processes),
        Option("affinity", "off",
               "off: leave thread placement to the OS; pin: bind the threads doing each case's "
               "work to distinct cores, for machines whose cores nothing else uses (a pinned "
               "thread cannot leave a core something else is busy on)",
               lambda v: parse_one(v, AFFINITIES)),
        Option("compile-cache", "",
               "the folder where every worker of a run keeps what it compiles (torch inductor's, "
               "numba's and XLA's persistent caches), for the next run to load: a folder, or "
               "cold for a fresh one removed at the session's end (every compile time cold); "
               "the compile column says which figures came from the cache. Empty it with "
               "pytest-mlbench cache clear", parse_compile_cache,
               shown_default="$XDG_CACHE_HOME/pytest-mlbench/compile "
                             "(~/.cache/pytest-mlbench/compile)"),
        Option("ab", "",
               "compare every case against another revision in this job, interleaved: a git "
               "revision (origin/main) or python:<interpreter of another environment>; fails on "
               "a significant slowdown beyond --mlbench-gate-threshold", parse_ab),
    )


def build_settings(raw: Mapping[str, Any], table: tuple[Option, ...]) -> Settings:
    """Parse raw values (see ``resolve``) into Settings; OptionError names the option."""
    values = {o.name.replace("-", "_"): resolve(o, raw.get(o.name)) for o in table}
    precisions = values.pop("precision")
    values["precision_auto"] = precisions == AUTO
    values["precisions"] = (FALLBACK_PRECISION,) if precisions == AUTO else precisions
    why = refusal(values["workers"], values["strategies"], values["nodes"],
                  strategies_named=raw.get("strategies") is not None,
                  nodes_named=raw.get("nodes") is not None)
    if why is not None:  # named counts or strategies that can make no case at all
        raise OptionError(why)
    if values["hosts"] == "external" and max(values["workers"]) < 2:
        raise OptionError("--mlbench-hosts=external: external workers run parallel cases, and "
                          f"--mlbench-workers={','.join(map(str, values['workers']))} makes "
                          "none; give a worker count above 1 (--mlbench-workers=2)")
    return Settings(**values)


def resolve(option: Option, raw: Any) -> Any:
    """One option's value from its raw form: None (unset: the default), a command-line
    string, or an ``("ini", value)`` pair where value is what pytest's getini returned."""
    source, value = option.flag, raw
    if isinstance(raw, tuple) and raw[:1] == ("ini",):
        source, value = f"ini {option.key}", _ini_text(option, raw[1])
    if value is None:
        value = option.default
        if value == "":
            return ""
    elif not str(value).strip():
        raise OptionError(f"{source}: empty value; give a value or leave the option out "
                          f"(default: {option.default_text})")
    try:
        return option.parse(str(value))
    except OptionError as exc:
        raise OptionError(f"{source}: {exc}") from None


def _ini_text(option: Option, value: Any) -> str | None:
    """getini with type "args" gives a list of tokens (shlex-split, or a TOML list)."""
    if value is None:
        return None
    tokens = [str(v) for v in value] if isinstance(value, Sequence) and not isinstance(
        value, str) else [str(value)]
    if option.many:
        return ",".join(tokens)
    if len(tokens) > 1:
        raise OptionError(f"ini {option.key}: one value expected, got {len(tokens)} "
                          f"({' '.join(tokens)}); quote it if it contains spaces")
    return tokens[0] if tokens else ""


# -- baselines and the regression gate (pytest_mlbench.storing.baselines, pytest_mlbench.gate) --------

SAVE_MODES = ("new", "overwrite")


@dataclass(frozen=True)
class GateSettings:
    baselines: str  # folder holding <machine-id>/NNNN_<name>.json
    save: str  # "" = do not save
    save_mode: str
    save_partial: bool  # an interrupted or failed session saves, marked partial
    gate: str  # "" = no gate; a file path, <name> or <machine-id>/<name>
    threshold: float  # fraction: 0.10 fails medians more than 10% slower
    alpha: float


def gate_option_table() -> tuple[Option, ...]:
    return (
        Option("baselines", "baselines",
               "folder of saved runs, one subfolder per machine id", parse_text),
        Option("save", "",
               "save this run with its raw rounds as <baselines>/<machine-id>/NNNN_<NAME>.json",
               parse_name),
        Option("save-mode", "new",
               "new (refuse to replace an existing baseline of that name) or overwrite",
               lambda v: parse_one(v, SAVE_MODES)),
        Option("save-partial", "no",
               "with --mlbench-save: also save an interrupted or failed session, as "
               "NNNN_<NAME>.partial.json (never replacing a baseline); give it bare or yes/no",
               parse_switch, switch=True),
        Option("gate", "",
               "fail the session on slowdowns against a baseline: a .json path, <name> or "
               "<machine-id>/<name>", parse_text),
        Option("gate-threshold", "10%",
               "smallest slowdown that fails the gate (or --mlbench-ab), as a percentage with "
               "%; per benchmark: @pytest.mark.mlbench_gate(threshold='25%')", parse_percent),
        Option("gate-alpha", "0.01",
               "significance level of the gate's one-sided test", parse_alpha),
    )


def build_gate_settings(raw: Mapping[str, Any]) -> GateSettings:
    values = {o.name.replace("-", "_"): resolve(o, raw.get(o.name)) for o in gate_option_table()}
    values["threshold"] = values.pop("gate_threshold")
    values["alpha"] = values.pop("gate_alpha")
    return GateSettings(**values)
