"""What a timed round's refill costs: PyTorch's `normal_` against grader/problems/fill.py's kernel.

Each shape is an input verified timing refills before every round (docs/performance.md).

    python benchmarks/fill_speed.py
"""

from __future__ import annotations

import torch
from triton.testing import do_bench

from grader.problems import fill

SHAPES = [  # (what, numel, dtype)
    ("gelu 16384² fp32", 16384 * 16384, torch.float32),
    ("gelu 16384² bf16", 16384 * 16384, torch.bfloat16),
    ("softmax 1024x262144 fp32", 1024 * 262144, torch.float32),
    ("matmul A 8192x4096 bf16", 8192 * 4096, torch.bfloat16),
    ("matmul B 4096² bf16", 4096 * 4096, torch.bfloat16),
]


def main() -> None:
    gen = torch.Generator(device="cuda")
    print("| input | values | normal_ ms | fill ms | fill G values/s | write GB/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for what, n, dtype in SHAPES:
        t = torch.empty(n, dtype=dtype, device="cuda")
        torch_ms = do_bench(lambda: t.normal_(generator=gen.manual_seed(1)), warmup=50, rep=300)
        fill_ms = do_bench(lambda: fill.normal_([t], gen.manual_seed(1)), warmup=50, rep=300)
        again = t.clone()
        fill.normal_([again], gen.manual_seed(1))
        fill.normal_([t], gen.manual_seed(1))
        assert torch.equal(t, again), "the fill is not deterministic"
        assert abs(t.float().std().item() - 1.0) < 0.01 and abs(t.float().mean().item()) < 0.01
        print(f"| {what} | {n / 1e6:.0f} M | {torch_ms:.3f} | {fill_ms:.3f} | {n / fill_ms / 1e6:.0f} | {n * t.element_size() / fill_ms / 1e6:.0f} |")


if __name__ == "__main__":
    main()
