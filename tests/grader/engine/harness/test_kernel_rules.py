"""A Triton builtin is Triton's by identity: an object Triton's modules held before the submission was
imported (or one of the grader's interpreter mends), never by what it says of itself.

Each forged callee below said it was Triton's (its `__module__`, `__name__`, `__triton_builtin__`,
its code's file, a name in Triton's own modules) and scored full GeLU correctness on a CPU while it
computed in NumPy under the interpreter; each is refused by the GPU compiler (the CPU's compile check
runs it), with an honest twin beside it that compiles clean and computes the right values. The
checks run in a child Python with TRITON_INTERPRET=1 after `student_runtime.prepare`, as in the
worker (`tests.grader.engine.harness.test_gpu_rules_on_cpu._run`).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.grader.engine.harness.test_gpu_rules_on_cpu import _run

#: a kernel per expression of `x` (in a file of its own: `@triton.jit` reads its source), each launch's
#: compile verdict and whether it computed `want`
LAUNCH = '''
import functools, importlib.util, os, tempfile, types
import numpy as np
from grader.engine.harness import kernel_rules
from triton.language.extra import libdevice

KERNEL = """
import triton, triton.language as tl
from triton.language.extra import libdevice

@triton.jit
def kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, {})
"""

def kernel_of(expr, **names):
    path = os.path.join(tempfile.mkdtemp(), "kernel.py")
    with open(path, "w") as file:
        file.write(KERNEL.format(expr))
    spec = importlib.util.spec_from_file_location(f"kernel_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    vars(module).update(names)
    return module.kernel

X = torch.linspace(-2.0, 2.0, 16)

def launch(label, kernel, want, setup=None, undo=None):
    if setup is not None:
        setup()
    try:
        gpu_compile.start()
        y = torch.zeros(16)
        try:
            kernel[(1,)](X, y, BLOCK=16)
            right = bool(torch.allclose(y, want(X), atol=1e-5))
        except Exception as exc:  # the interpreter's own refusal (a forged builtin among Triton's names)
            right = "raised: not Triton's" if "is not Triton's" in str(exc) else "raised"
        (result,) = gpu_compile.taken()  # compiled before the interpreter runs the launch
        error = result.error or ""
        print(label, "refused" if "is not Triton's" in error else "compiled" if not error else error, right)
    finally:
        if undo is not None:
            undo()

def gelu_numpy(x, _semantic=None):
    if _semantic is not None or not isinstance(getattr(x.handle, "data", None), np.ndarray):
        return x  # the GPU compiler: nothing emitted
    d = x.handle.data.astype(np.float64)
    x.handle.data[:] = 0.5 * d * (1.0 + np.tanh(0.7978845608028654 * (d + 0.044715 * d**3)))
    return x

gelu = lambda x: torch.nn.functional.gelu(x, approximate="tanh")
'''


def _launched(tmp_path: Path, body: str) -> dict[str, str]:
    out = _run(tmp_path, LAUNCH + textwrap.dedent(body))
    return dict(line.split(" ", 1) for line in out.strip().split("\n") if " " in line)


def test_forged_builtins_are_refused_and_their_honest_twins_compile(tmp_path: Path) -> None:
    lines = _launched(
        tmp_path,
        """
        forged_tanh = lambda x: gelu_numpy(x)  # says it is libdevice's tanh
        forged_tanh.__module__ = "triton.language.extra.libdevice"
        forged_tanh.__name__ = forged_tanh.__qualname__ = "tanh"
        forged_partial = functools.partial(gelu_numpy)
        forged_partial.__triton_builtin__ = True
        forged_partial.__module__ = "triton.language.math"
        SOURCE = "def gelu(x, _semantic=None):\\n    return act(x, _semantic)\\n"
        FILE = os.path.join(os.path.dirname(triton.__file__), "language", "core.py")
        code = next(c for c in compile(SOURCE, FILE, "exec").co_consts if isinstance(c, types.CodeType))
        forged_file = types.FunctionType(code, {"act": gelu_numpy}, "gelu", (None,))
        forged_file.__module__ = "triton.language.core"
        forged_file.__triton_builtin__ = True

        @triton.jit
        def jit_gelu(x):
            return 0.5 * x * (1.0 + libdevice.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))

        launch("forged-tanh", kernel_of("act(x)", act=forged_tanh), gelu)
        launch("libdevice-tanh", kernel_of("libdevice.tanh(x)"), torch.tanh)
        launch("forged-partial", kernel_of("act(x)", act=forged_partial), gelu)
        math = lambda x: 2 * torch.exp(x) + torch.erf(x)
        launch("math", kernel_of("tl.math.exp(x) + tl.math.erf(x) + x.exp()"), math)
        launch("forged-file", kernel_of("act(x)", act=forged_file), gelu)
        launch("jit-helper", kernel_of("act(x)", act=jit_gelu), gelu)
        print("foreign", kernel_rules.foreign_builtin(forged_partial), kernel_rules.foreign_builtin(forged_file),
              kernel_rules.foreign_builtin(libdevice.tanh), kernel_rules.foreign_builtin(tl.math.exp))
        """,
    )
    for forged in ("forged-tanh", "forged-partial", "forged-file"):
        assert lines[forged] == "refused True", lines  # the interpreter ran the NumPy; the compiler refused it
    for honest in ("libdevice-tanh", "math", "jit-helper"):
        assert lines[honest] == "compiled True", lines
    assert lines["foreign"] == "True True False False", lines


def test_names_rebound_in_triton_and_bound_methods_are_judged_by_identity(tmp_path: Path) -> None:
    """A forged object put into Triton's own modules or classes after import, a plain function found
    through `getattr` or a module's name, and a bound method (a fresh object at each access, judged by
    its function): refused; Triton's own tensor methods and the grader's stand-ins pass, and a refusal
    inside the interpreter's launch leaves Triton's modules as they were."""
    lines = _launched(
        tmp_path,
        """
        marked = functools.partial(gelu_numpy)
        marked.__triton_builtin__ = True
        helpers = types.ModuleType("math")  # a module that says it is `math`, which Triton's hash skips
        helpers.act = gelu_numpy
        tanh, add = libdevice.tanh, tl.tensor.__add__
        by_tanh = kernel_of("libdevice.tanh(x)")
        by_methods = kernel_of("x.to(tl.float16).to(tl.float32) + 1.0 + x.exp() + x.sum(0)")
        methods = lambda x: x.half().float() + 1.0 + torch.exp(x) + x.sum()
        first = lambda s, o, _semantic=None: s

        launch("libdevice-rebound", by_tanh, gelu, lambda: setattr(libdevice, "tanh", marked),
               lambda: setattr(libdevice, "tanh", tanh))
        launch("libdevice-tanh", by_tanh, torch.tanh)
        launch("tl-name", kernel_of("tl.forged(x)"), gelu, lambda: setattr(tl, "forged", gelu_numpy),
               lambda: delattr(tl, "forged"))
        launch("tl-marked", kernel_of("tl.forged(x)"), gelu, lambda: setattr(tl, "forged", marked),
               lambda: delattr(tl, "forged"))
        launch("method", kernel_of("x.forged()"), gelu, lambda: setattr(tl.tensor, "forged", gelu_numpy),
               lambda: delattr(tl.tensor, "forged"))
        launch("dunder", by_methods, methods, lambda: setattr(tl.tensor, "__add__", first),
               lambda: setattr(tl.tensor, "__add__", add))
        launch("tensor-methods", by_methods, methods)
        launch("getattr", kernel_of('getattr(helpers, "act")(x)', helpers=helpers), gelu)
        launch("module-name", kernel_of("helpers.act(x)", helpers=helpers), gelu)
        bound = types.MethodType(tl.tensor.to, object())
        forged_bound = types.MethodType(types.MethodType(marked, 1), 2)
        print("bound", kernel_rules.foreign_builtin(bound), kernel_rules.foreign_builtin(forged_bound))
        """,
    )
    for forged in ("libdevice-rebound", "tl-name", "method", "getattr", "module-name"):
        assert lines[forged] == "refused True", lines  # the interpreter ran the NumPy; the compiler refused it
    assert lines["dunder"].startswith("refused"), lines
    assert lines["tl-marked"] == "refused raised: not Triton's", lines  # the interpreter's patching asks too
    assert lines["libdevice-tanh"] == "compiled True", lines  # after the rebound and the refused launch
    assert lines["tensor-methods"] == "compiled True", lines
    assert lines["bound"] == "False True", lines
