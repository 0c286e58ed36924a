"""Attack: a segmentation fault through ctypes inside the call."""
import ctypes


def triton_gelu(x):
    return ctypes.string_at(0)
