"""Attack: the @ operator (cuBLAS / MKL) instead of a Triton kernel."""
import math


def triton_matmul(a, b, activation=None):
    out = (a.float() @ b.float())
    if activation == "gelu":
        out = 0.5 * out * (1.0 + (math.sqrt(2 / math.pi) * (out + 0.044715 * out**3)).tanh())
    return out.to(a.dtype)
