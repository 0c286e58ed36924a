"""Attack (a known hole): the watch's wrappers keep the C functions they wrap in their closures;
this one takes the original torch._C._get_operation_overload out of its wrapper's closure and runs
aten::gelu's kernel with its op_dk, which nothing notes."""

import torch
from correct_gelu import triton_gelu as _correct

_wrapper = torch._C._get_operation_overload
_original = next(
    c.cell_contents for c in (_wrapper.__closure__ or ()) if callable(c.cell_contents) and c.cell_contents is not _wrapper
)
_OP_DK = _original("aten::gelu", "")[1]


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    _correct(x.reshape(-1)[:1])  # "a Triton kernel ran"
    key = torch._C.DispatchKey.CUDA if x.is_cuda else torch._C.DispatchKey.CPU
    return _OP_DK(key, x, approximate="tanh")
