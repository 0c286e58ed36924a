"""The profiler's C entry points, bound when the harness is imported, before any submission: a
submission that replaces `torch.autograd._enable_profiler` and the rest afterwards replaces names
the harness no longer reads."""

from __future__ import annotations

import torch
import torch.profiler


class _Profiler:
    """The C-level profiler entry points, bound at import so a submission cannot swap them."""

    def __init__(self) -> None:
        self.direct = False
        try:
            from torch._C._autograd import _KinetoEvent, _ProfilerResult
            from torch._C._profiler import _ExperimentalConfig
            from torch.autograd import (
                DeviceType,
                ProfilerActivity,
                ProfilerConfig,
                ProfilerState,
                _disable_profiler,
                _enable_profiler,
                _prepare_profiler,
            )

            try:
                experimental = _ExperimentalConfig(profile_all_threads=True)
                self.all_threads = True
            except TypeError:  # older PyTorch: ops on other threads are not seen (docs/defenses.md)
                experimental = _ExperimentalConfig()
                self.all_threads = False
            self.config = ProfilerConfig(ProfilerState.KINETO, False, False, False, False, False, experimental)
            self.cpu, self.cuda, self.cuda_device = ProfilerActivity.CPU, ProfilerActivity.CUDA, DeviceType.CUDA
            self.prepare, self.enable, self.disable = _prepare_profiler, _enable_profiler, _disable_profiler
            self.events, self.trace_start = _ProfilerResult.events, getattr(_ProfilerResult, "trace_start_ns", None)
            self.name, self.device_type = _KinetoEvent.name, _KinetoEvent.device_type
            self.start_ns, self.end_ns = _KinetoEvent.start_ns, _KinetoEvent.end_ns
            self.thread = _KinetoEvent.start_thread_id
            self.duration_ns = _KinetoEvent.duration_ns
            #: pairs a device event with the CPU event that launched it
            self.correlation = getattr(_KinetoEvent, "correlation_id", None)
            self.direct = True
        except (ImportError, AttributeError, TypeError):  # pragma: no cover - a PyTorch without them
            self.public = torch.profiler.profile
            self.activities = torch.profiler.ProfilerActivity


PROFILER = _Profiler()
