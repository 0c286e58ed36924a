"""Attack: stop the profiler, run the PyTorch op, start a new profiling session."""
import torch
import triton
import triton.language as tl


@triton.jit
def _token(p):
    tl.store(p, tl.load(p))


def _token_launch(device):
    _token[(1,)](torch.zeros(1, device=device))

from torch.autograd import ProfilerActivity, ProfilerConfig, ProfilerState, _disable_profiler, _enable_profiler, _prepare_profiler
from torch._C._profiler import _ExperimentalConfig


def triton_gelu(x):
    _token_launch(x.device)
    _disable_profiler()
    out = torch.nn.functional.gelu(x, approximate="tanh")
    config = ProfilerConfig(ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig(profile_all_threads=True))
    _prepare_profiler(config, {ProfilerActivity.CPU})
    _enable_profiler(config, {ProfilerActivity.CPU})
    return out
