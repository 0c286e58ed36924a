"""Example submission, cheating: calls PyTorch's GeLU instead of writing a kernel."""

import torch


def triton_gelu(x):
    return torch.nn.functional.gelu(x, approximate="tanh")
