"""Matmul with split-K for fp32 (tf32 tensor cores), plain tiles otherwise.

Split-K: each K-slice program adds its partial tile into C with tl.atomic_add, so C has to start
at zero. The autotuner runs every config on the same C, so reset_to_zero=["c_ptr"] clears it
between configs. GeLU needs the full sum, so with the epilogue (and for 16-bit outputs, where
atomics would round every partial sum) only SPLIT_K = 1 configs are allowed.
"""

import torch
import triton
import triton.language as tl


def _split_only_when_safe(configs, named_args, **kwargs):
    c = named_args["c_ptr"]
    can_split = c.dtype == torch.float32 and not kwargs["APPLY_GELU"]
    kept = [cfg for cfg in configs if can_split or cfg.kwargs["SPLIT_K"] == 1]
    return kept


_CONFIGS = [
    # split-K configs first: tall K with few output tiles is where they help
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "SPLIT_K": 2}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "SPLIT_K": 4}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "SPLIT_K": 1}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 1}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "SPLIT_K": 1}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 1}, num_warps=4, num_stages=4),
]


@triton.autotune(configs=_CONFIGS, key=["M", "N", "K"], reset_to_zero=["c_ptr"],
                 prune_configs_by={"early_config_prune": _split_only_when_safe})
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  APPLY_GELU: tl.constexpr, FP32_IN: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  SPLIT_K: tl.constexpr):
    tile = tl.program_id(0)
    kslice = tl.program_id(1)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tm = tile // tiles_n
    tn = tile % tiles_n

    rm = tm * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tn * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = kslice * BLOCK_K + tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rm[:, None].to(tl.int64) * stride_am + rk[None, :] * stride_ak
    b_tile = b_ptr + rk[:, None] * stride_bk + rn[None, :].to(tl.int64) * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(kslice * BLOCK_K, K, BLOCK_K * SPLIT_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_tile, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_tile, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if FP32_IN:
            acc = tl.dot(a, b, acc, input_precision="tf32")
        else:
            acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K * SPLIT_K * stride_ak
        b_tile += BLOCK_K * SPLIT_K * stride_bk

    if APPLY_GELU:
        inner = 0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)
        # 0.5 * (1 + tanh(u)) == sigmoid(2u), which saturates cleanly
        acc = acc * tl.sigmoid(2.0 * inner)

    c_tile = c_ptr + rm[:, None].to(tl.int64) * stride_cm + rn[None, :] * stride_cn
    inside = (rm[:, None] < M) & (rn[None, :] < N)
    if SPLIT_K == 1:
        tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=inside)
    else:
        tl.atomic_add(c_tile, acc, mask=inside)


def triton_matmul(a, b, activation=None):
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"bad shapes {tuple(a.shape)} @ {tuple(b.shape)}")
    if activation not in (None, "gelu"):
        raise ValueError(f"unknown activation {activation!r}")
    M, K = a.shape
    N = b.shape[1]
    gelu = activation == "gelu"
    # split-K configs accumulate with atomics: C must start at zero for them
    if a.dtype == torch.float32 and not gelu:
        c = torch.zeros((M, N), device=a.device, dtype=torch.float32)
    else:
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]), meta["SPLIT_K"])

    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), APPLY_GELU=gelu, FP32_IN=a.dtype == torch.float32)
    return c
