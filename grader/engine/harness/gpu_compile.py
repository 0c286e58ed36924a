"""The GPU compiler's verdict on the kernels the interpreter runs: each launch compiled ahead of time.

Triton's interpreter executes Python: a kernel the GPU compiler refuses (a plain Python float read
inside `@triton.jit`: "Cannot access global variable"; a block past Triton's limit of 2**20
elements) runs and passes on a CPU, and earns nothing on the graded GPU. So under the interpreter
every launch is also compiled for the graded GPU (sm_90, the H200) with the launch's own
signature, constexprs, alignment and options: its hash first, as Triton's compile takes it (the
names a kernel may reference: a plain Python function is refused, "Unsupported function
referenced"), then Triton's front end and the NVIDIA backend's TritonGPU passes, then its
shared-memory allocation. No GPU, driver or `ptxas` is needed; registers are known only once a
driver loads the binary, so they are not checked here.

This module records facts (`protocol.GpuCompile`: the compiler's message, the shared memory the
kernel asks for); `grader.engine.judge.checks.gpu_compile_check` decides what they cost. Results are
cached per kernel and specialization: one compile per kernel variant per process.

Under the interpreter every `@triton.jit` function (Triton's own `tl.max`, `tl.sum` included) is
an `InterpretedFunction`, which the compiler does not know: each is compiled as a `JITFunction`
twin of the same Python function, and the code generator uses the twin wherever it meets one
(a global name, a module's attribute, a tensor method).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import triton.compiler.code_generator as code_generator
import triton.language as tl
from triton._C.libtriton import ir, nvidia, passes
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptx_version_from_options
from triton.compiler import ASTSource, make_backend
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import DependenciesFinder, JITFunction, create_function_from_signature

from grader.engine import protocol
from grader.engine.harness import kernel_rules
from grader.engine.spec import gpu_limits

#: the graded GPU: an NVIDIA H200, compute capability 9.0 (Triton's third field: threads per warp)
TARGET = GPUTarget("cuda", 90, 32)
#: the stages run after the front end, then only the shared-memory allocation of the next one
#: (lowering to LLVM IR whole doubled the cost of a compile: about 0.2 s of 0.4 s on a CPU core)
STAGES = ("ttir", "ttgir")
#: a compiler message longer than this is cut (a deep call chain repeats the source many times)
MAX_MESSAGE = 3000

_TWINS: dict[int, JITFunction] = {}
_CACHE: dict[Any, protocol.GpuCompile] = {}
#: the distinct compiles of the launches since `start()`: one call's
_SEEN: list[protocol.GpuCompile] = []


class _Twin(JITFunction):  # type: ignore[misc,type-arg]
    """A JITFunction whose globals show other `@triton.jit` functions as their twins too."""

    def get_capture_scope(self) -> dict[str, Any]:
        scope = super().get_capture_scope()
        return {k: twin(v) if isinstance(v, InterpretedFunction) else v for k, v in scope.items()}


def twin(interpreted: InterpretedFunction) -> JITFunction:
    """The JITFunction of an InterpretedFunction's Python function (one per function)."""
    key = id(interpreted.fn)
    if key not in _TWINS:
        _TWINS[key] = _Twin(interpreted.fn, **interpreted.kwargs)
    return _TWINS[key]


_get_attribute = code_generator.CodeGenerator.get_Attribute


def _tensor_methods() -> dict[str, InterpretedFunction]:
    """Triton's `x.sum()`-style methods: under the interpreter a wrapper around an InterpretedFunction."""
    found = {}
    for name, value in vars(tl.tensor).items():
        cells = getattr(value, "__closure__", None) or ()
        interpreted = [c.cell_contents for c in cells if isinstance(c.cell_contents, InterpretedFunction)]
        if interpreted:
            found[name] = interpreted[0]
    return found


_METHODS: dict[str, InterpretedFunction] = {}


def _get_attribute_twinned(self: Any, lhs: Any, attr: str) -> Any:
    """`module.kernel` or `tensor.method` found as an InterpretedFunction: its twin, bound as Triton binds."""
    if isinstance(lhs, tl.tensor) and attr in _METHODS:
        return code_generator.BoundJITMethod(lhs, twin(_METHODS[attr]))
    value = _get_attribute(self, lhs, attr)
    if isinstance(value, InterpretedFunction):
        value = twin(value)
        if code_generator._is_triton_value(lhs):
            return code_generator.BoundJITMethod(lhs, value)
    return value


#: Triton's `record_reference` as `install` found it (wrapped by `kernel_rules.install` before)
_RECORD_REFERENCE: list[Callable[..., Any]] = []


def _record_reference_twinned(self: Any, val: Any, *args: Any, **kwargs: Any) -> Any:
    """The kernel's hash, computed over the twins of the `@triton.jit` functions it uses."""
    return _RECORD_REFERENCE[0](self, twin(val) if isinstance(val, InterpretedFunction) else val, *args, **kwargs)


def specialization(kernel: InterpretedFunction, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """(source, options, key): what Triton's JIT would compile for this launch on the target GPU."""
    backend = make_backend(TARGET)
    fn = twin(kernel)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    key = (id(kernel.fn), repr(signature), repr(constexprs), repr(attrs), repr(options))
    return ASTSource(fn, signature, constexprs, attrs), options, key, backend


def _compile(source: ASTSource, options: Any, backend: Any) -> int:
    """Front end and passes for TARGET; the shared memory the kernel asks for, in bytes."""
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    codegen = backend.get_codegen_implementation(options)
    module = source.make_ir(TARGET, options, codegen, backend.get_module_map(), context)
    stages: dict[str, Any] = {}
    backend.add_stages(stages, options, source.language)
    metadata: dict[str, Any] = {}
    for name in STAGES:
        module = stages[name](module, metadata)
    manager = ir.pass_manager(module.context)
    passes.ttgpuir.add_allocate_warp_groups(manager)
    passes.convert.add_scf_to_cf(manager)
    passes.gluon.add_inliner(manager)
    ptx_version = get_ptx_version_from_options(options, TARGET.arch)
    nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(manager, TARGET.arch, ptx_version)
    manager.run(module, "shared memory")
    return int(module.get_int_attr("ttg.shared") or 0)


def _message(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    # the compiler names the kernel's file by its absolute path: keep the submission-relative tail
    text = re.sub(r"(/[^\s:]*/)([^/\s:]+\.py)", r"\2", text)
    # and a Python object by its name alone ("<function _act at 0x7f...>": the address differs per run)
    text = re.sub(r"(<[^<>]*?) at 0x[0-9a-fA-F]+>", r"\1>", text)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 20] + "\n[... cut]"


def compiled(kernel: InterpretedFunction, args: tuple[Any, ...], kwargs: dict[str, Any]) -> protocol.GpuCompile:
    """The compile of this launch for the graded GPU (cached per kernel and specialization)."""
    name = getattr(kernel.fn, "__qualname__", "kernel")
    try:
        kernel_rules.check_namespaces()  # at every launch: a name of Triton's rebound since the last one
        source, options, key, backend = specialization(kernel, args, kwargs)
    except Exception as exc:  # noqa: BLE001 - arguments the JIT cannot specialize, or Triton's names rebound
        return protocol.GpuCompile(kernel=name, error=_message(exc))
    if key not in _CACHE:
        try:
            # the kernel's hash, as `triton.compile` takes it first (`get_cache_key`): Triton's
            # DependenciesFinder walks every name the kernel's body reads, a branch that never runs
            # included, and refuses a plain Python function ("Unsupported function referenced")
            source.hash()
            _CACHE[key] = protocol.GpuCompile(kernel=name, shared_bytes=_compile(source, options, backend))
        except Exception as exc:  # noqa: BLE001 - the compiler's verdict is the fact recorded
            _CACHE[key] = protocol.GpuCompile(kernel=name, error=_message(exc))
    return _CACHE[key]


def start(compile_only: bool = False) -> None:
    """A new call begins: forget the previous call's compiles (the cache stays); with
    `compile_only`, its launches are compiled for the GPU and not run (`Case.compile_only`)."""
    _SEEN.clear()
    _ONLY[0] = compile_only and _INSTALLED[0]


def taken() -> list[protocol.GpuCompile]:
    """The distinct compiles of the launches since `start()`."""
    return list(_SEEN)


def probe(launch: Callable[[], object]) -> list[protocol.GpuCompile]:
    """The compiles of what `launch` launches, compiled for the GPU and not run, and kept out of the
    call's record (`taken`): how the interpreter's autotuner learns which configs the GPU refuses."""
    if not _INSTALLED[0]:
        return []
    only, seen = _ONLY[0], list(_SEEN)
    _ONLY[0] = True
    _SEEN.clear()
    try:
        launch()
        return list(_SEEN)
    finally:
        _ONLY[0] = only
        _SEEN[:] = seen


def out_of_resources(result: protocol.GpuCompile) -> bool:
    """What Triton's autotuner on a GPU catches and scores as never fastest (`Autotuner._bench`:
    OutOfResources, a failed `tl.static_assert`); the shared memory is the H200's."""
    if result.shared_bytes is not None and result.shared_bytes > gpu_limits.GPU_SHARED_BYTES:
        return True
    return (result.error or "").startswith(("OutOfResources", "CompileTimeAssertionFailure"))


_RUN_WRAPPER = """
def make(original, check, only):
    def run(self, *args, grid, warmup, **kwargs):
        if not warmup:
            check(self, args, kwargs)
            if only[0]:
                return None
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)
    return run
"""
#: [True] while a compile-only case is called (`start`): launches are compiled, not run
_ONLY = [False]
_INSTALLED = [False]


def _check(kernel: InterpretedFunction, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    result = compiled(kernel, args, kwargs)
    if result not in _SEEN:
        _SEEN.append(result)


def install() -> bool:
    """Compile every interpreted launch for the GPU from now on (interpreter only); True if on."""
    if _INSTALLED[0]:
        return True
    _METHODS.update(_tensor_methods())
    code_generator.CodeGenerator.get_Attribute = _get_attribute_twinned  # type: ignore[method-assign]
    _RECORD_REFERENCE.append(DependenciesFinder.record_reference)
    DependenciesFinder.record_reference = _record_reference_twinned  # type: ignore[method-assign]
    namespace: dict[str, Any] = {"__builtins__": {}}
    exec(_RUN_WRAPPER, namespace)  # noqa: S102 - a fixed string, compiled apart from this module's globals
    InterpretedFunction.run = namespace["make"](InterpretedFunction.run, _check, _ONLY)  # type: ignore[method-assign]
    _INSTALLED[0] = True
    return True
