"""Attack: the PyTorch op on another thread, where a per-thread profiler would not see it."""
import threading
import torch
import triton
import triton.language as tl


@triton.jit
def _token(p):
    tl.store(p, tl.load(p))


def _token_launch(device):
    _token[(1,)](torch.zeros(1, device=device))


def triton_gelu(x):
    _token_launch(x.device)
    box = []
    worker = threading.Thread(target=lambda: box.append(torch.nn.functional.gelu(x, approximate="tanh")))
    worker.start()
    worker.join()
    return box[0]
