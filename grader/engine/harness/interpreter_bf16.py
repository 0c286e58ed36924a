"""bfloat16 under Triton's interpreter, computed as a GPU computes it.

The interpreter holds a bfloat16 tensor as its raw 16-bit patterns (NumPy has no bfloat16), and
runs every operation on whatever NumPy array it holds: `x * x + x` on bfloat16 multiplied and
added the bit patterns as integers, without any error, and a comparison or `tl.max` ordered
negative numbers after positive ones. A Python number combined with a bfloat16 tensor
(`x * 0.5`, `tl.where(x > 0, x, -float("inf"))`) failed outright: the compiled path's builder
makes a scalar constant of any dtype with `get_<dtype>`, the interpreter's had no `get_bf16`.
The class of gaps is "a floating dtype the interpreter stores as integers"; of those, bfloat16
is the one a GPU computes with (the fp8 types have no scalar constants on the GPU either).

Here every floating operation with a bfloat16 operand computes in float32 and rounds the result
to bfloat16 (round to nearest even), as sm_90 does for a bfloat16 add, multiply, fma or
conversion, and as Triton does for the math functions it computes in float32 (exp, log, sqrt...);
comparisons, `tl.maximum` and reductions order the values as numbers. Two differences remain: a
bfloat16 `tl.sum` adds in float32 and rounds once (a GPU rounds at each step of its tree), and a
`tl.dot` of bfloat16 operands multiplies their exact values in float32, as a tensor core does.

Installed by `interpreter_compat.install` (interpreter only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def to_float32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> their float32 values (exact)."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def to_bfloat16(values: Any) -> np.ndarray:
    """float values -> bfloat16 bit patterns, rounded to nearest even; NaN stays a (quiet) NaN."""
    f = np.asarray(values, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        rounded = np.where(nan, ((bits >> 16) | 0x0040).astype(np.uint16), rounded)
    return rounded


def install() -> None:
    import triton.language as tl
    from triton.runtime import interpreter
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle

    bf16 = tl.bfloat16

    def is_bf16(handle: Any) -> bool:
        return getattr(handle.dtype, "scalar", None) == bf16

    def values(handle: Any) -> np.ndarray:
        return to_float32(handle.data) if is_bf16(handle) else handle.data

    def result(data: np.ndarray, dtype: Any) -> Any:
        if data.dtype == np.bool_:  # a comparison: the interpreter keeps the operand's dtype beside it
            return TensorHandle(data, dtype)
        return TensorHandle(to_bfloat16(data), bf16)

    B = InterpreterBuilder
    binary_op, ternary_op, unary_op = B.binary_op, B.ternary_op, B.unary_op

    def binary(self: Any, lhs: Any, rhs: Any, op: Callable[..., Any]) -> Any:
        if not (is_bf16(lhs) or is_bf16(rhs)):
            return binary_op(self, lhs, rhs, op)
        with np.errstate(all="ignore"):
            return result(op(values(lhs), values(rhs)), lhs.dtype.scalar)

    def ternary(self: Any, a: Any, b: Any, c: Any, op: Callable[..., Any]) -> Any:
        if op is np.where or not any(is_bf16(h) for h in (a, b, c)):  # a select moves bits: nothing to compute
            return ternary_op(self, a, b, c, op)
        return result(op(values(a), values(b), values(c)), c.dtype.scalar)

    def unary(self: Any, arg: Any, op: Callable[..., Any]) -> Any:
        if not is_bf16(arg):
            return unary_op(self, arg, op)
        with np.errstate(all="ignore"):
            return result(op(values(arg)), bf16)

    def elementwise(original: Callable[..., Any], fn: Callable[..., Any]) -> Callable[..., Any]:
        def method(self: Any, *args: Any) -> Any:
            if not any(is_bf16(a) for a in args):
                return original(self, *args)
            with np.errstate(all="ignore"):
                return result(fn(*(values(a) for a in args)), bf16)

        return method

    def get_bf16(self: Any, value: float) -> Any:
        return TensorHandle(to_bfloat16(np.array([value], dtype=np.float32)), bf16)

    def cast_impl(original: Callable[..., Any]) -> Callable[..., Any]:
        def cast(self: Any, src: Any, dst_type: Any) -> Any:
            """Into or out of bfloat16 through float32, rounding to nearest even (the interpreter truncated)."""
            src_ty, dst_ty = src.dtype.scalar, dst_type.scalar
            if src_ty == dst_ty or bf16 not in (src_ty, dst_ty):
                return original(self, src, dst_type)
            if dst_ty == bf16:
                as_f32 = src.data if src_ty == tl.float32 else original(self, src, tl.float32).data
                return TensorHandle(to_bfloat16(as_f32), bf16)
            return original(self, TensorHandle(to_float32(src.data), tl.float32), dst_type)

        return cast

    def dot(original: Callable[..., Any]) -> Callable[..., Any]:
        def create_dot(self: Any, a: Any, b: Any, d: Any, *rest: Any) -> Any:
            if is_bf16(a) or is_bf16(b):
                a = TensorHandle(values(a).astype(np.float32), tl.float32)
                b = TensorHandle(values(b).astype(np.float32), tl.float32)
            return original(self, a, b, d, *rest)

        return create_dot

    B.binary_op, B.ternary_op, B.unary_op = binary, ternary, unary  # type: ignore[method-assign]
    B.create_fma = elementwise(B.create_fma, lambda x, y, z: x * y + z)  # type: ignore[method-assign]
    B.create_rsqrt = elementwise(B.create_rsqrt, lambda x: 1 / np.sqrt(x))  # type: ignore[method-assign]
    B.create_erf = elementwise(B.create_erf, interpreter.np_erf_fp32)  # type: ignore[method-assign]
    B.get_bf16 = get_bf16  # type: ignore[attr-defined]
    B.cast_impl = cast_impl(B.cast_impl)  # type: ignore[method-assign]
    B.create_dot = dot(B.create_dot)  # type: ignore[method-assign]
    _reductions(interpreter, bf16)


def _reductions(interpreter: Any, bf16: Any) -> None:
    """`tl.max`, `tl.min`, `tl.sum`, `tl.cumsum`... of bfloat16: on the values, not the bit patterns."""
    reduce_ops, scan_ops = interpreter.ReduceOps, interpreter.ScanOps

    def as_values(fn: Callable[..., Any]) -> Callable[..., Any]:
        def method(self: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
            tensor = input[0] if isinstance(input, tuple) else input
            if tensor.dtype.scalar != bf16:
                return fn(self, input, *args, **kwargs)
            handle = tensor.handle
            original = handle.data
            handle.data = to_float32(original)
            try:
                out = fn(self, input, *args, **kwargs)
            finally:
                handle.data = original
            return out

        return method

    # to_tensor casts a float32 result to bfloat16's storage type: round it instead
    to_tensor = reduce_ops.to_tensor

    def to_tensor_rounded(self: Any, ret: Any, dtype: Any) -> Any:
        if dtype.scalar == bf16 and np.asarray(ret).dtype.kind == "f":
            ret = to_bfloat16(ret) if np.ndim(ret) else to_bfloat16(np.asarray(ret)).item()
        return to_tensor(self, ret, dtype)

    interpreter.ReduceScanOpInterface.to_tensor = to_tensor_rounded
    for name in ("min_max", "sum"):
        setattr(reduce_ops, name, as_values(getattr(reduce_ops, name)))
    for name in ("cumsum", "cumprod"):
        setattr(scan_ops, name, as_values(getattr(scan_ops, name)))
