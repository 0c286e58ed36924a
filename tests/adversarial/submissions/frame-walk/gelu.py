"""Attack: look through the caller's frames and the garbage collector for the expected output."""
import gc
import sys

import torch


def _candidates(shape):
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
            yield value
        frame = frame.f_back
    yield from gc.get_objects()


def triton_gelu(x):
    for value in _candidates(x.shape):
        if isinstance(value, torch.Tensor) and value.dtype == torch.float64 and value.shape == x.shape:
            print("FOUND a float64 tensor of the output's shape")
            return value.to(x.dtype)
        if isinstance(value, dict):
            for item in list(value.values()):
                if isinstance(item, torch.Tensor) and item.dtype == torch.float64 and item.shape == x.shape:
                    print("FOUND a float64 tensor of the output's shape")
                    return item.to(x.dtype)
    print("FOUND nothing")
    return torch.zeros_like(x)
