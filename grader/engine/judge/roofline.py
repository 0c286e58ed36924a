"""What a GPU cannot beat: datasheet ceilings, the time a shape cannot go below, what a time achieves."""

from __future__ import annotations

from dataclasses import dataclass

from grader.engine.problems.base import ProblemKind
from grader.engine.spec.model import Case


@dataclass(frozen=True)
class Peaks:
    """Datasheet ceilings: a measured time below bytes/bandwidth or flops/rate cannot be real."""

    bandwidth: float  # bytes/s
    half: float  # fp16/bf16 tensor-core FLOP/s
    single: float  # fp32 through TF32 tensor cores, FLOP/s


# NVIDIA datasheet figures (dense): H100/H200 SXM bf16 989 TFLOP/s, tf32 494; HBM 3.35 / 4.8 TB/s.
PEAKS = {
    "H200": Peaks(4.8e12, 989e12, 494e12),
    "H100": Peaks(3.35e12, 989e12, 494e12),
    "A100": Peaks(2.04e12, 312e12, 156e12),
}
GENEROUS = Peaks(10e12, 2.5e15, 1.25e15)


def peaks_for(gpu: str) -> Peaks:
    return next((p for key, p in PEAKS.items() if key in gpu), GENEROUS)


def roofline_floor_s(kind: ProblemKind, case: Case, gpu: str) -> float:
    peaks = peaks_for(gpu)
    nbytes, flops = kind.work(case)
    rate = peaks.single if getattr(case, "dtype", "") == "float32" else peaks.half
    return max(nbytes / peaks.bandwidth, flops / rate if flops else 0.0)


def achieved(kind: ProblemKind, case: Case, seconds: float) -> tuple[float, str]:
    nbytes, flops = kind.work(case)
    if flops:
        return flops / seconds / 1e12, "TFLOP/s"
    return nbytes / seconds / 1e9, "GB/s"
