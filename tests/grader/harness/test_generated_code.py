"""Code PyTorch generates, marked where it runs in a watched call (`grader.harness.generated_code`):
Inductor's wrapper modules and kernels however they are reached, AOTInductor's runners, jiterator.
The whole path (a graph compiled by `torch._inductor.compile` past dynamo, graded through the CLI)
is the adversarial corpus's `inductor-direct`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.harness import calls, generated_code, watch
from grader.judge.checks import kernel_check
from grader.problems import REGISTRY
from grader.spec.load import load_assignment

CASE = REGISTRY["gelu"].case_model.model_validate({"name": "t", "suite": "cpu", "shape": [8], "dtype": "float32"})


@pytest.fixture(scope="module", autouse=True)
def armed() -> None:
    watch.arm()


def _wrapper_module(tmp_path: Path) -> Path:
    """A stand-in for a wrapper module Inductor writes: a `call` that computes GeLU with no aten op
    the kernel rule lists (here PyTorch's, plainly; Inductor's would be a compiled kernel)."""
    path = tmp_path / "generated_wrapper.py"
    path.write_text("import math\n\ndef call(args):\n    return [math.tanh(v) for v in args]\n")
    return path


def test_a_generated_modules_call_is_noted_only_in_a_watched_call(tmp_path: Path) -> None:
    import torch._inductor.codecache as codecache

    module = codecache.PyCodeCache.load_by_key_path("graderstandin", str(_wrapper_module(tmp_path)))
    assert module.call([0.0]) == [0.0]  # outside a watch: runs, noted nowhere
    record: dict[str, Any] = {}
    with calls.profiled(record, "cpu"):
        assert module.call([0.0]) == [0.0]
    assert record["compiled_regions"] == [generated_code.INDUCTOR_GRAPH]
    gelu = next(p for p in load_assignment(hidden=False).problems if p.name == "gelu")
    problem = kernel_check(gelu, CASE, record["aten_ops"], 1, record["compiled_regions"])
    assert problem is not None and "Inductor's generated code" in problem


def test_a_kernel_inductor_compiled_is_noted_when_called_alone() -> None:
    """Triton's through `CachingAutotuner.run`, C++ ones through the bindings' loader: a
    generated module loaded afresh (its `call` unwrapped) still runs them."""
    import torch._inductor.codecache as codecache
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    record: dict[str, Any] = {}
    with calls.profiled(record, "cpu"), pytest.raises(TypeError):
        CachingAutotuner.run(object())  # noted before the launch itself fails
    assert record["compiled_regions"] == [generated_code.INDUCTOR_KERNEL]
    loader = vars(codecache.CppPythonBindingsCodeCache)["_load_library_inner"].__func__
    assert loader.__name__ == "load_library_inner"


def test_aoti_runners_and_jiterator_are_noted() -> None:
    record: dict[str, Any] = {}
    with calls.profiled(record, "cpu"):
        with pytest.raises(TypeError):
            torch._C._aoti.AOTIModelPackageLoader.boxed_run(object(), [])
        with pytest.raises((RuntimeError, TypeError)):
            torch._C._cuda_jiterator_compile_and_launch_kernel("", "f", False, 1, (torch.ones(1),), {})
    assert record["compiled_regions"] == [generated_code.AOT_INDUCTOR, generated_code.JITERATOR]


def test_a_marks_unwrapping_is_tampering(clean_guard: watch.Guard) -> None:
    import torch._inductor.codecache as codecache

    generated_code.GeneratedCode.install([False], [], clean_guard.watch_later)  # installed once: a no-op
    clean_guard.watch_later("torch._inductor.codecache", codecache, "_reload_python_module")
    marked = codecache._reload_python_module
    codecache._reload_python_module = marked.__closure__[1].cell_contents  # the original, as a cheat would
    sys.meta_path.remove(generated_code.GeneratedCode.finder)
    assert clean_guard.restore() == [
        "torch._inductor.codecache._reload_python_module",
        "sys.meta_path (the grader's finder of Inductor's modules)",
    ]
    assert codecache._reload_python_module is marked and sys.meta_path[0] is generated_code.GeneratedCode.finder


def test_inductors_modules_are_wrapped_as_a_submission_imports_them(tmp_path: Path) -> None:
    """In a fresh process the worker's arm() finds no Inductor module loaded: its finder wraps
    them as they are imported, and the guard watches what it wrapped."""
    script = textwrap.dedent(
        f"""
        import sys
        from grader.harness import calls, generated_code, watch
        watch.arm()
        assert "torch._inductor.codecache" not in sys.modules
        from torch._inductor.codecache import PyCodeCache
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
        module = PyCodeCache.load_by_key_path("graderstandin", {str(_wrapper_module(tmp_path))!r})
        record = {{}}
        with calls.profiled(record, "cpu"):
            module.call([0.0])
        assert record["compiled_regions"] == [generated_code.INDUCTOR_GRAPH], record
        assert CachingAutotuner.run.__name__ == "marked"
        guarded = {{(label, name) for label, _, name, _ in watch.GUARD.saved}}
        assert ("torch._inductor.codecache", "_reload_python_module") in guarded, guarded
        assert ("Inductor's CachingAutotuner", "run") in guarded, guarded
        print("wrapped as imported")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "wrapped as imported" in done.stdout


def test_inductor_imported_past_the_finder_is_tampering() -> None:
    """Taking the finder off `sys.meta_path` while importing Inductor, then putting it back: the guard
    finds Inductor's modules unwrapped after the submission's code, names it and wraps them."""
    script = textwrap.dedent(
        """
        import sys
        from grader.harness import generated_code, watch
        watch.arm()
        finder = generated_code.GeneratedCode.finder
        sys.meta_path.remove(finder)
        import torch._inductor.codecache as codecache
        sys.meta_path.insert(0, finder)
        assert codecache._reload_python_module.__name__ == "_reload_python_module"  # unwrapped
        changed = watch.GUARD.restore()
        assert any("torch._inductor.codecache imported past the grader's finder" in c for c in changed), changed
        assert codecache._reload_python_module.__name__ == "reload_python_module"  # wrapped now
        print("caught")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "caught" in done.stdout


def test_nncs_code_generator_called_directly_is_noted() -> None:
    te = torch._C._te
    size = te.ExprHandle.int(4)
    x = te.BufHandle("X", [size], torch.float32)
    y = te.Compute("Y", [size], lambda i: te.tanh(x.load([i])))
    loops = te.LoopNest([y])
    loops.prepare_for_codegen()
    codegen = te.construct_codegen("ir_eval", te.simplify(loops.root_stmt()), [x, y])
    a, out = torch.randn(4), torch.empty(4)
    record: dict[str, Any] = {}
    with calls.profiled(record, "cpu"):
        codegen.call([a, out])
    assert torch.allclose(out, a.tanh()) and record["compiled_regions"] == [generated_code.NNC]
    graph = torch._C.parse_ir(
        "graph(%x : Float(4, strides=[1], requires_grad=0, device=cpu)):\n"
        "  %y : Float(4, strides=[1], requires_grad=0, device=cpu) = aten::tanh(%x)\n"
        "  return (%y)"
    )
    torch._C._jit_set_te_must_use_llvm_cpu(False)
    kernel = te.TensorExprKernel(graph)
    record = {}
    with calls.profiled(record, "cpu"):
        got = kernel.run((a,))
    assert torch.allclose(got, a.tanh()) and record["compiled_regions"] == [generated_code.NNC]
