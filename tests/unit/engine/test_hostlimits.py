"""What the host cannot run skips saying what it lacks; every other error stays the
implementation's. torch's oneDNN on a CPU without AVX-512 refused a bfloat16 LSTM with
"could not create a primitive descriptor", which failed lstm-torch-eager+nnlstm-cpu-amp as
the implementation's fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_mlbench.engine import hostlimits
from pytest_mlbench.engine import protocol as p
from pytest_mlbench.engine.framework_worker import FrameworkWorker

ONEDNN = RuntimeError("could not create a primitive descriptor for the LSTM forward "
                      "propagation primitive")
AVX2 = frozenset({"sse4_2", "avx", "avx2", "fma"})


def lstm(precision: str, device: str = "cpu") -> p.CaseSpec:
    """The spec of an LSTM case in torch at ``precision`` on ``device``."""
    return p.CaseSpec(root="suites", workload="lstm", size="smoke", shape="", task="",
                      framework="torch", variant="eager", device=device, precision=precision,
                      workers=1, strategy="", nodes=1, seed=0,
                      name=f"lstm-torch-eager-{device}-{precision}")


AMP_CPU = lstm("amp")


def test_a_library_refusing_a_16_bit_kernel_on_a_cpu_without_it_is_the_hosts_limit() -> None:
    said = hostlimits.host_lacks(ONEDNN, AMP_CPU, AVX2)
    assert said == (
        "this host's CPU cannot run amp here: oneDNN refused the case (could not create a "
        "primitive descriptor for the LSTM forward propagation primitive); its 16-bit kernels "
        "need AVX-512 (avx512bw), AVX512-BF16/FP16, AMX or AVX-NE-CONVERT, which this CPU "
        "lacks (it runs on a host that has them)")


@pytest.mark.parametrize(("exc", "spec", "flags"), [
    (ONEDNN, AMP_CPU, AVX2 | {"avx512bw"}),  # the CPU has them: the implementation's fault
    (ONEDNN, lstm("fp32"), AVX2),  # float32 kernels exist anywhere
    (ONEDNN, lstm("bf16", "gpu"), AVX2),  # no oneDNN on the GPU
    (RuntimeError("shapes cannot be multiplied"), AMP_CPU, AVX2),  # any other error
    (ONEDNN, AMP_CPU, None),  # flags that cannot be read tell nothing
])
def test_anything_else_stays_the_implementations(exc: Exception, spec: p.CaseSpec,
                                                 flags: frozenset[str] | None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostlimits, "cpu_flags", lambda: None)
    assert hostlimits.host_lacks(exc, spec, flags) is None


def test_the_worker_returns_the_hosts_limit_as_a_skip(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma\n")
    monkeypatch.setattr(hostlimits, "CPUINFO", cpuinfo)

    def refused() -> None:
        raise ONEDNN

    reply = FrameworkWorker._guarded(refused, AMP_CPU)
    assert isinstance(reply, p.Skipped) and reply.why.startswith("this host's CPU cannot run amp")
    other = FrameworkWorker._guarded(refused, lstm("fp32"))
    assert isinstance(other, p.Raised) and other.error.startswith("RuntimeError: could not")
