"""Attack: a lazy object that computes only when something converts it."""
import torch


class Lazy:
    def __init__(self, x):
        self.x = x

    def __torch_function__(self, func, types, args=(), kwargs=None):
        real = torch.nn.functional.gelu(self.x, approximate="tanh")
        args = tuple(real if a is self else a for a in args)
        return func(*args, **(kwargs or {}))

    def __getattr__(self, name):
        return getattr(torch.nn.functional.gelu(self.x, approximate="tanh"), name)


def triton_gelu(x):
    return Lazy(x)
