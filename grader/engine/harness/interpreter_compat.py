"""Standard Triton under the interpreter: `@triton.autotune` picks a config without timing.

Triton's autotuner times every config with the active GPU driver's benchmarker. Under
`TRITON_INTERPRET=1` on a machine without a GPU there is no driver, so every autotuned kernel
fails with "0 active drivers" before it runs: a student following the lectures would lose every
CPU case for a decorator the write-up allows. Timing would mean nothing in the interpreter anyway,
so here the choice is made without timing, deterministically: the first config that survives the
kernel's own pruning (`prune_configs_by`), the same on every machine and every run.
`restore_value`, `reset_to_zero` and `pre_hook` keep their meaning: no config is run while
choosing, and the reset Triton does after choosing still happens. `@triton.heuristics` needs
nothing (it computes meta-parameters from the arguments, no driver involved).

The interpreter also differs from the GPU compiler in ways that fail correct kernels on CPU only;
each is mended here so that a kernel the GPU runs runs here too (the write-up's "On a CPU"):

- libdevice (`from triton.language.extra import libdevice`, or its `cuda` module): the
  interpreter has no extern calls, and the generic module's functions are stubs the GPU compiler
  replaces. Here each runs as the NumPy function of the same name (`__nv_tanhf` -> `np.tanh`).
- one-instruction `tl.inline_asm_elementwise` of the common approximate PTX functions
  (`tanh.approx.f32 $0, $1;` and the like), as their NumPy functions; other assembly still fails.
- the loop variable of `range` / `tl.range` is a scalar tensor on the GPU (`i.to(tl.int64)`
  works there) but a Python int in the interpreter; here it is a scalar tensor too.
- `torch.library.wrap_triton` refuses the interpreter's function objects; here it lets them run.
- `tl.maximum` / `tl.minimum` (NaN not propagated, the default) return the other operand for a NaN
  on a GPU (PTX max/min) but NaN in the interpreter; here they follow the GPU, as the
  interpreter's own `tl.max` / `tl.min` reductions already do.
- a `@triton.jit` helper called from a kernel left triton.language patched for the interpreter
  (a launch puts it back, a helper call did not), which broke the GPU compile of every kernel
  after it (`grader.engine.harness.gpu_compile`); here a helper's call puts it back too.
- a load or store outside every tensor of the launch raises, with a hint, instead of corrupting
  or aborting the process (`grader.engine.harness.interpreter_bounds`).
- bfloat16 arithmetic, comparisons, reductions, casts and scalar constants (`x * 0.5`) compute on
  the values, not on the raw 16-bit patterns the interpreter holds (`grader.engine.harness.interpreter_bf16`).

Installed by the grader's worker before a submission is imported and by the handout's tests, in
the interpreter only; a GPU run is never touched.
"""

from __future__ import annotations

import ast
import inspect
import math
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from grader.engine.harness import gpu_compile, interpreter_bf16, interpreter_bounds, kernel_rules

_INSTALLED = False


def interpreting() -> bool:
    try:
        from triton import knobs

        return bool(knobs.runtime.interpret)
    except (ImportError, AttributeError):  # pragma: no cover - an older Triton without knobs
        return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def untimed_bench(kernel_call: Callable[[], Any], quantiles: Sequence[float] | None = None, **_: Any) -> list[float]:
    """A benchmarker that runs nothing and ranks every config equal, `min` keeping the first, but
    for a config the graded GPU would refuse for its resources (more shared memory than an H200
    has): Triton's autotuner on a GPU scores that one as never fastest, and so does this one, so a
    tutorial's config list with big tiles first picks on a CPU what it picks on the GPU."""
    try:
        refused = any(map(gpu_compile.out_of_resources, gpu_compile.probe(kernel_call)))
    except Exception:  # noqa: BLE001 - a hook that fails without a GPU: ranked as before, equal
        refused = False
    return [math.inf if refused else 0.0] * (len(quantiles) if quantiles else 1)


def install() -> bool:
    """Make the autotuner choose without timing when the interpreter is on; True if installed."""
    global _INSTALLED
    if _INSTALLED:
        return True
    if not interpreting():
        return False
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # pragma: no cover - Triton without an autotuner module
        return False
    # `do_bench` is a cached property on Triton 3.x; a plain property wins over any per-instance
    # benchmarker (a `do_bench=` argument would also need a GPU)
    Autotuner.do_bench = property(lambda self: untimed_bench)  # type: ignore[assignment,method-assign]
    bf16, bounds = interpreter_bf16.install, interpreter_bounds.install
    mends = (
        _extern_calls,
        _libdevice_modules,
        _loop_indices,
        _wrap_triton,
        bf16,
        bounds,
        _nan_min_max,
        _device_calls,
        _bool_arguments,
        _math_methods,
    )
    for mend in mends:
        try:
            mend()
        except (ImportError, AttributeError):  # pragma: no cover - a Triton or torch laid out otherwise
            pass
    _INSTALLED = True
    return True


# -- libdevice and inline assembly ------------------------------------------------------------------

_SAME_NAME = (
    "tanh exp exp2 expm1 log log2 log10 log1p sqrt sin cos tan sinh cosh arcsin arccos arctan arcsinh arccosh "
    "arctanh floor ceil trunc rint copysign hypot fmod isnan isinf signbit cbrt"
)
_NUMPY: dict[str, Callable[..., Any]] = {name: getattr(np, name) for name in _SAME_NAME.split()}
_NUMPY.update(
    {
        "asin": _NUMPY["arcsin"],
        "acos": _NUMPY["arccos"],
        "atan": _NUMPY["arctan"],
        "asinh": _NUMPY["arcsinh"],
        "acosh": _NUMPY["arccosh"],
        "atanh": _NUMPY["arctanh"],
        "round": lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x),  # half away from zero, as C's round
        "nearbyint": _NUMPY["rint"],
        "exp10": lambda x: np.power(np.asarray(10.0, x.dtype), x),
        "rsqrt": lambda x: 1 / np.sqrt(x),
        "rcp": lambda x: 1 / x,
        "abs": np.abs,
        "fabs": np.abs,
        "pow": np.power,
        "powi": np.power,
        "fmin": np.fmin,
        "fmax": np.fmax,
        "min": np.minimum,
        "max": np.maximum,
        "atan2": np.arctan2,
        "fma": lambda x, y, z: x * y + z,
        "div": lambda x, y: x / y,
        "fdiv": lambda x, y: x / y,
        "fadd": lambda x, y: x + y,
        "fsub": lambda x, y: x - y,
        "fmul": lambda x, y: x * y,
        "fsqrt": np.sqrt,
        "frcp": lambda x: 1 / x,
        "frsqrt": lambda x: 1 / np.sqrt(x),
        "ldexp": np.ldexp,
        "erf": np.vectorize(math.erf, otypes=[np.float64]),
        "erfc": np.vectorize(math.erfc, otypes=[np.float64]),
        "saturate": lambda x: np.clip(x, 0, 1),
        "normcdf": np.vectorize(lambda x: 0.5 * math.erfc(-x / math.sqrt(2.0)), otypes=[np.float64]),
        "sinpi": lambda x: np.sin(np.pi * x),
        "cospi": lambda x: np.cos(np.pi * x),
        "rcbrt": lambda x: 1 / np.cbrt(x),
        "nextafter": np.nextafter,
        "remainder": lambda x, y: x - np.rint(x / y) * y,  # IEEE's: the quotient rounded to nearest even
        "dividef": lambda x, y: x / y,
        "isfinite": np.isfinite,
        "finitef": np.isfinite,
    }
)


def _numpy_function(symbol: str) -> Callable[..., Any] | None:
    """The NumPy function for a libdevice symbol: `__nv_tanhf`, `__nv_fast_expf`, `__nv_fdiv_rn`..."""
    name = symbol.removeprefix("__nv_").removeprefix("fast_")
    name = re.sub(r"_(rn|rz|rd|ru)$", "", name)
    for candidate in (name, name[:-1] if name.endswith("f") else None, name.removesuffix("f_ieee")):
        if candidate and candidate in _NUMPY:
            return _NUMPY[candidate]
    return None


def _result(data: Any, like: Any, dtype: Any) -> Any:
    from triton.runtime.interpreter import TensorHandle, _get_np_dtype

    scalar = getattr(dtype, "scalar", dtype)
    if not hasattr(scalar, "primitive_bitwidth"):
        scalar = like.dtype.scalar
    return TensorHandle(np.asarray(data).astype(_get_np_dtype(scalar)), scalar)


class _Results:
    """What `tl.inline_asm_elementwise` reads its one result from (`get_result(0)`)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def get_result(self, index: int) -> Any:
        return self.handle


def _extern_calls() -> None:
    from triton.runtime.interpreter import InterpreterBuilder

    def create_extern_elementwise(
        self: Any, lib_name: str, lib_path: str, symbol: str, args: list, ret: Any, pure: bool
    ) -> Any:
        fn = _numpy_function(symbol)
        if fn is None:
            raise NotImplementedError(
                f"libdevice's {symbol} has no NumPy counterpart in the grader's interpreter support: it runs on a "
                f"GPU only; under the interpreter (CPU) write it with triton.language functions"
            )
        with np.errstate(all="ignore"):
            return _result(fn(*(a.data for a in args)), args[0], ret)

    def create_inline_asm(
        self: Any, asm: str, constraints: str, values: list, types: Any, pure: bool, pack: int
    ) -> Any:
        match = re.fullmatch(r"\s*([a-z0-9]+)\.approx(?:\.ftz)?\.f32\s+\$0\s*,\s*\$1\s*;?\s*", asm)
        op = {"ex2": "exp2", "lg2": "log2"}.get(match.group(1), match.group(1)) if match else None
        if op is None or op not in _NUMPY or len(values) != 1:
            raise NotImplementedError(
                f"inline assembly {asm.strip()!r} cannot run under Triton's interpreter (CPU): it runs on a GPU "
                f"only (one-instruction tanh/ex2/lg2/rcp/rsqrt/sqrt/sin/cos .approx.f32 do run here)"
            )
        with np.errstate(all="ignore"):
            data = _NUMPY[op](values[0].data.astype(np.float32))
        return _Results(_result(data, values[0], types[0] if isinstance(types, (list, tuple)) else types))

    InterpreterBuilder.create_extern_elementwise = create_extern_elementwise  # type: ignore[method-assign]
    InterpreterBuilder.create_inline_asm = create_inline_asm  # type: ignore[method-assign]


def _libdevice_modules() -> None:
    """Both libdevice modules' functions, bound to the interpreter's semantic (as tl's are per launch)."""
    import triton.language.extra.cuda.libdevice as cuda
    import triton.language.extra.libdevice as generic
    from triton.runtime.interpreter import InterpreterBuilder, interpreter_semantic

    def bound(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            # the GPU compiler (grader.engine.harness.gpu_compile) passes its own semantic: keep it
            semantic = kwargs.pop("_semantic", None)
            if semantic is None or isinstance(getattr(semantic, "builder", None), InterpreterBuilder):
                semantic = interpreter_semantic
            return fn(*args, **kwargs, _semantic=semantic)

        call.__name__ = call.__qualname__ = fn.__name__
        call.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
        call.__triton_builtin__ = True  # type: ignore[attr-defined]
        kernel_rules.trust(call)  # a builtin is Triton's by identity: this stand-in counts as libdevice's
        return call

    for name in dir(cuda):
        fn = getattr(cuda, name)
        if callable(fn) and getattr(fn, "__triton_builtin__", False):
            wrapped = bound(fn)
            setattr(cuda, name, wrapped)
            if hasattr(generic, name):
                setattr(generic, name, wrapped)


# -- casts --------------------------------------------------------------------------------------


def _nan_min_max() -> None:
    from triton.runtime.interpreter import InterpreterBuilder

    InterpreterBuilder.create_maxnumf = lambda self, lhs, rhs: self.binary_op(lhs, rhs, np.fmax)  # type: ignore[method-assign]
    InterpreterBuilder.create_minnumf = lambda self, lhs, rhs: self.binary_op(lhs, rhs, np.fmin)  # type: ignore[method-assign]

    def clamp(self: Any, arg: Any, lo: Any, hi: Any, propagate_nans: Any) -> Any:
        # the GPU clamps with max then min, which ignore a NaN unless NaNs are asked to propagate
        ignore = int(getattr(propagate_nans, "value", propagate_nans)) == 0
        return self.ternary_op(arg, lo, hi, (lambda x, a, b: np.fmin(np.fmax(x, a), b)) if ignore else np.clip)

    InterpreterBuilder.create_clampf = clamp  # type: ignore[method-assign]


def _device_calls() -> None:
    """A `@triton.jit` helper called from a kernel patches triton.language for the interpreter and
    never puts it back (a launch does): after the first helper call, `tl.tensor.__mul__` and the
    rest stay bound to the interpreter, and compiling any kernel for the GPU afterwards fails. Here
    a helper's call restores what it patched, as a launch does."""
    from triton.runtime import interpreter

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        scope = interpreter._patch_lang(self.fn)
        try:
            return self.rewrite()(*args, **kwargs)
        except Exception as e:
            raise interpreter.InterpreterError(repr(e)) from e
        finally:
            scope.restore()

    interpreter.InterpretedFunction.__call__ = __call__  # type: ignore[method-assign]


def _bool_arguments() -> None:
    """A Python bool passed to a kernel parameter that is not a constexpr (`kernel[grid](..., causal)`)
    is an `i1` scalar on a GPU, a runtime branch there; Triton 3.6's interpreter typed it `i1` and
    stored it as int32, which it then refused ("itemsize (32 bits) exceeds ... int1")."""
    import triton.language as tl
    from triton.runtime import interpreter

    convert = interpreter._implicit_cvt

    def _implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, bool):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.bool_), tl.int1), tl.int1)
        return convert(arg)

    kernel_rules.trust(_implicit_cvt)  # the interpreter copies its globals into Triton's language modules
    interpreter._implicit_cvt = _implicit_cvt


def _math_methods() -> None:
    """`x.exp()`, `x.exp2()`, `x.log()`, `x.sqrt()` and the other `tl.math` functions Triton also
    makes tensor methods compile on a GPU; the interpreter patches only methods marked as builtins,
    and these are not, so it called them without their semantic ("'NoneType' object has no
    attribute 'to_tensor'"). Each becomes a builtin that calls `tl.math`'s function, which the
    interpreter does patch (and which the GPU compiler calls the same way)."""
    import triton.language as tl

    for name, function in vars(tl.math).items():
        method = getattr(tl.tensor, name, None)
        if not callable(function) or method is None or tl.core.is_builtin(method) or not tl.core.is_builtin(function):
            continue

        def call(self: Any, *args: Any, _name: str = name, _semantic: Any = None, **kwargs: Any) -> Any:
            return getattr(tl.math, _name)(self, *args, _semantic=_semantic, **kwargs)

        call.__name__ = call.__qualname__ = name
        setattr(call, tl.core.TRITON_BUILTIN, True)
        kernel_rules.trust(call)  # as Triton's own method (by identity)
        setattr(tl.tensor, name, call)


# -- loop variables ------------------------------------------------------------------------------


def _is_range(node: ast.expr) -> bool:
    """`range(...)` or `<module>.range(...)` (`tl.range`); not `static_range`, a constexpr on a GPU too."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    named = isinstance(func, ast.Name) and func.id == "range"
    return named or (isinstance(func, ast.Attribute) and func.attr == "range")


def _loop_indices() -> None:
    from triton.runtime import interpreter

    class LoopIndices(interpreter.ASTTransformer):  # type: ignore[misc,name-defined]
        """The interpreter's rewrite, plus: `for i in range(...)` makes `i` a scalar tensor, as on a GPU."""

        def visit_For(self, node: ast.For) -> ast.For:
            self.generic_visit(node)
            if isinstance(node.target, ast.Name) and _is_range(node.iter):
                name = node.target.id
                as_tensor = ast.Assign(
                    targets=[ast.Name(id=name, ctx=ast.Store())],
                    value=ast.Call(
                        func=ast.Attribute(
                            value=ast.Name(id="interpreter_semantic", ctx=ast.Load()), attr="to_tensor", ctx=ast.Load()
                        ),
                        args=[ast.Name(id=name, ctx=ast.Load()), ast.Constant(value=False)],
                        keywords=[],
                    ),
                )
                node.body.insert(0, ast.fix_missing_locations(ast.copy_location(as_tensor, node.body[0])))
            return node

    interpreter.FunctionRewriter.ast_transformer = LoopIndices()


# -- torch.library --------------------------------------------------------------------------------


def _wrap_triton() -> None:
    import torch._library.triton as library_triton
    import torch.library
    from triton.runtime.interpreter import InterpretedFunction

    original = library_triton.wrap_triton

    def wrap_triton(triton_kernel: Any) -> Any:
        """As torch's, and an interpreted kernel runs as itself (there is nothing to trace on CPU)."""
        if isinstance(triton_kernel, InterpretedFunction):
            return triton_kernel
        return original(triton_kernel)

    library_triton.wrap_triton = wrap_triton
    torch.library.wrap_triton = wrap_triton
