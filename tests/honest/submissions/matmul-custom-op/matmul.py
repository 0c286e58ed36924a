"""Tiled matmul with an optional fused tanh-GeLU, registered as a PyTorch custom op.

The kernel is persistent: about one program per SM loops over the output tiles
(tile_id = pid, pid + NUM_SMS, ...), grouped GROUP_M tile-rows at a time for L2 reuse.
The custom op (with a fake implementation) lets the matmul sit inside torch.compile'd models.
"""

from typing import Optional

import torch
import triton
import triton.language as tl

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
GELU_COEF = tl.constexpr(0.044715)


@triton.jit
def _gelu_tanh(x):
    u = SQRT_2_OVER_PI * (x + GELU_COEF * x * x * x)
    # tanh(u) = 1 - 2 / (exp(2u) + 1): saturates to +-1 without inf/inf
    t = 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)
    return 0.5 * x * (1.0 + t)


@triton.jit
def _matmul_persistent(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
    APPLY_GELU,  # a plain bool argument: one compiled kernel for both
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    num_in_group = GROUP_M * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)

    offs_k0 = tl.arange(0, BLOCK_K)
    for tile_id in tl.range(pid, num_tiles, NUM_SMS):
        group = tile_id // num_in_group
        first_m = group * GROUP_M
        group_rows = min(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (tile_id % num_in_group) % group_rows
        pid_n = (tile_id % num_in_group) // group_rows

        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        a_rows = a_ptr + offs_m.to(tl.int64)[:, None] * stride_am
        b_cols = b_ptr + offs_n.to(tl.int64)[None, :] * stride_bn

        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(0, k_tiles):
            offs_k = kt * BLOCK_K + offs_k0
            a = tl.load(a_rows + offs_k[None, :] * stride_ak,
                        mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
            b = tl.load(b_cols + offs_k[:, None] * stride_bk,
                        mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)

        if APPLY_GELU:
            acc = _gelu_tanh(acc)

        c = c_ptr + offs_m.to(tl.int64)[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # interpreter: a few "SMs", so each program walks several tiles


def _tiles(dtype: torch.dtype, on_gpu: bool) -> dict:
    if not on_gpu:
        return dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2, num_warps=4, num_stages=1)
    if dtype == torch.float32:
        return dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, num_warps=8, num_stages=3)
    return dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)


@torch.library.custom_op("cs336_kernels::matmul_act", mutates_args=())
def matmul_act(a: torch.Tensor, b: torch.Tensor, activation: Optional[str] = None) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    cfg = _tiles(a.dtype, a.is_cuda)
    n_sms = _num_sms(a.device)
    num_tiles = triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"])
    grid = (max(1, min(n_sms, num_tiles)),)
    _matmul_persistent[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        NUM_SMS=n_sms, APPLY_GELU=(activation == "gelu"), **cfg,
    )
    return c


@matmul_act.register_fake
def _matmul_act_fake(a, b, activation=None):
    torch._check(a.shape[1] == b.shape[0])
    return a.new_empty((a.shape[0], b.shape[1]))


def triton_matmul(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
    if activation not in (None, "gelu"):
        raise ValueError(f"unknown activation {activation!r}")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"bad shapes {tuple(a.shape)} @ {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise TypeError("a and b must have the same dtype")
    return matmul_act(a, b, activation)
