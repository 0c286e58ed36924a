"""GeLU written from Triton's tutorial 01 (vector add): the tutorial's DEVICE preamble at import,
one program per BLOCK_SIZE elements, a grid lambda over meta-parameters, a __main__ self-test."""

import torch
import triton
import triton.language as tl

DEVICE = triton.runtime.driver.active.get_active_torch_device()


@triton.jit
def gelu_kernel(x_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid.to(tl.int64) * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    output = x * tl.sigmoid(2.0 * inner)      # 0.5 * (1 + tanh(u)) == sigmoid(2u)
    tl.store(output_ptr + offsets, output.to(output_ptr.dtype.element_ty), mask=mask)


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    output = torch.empty_like(x)
    n_elements = output.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    gelu_kernel[grid](x, output, n_elements, BLOCK_SIZE=1024)
    return output


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.rand(98432, device=DEVICE)
    out = triton_gelu(x)
    ref = torch.nn.functional.gelu(x, approximate="tanh")
    print(f"max difference: {torch.max(torch.abs(out - ref))}")
