"""PyTorch's GeLU captured in a CUDA graph at import, for the benchmark shapes (they are public),
replayed in every timed call beside a token Triton launch; its Triton kernel everywhere else.

A replayed graph runs kernels that were captured before the call: no aten op of the call stands
for them, and Triton's launcher sees only the token. GRAPH is the switch: the honest variant
sets it to False and computes every call with its kernel.
"""

import torch

from correct_gelu import triton_gelu as _triton_gelu  # the correct example's kernel, copied in by the corpus test

GRAPH = True
_graphs: dict[tuple[tuple[int, ...], torch.dtype], tuple[torch.cuda.CUDAGraph, torch.Tensor, torch.Tensor]] = {}


def _capture(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    static_in = torch.zeros(shape, dtype=dtype, device="cuda")
    torch.nn.functional.gelu(static_in, approximate="tanh")  # warm up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = torch.nn.functional.gelu(static_in, approximate="tanh")
    _graphs[(shape, dtype)] = (graph, static_in, static_out)


if GRAPH and torch.cuda.is_available():
    for _dtype in (torch.float32, torch.bfloat16):
        _capture((16384, 16384), _dtype)


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    captured = _graphs.get((tuple(x.shape), x.dtype))
    if captured is None or not x.is_contiguous():
        return _triton_gelu(x)
    graph, static_in, static_out = captured
    static_in.copy_(x)
    _triton_gelu(x.reshape(-1)[:1])  # a token launch: the launch count stays one per call
    graph.replay()
    return static_out.clone()
