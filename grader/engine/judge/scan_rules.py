"""The scan's rules as data: which calls, attributes, modules, strings and tools are evidence.

Each table maps what is looked for to a (kind, why) pair that the report shows; grader/engine/judge/scan.py
walks the submission's syntax trees and applies them.
"""

from __future__ import annotations

import re

CALLS = {
    "sys._getframe": ("frame-walk", "reads interpreter frames (could reach the grader's harness)"),
    "sys._current_frames": ("frame-walk", "reads the frames of every thread"),
    "inspect.currentframe": ("frame-walk", "reads interpreter frames"),
    "inspect.stack": ("frame-walk", "reads interpreter frames"),
    "inspect.getouterframes": ("frame-walk", "reads interpreter frames"),
    "traceback.walk_stack": ("frame-walk", "reads interpreter frames"),
    "traceback.extract_stack": ("frame-walk", "reads interpreter frames"),
    "gc.get_objects": ("gc-walk", "walks the garbage collector's objects"),
    "gc.get_referrers": ("gc-walk", "walks the garbage collector's objects"),
    "gc.get_referents": ("gc-walk", "walks the garbage collector's objects"),
    "sys.settrace": ("tracing", "installs a trace function (sees every frame of the grader)"),
    "sys.setprofile": ("tracing", "installs a profile function (sees every frame of the grader)"),
    "threading.settrace": ("tracing", "installs a trace function"),
    "os.getenv": ("env-probe", "reads environment variables"),
    "os.system": ("process", "starts a shell command"),
    "os.popen": ("process", "starts a shell command"),
    "os.fork": ("process", "forks the process"),
    "os.forkpty": ("process", "forks the process"),
    "os.setsid": ("process", "leaves its process group (survive the grader's kill?)"),
    "os.setpgrp": ("process", "leaves its process group (survive the grader's kill?)"),
    "os.kill": ("process", "sends signals to processes"),
    "os.killpg": ("process", "sends signals to processes"),
    "os.posix_spawn": ("process", "starts a process"),
    "os._exit": ("exit", "ends the process abruptly"),
    "sys.exit": ("exit", "ends the process"),
    "exit": ("exit", "ends the process"),
    "quit": ("exit", "ends the process"),
    "signal.signal": ("signals", "installs a signal handler"),
    "open": ("file-access", "opens a file"),
    "io.open": ("file-access", "opens a file"),
    "os.open": ("file-access", "opens a file"),
    "os.listdir": ("file-access", "lists a folder"),
    "os.scandir": ("file-access", "lists a folder"),
    "os.walk": ("file-access", "walks folders"),
    "glob.glob": ("file-access", "lists files"),
    "os.remove": ("file-access", "deletes a file"),
    "os.unlink": ("file-access", "deletes a file"),
    "os.rename": ("file-access", "moves a file"),
    "os.replace": ("file-access", "replaces a file"),
    "os.symlink": ("file-access", "makes a symbolic link"),
    "shutil.copy": ("file-access", "copies a file"),
    "shutil.rmtree": ("file-access", "deletes a folder"),
    "setattr": ("monkeypatch", "sets attributes dynamically (could patch torch, triton or timers)"),
    "delattr": ("monkeypatch", "deletes attributes dynamically"),
    "__import__": ("dynamic-import", "imports a module by name at run time"),
    "importlib.import_module": ("dynamic-import", "imports a module by name at run time"),
    "exec": ("dynamic-code", "runs code from a string (hides what it does from this scan)"),
    "eval": ("dynamic-code", "evaluates code from a string (hides what it does from this scan)"),
    "compile": ("dynamic-code", "compiles code from a string"),
    "torch.cuda.Stream": ("side-stream", "makes a CUDA stream (work left running after the call returns?)"),
    "torch.cuda.stream": ("side-stream", "switches CUDA streams"),
    "torch.cuda.set_stream": ("side-stream", "switches CUDA streams"),
    "torch.cuda.set_per_process_memory_fraction": ("gpu-memory", "changes its GPU memory limit"),
}
# attribute names whose mere use is worth a human's look
ATTRIBUTES = {
    "f_back": ("frame-walk", "uses the frame attribute f_back"),
    "f_locals": ("frame-walk", "uses the frame attribute f_locals"),
    "f_globals": ("frame-walk", "uses the frame attribute f_globals"),
    "tb_frame": ("frame-walk", "uses the frame attribute tb_frame"),
    "gi_frame": ("frame-walk", "uses the frame attribute gi_frame"),
    "__globals__": ("harness-access", "uses a function's __globals__ (could reach the grader's module)"),
    "__closure__": ("harness-access", "uses a function's __closure__"),
    "__code__": ("harness-access", "uses or replaces a function's __code__"),
    "__builtins__": ("monkeypatch", "uses __builtins__"),
    "__triton_builtin__": ("triton-internals", "marks a function as a Triton builtin (only Triton's own may be)"),
}
#: `x.handle.data` in a kernel: the NumPy array behind a Triton tensor, which only the interpreter has
INTERPRETER_DATA = ("triton-internals", "reads the interpreter's array behind a Triton tensor (none on a GPU)")
MODULES = {
    "subprocess": ("process", "imports subprocess"),
    "multiprocessing": ("process", "imports multiprocessing"),
    "concurrent": ("process", "imports concurrent.futures (work in other threads or processes)"),
    "ctypes": ("native-code", "imports ctypes (raw memory access)"),
    "cffi": ("native-code", "imports cffi (raw memory access)"),
    "mmap": ("native-code", "imports mmap"),
    "socket": ("network", "imports socket"),
    "urllib": ("network", "imports urllib"),
    "http": ("network", "imports http"),
    "requests": ("network", "imports requests"),
    "grader": ("grader-import", "imports the grader's own modules"),
    "reference": ("reference-import", "imports the staff reference"),
    "threading": ("threads", "imports threading (work hidden in another thread, or left running?)"),
    "_thread": ("threads", "imports _thread"),
    "builtins": ("monkeypatch", "imports builtins (could replace what the grader's harness calls)"),
    "gc": ("gc-walk", "imports gc"),
    "inspect": ("frame-walk", "imports inspect"),
}
#: modules (and what is called from them) that compile code PyTorch's profiler does not see into:
#: a graded call that runs it fails the kernel rule; the import or call is shown to a human too
GENERATED_CODE = {
    "torch._inductor": ("generated-code", "uses Inductor directly (its code fails a graded call's kernel check)"),
    "torch._export": ("generated-code", "uses AOT export or compile (a compiled model fails the kernel check)"),
    "torch.cuda.jiterator": ("generated-code", "compiles a CUDA kernel from a string (jiterator)"),
    "torch._C._te": ("generated-code", "builds and runs NNC tensor expressions (TorchScript's code generator)"),
    "torch.utils.cpp_extension": ("native-code", "compiles C++/CUDA source into an extension (unseen by the profiler)"),
}
#: a tensor's data into NumPy or back: methods of a tensor, functions of torch and of numpy. NumPy
#: itself is allowed (a constant, a dtype); what no profiler sees is arithmetic on a tensor's data there
NUMPY_METHODS = {"numpy", "__array__"}
NUMPY_TORCH = {"from_numpy"}
NUMPY_FUNCTIONS = {"asarray", "array", "asanyarray", "frombuffer", "fromiter", "copy"}
NUMPY_FINDING = ("numpy", "moves a tensor's data into NumPy or back (a computation outside Triton and the profiler?)")
PATCHED_ROOTS = {
    "torch",
    "triton",
    "time",
    "sys",
    "os",
    "builtins",
    "__builtins__",
    "grader",
    "numpy",
    "np",
    "gc",
    "json",
    "io",
    "pickle",
    "tl",
}
PROFILER_WORDS = (
    "profiler",
    "_toggle_collection_dynamic",
    "_enable_profiler",
    "_disable_profiler",
    "_prepare_profiler",
)
#: in a string constant that is not a docstring (unless the file reads `__doc__`): a pattern, and
#: what it mentions; "reference." only before a name (`reference.gelu`), not ending a sentence
STRINGS = {
    re.compile(pattern): message
    for pattern, message in {
        r"/proc": "mentions /proc",
        r"reference/": "mentions the reference folder",
        r"reference\.[A-Za-z_]": "mentions the reference module",
        r"GRADER_": "mentions grader settings",
        r"hidden_cases": "mentions hidden cases",
        r"result\.json": "mentions the result file",
        r"results\.json": "mentions the Gradescope result file",
        r"secret": "mentions a secret",
        r"/etc/": "mentions /etc",
    }.items()
}


# making namespaces or mounts: a way to change what the grader reads (issue 17); refused by the
# worker's seccomp filter, reported so that a human sees the attempt
NAMESPACE_CALLS = {"unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot"}
NAMESPACE_TOOLS = {
    "unshare",
    "nsenter",
    "mount",
    "umount",
    "pivot_root",
    "chroot",
    "bwrap",
    "/usr/bin/unshare",
    "/bin/mount",
}
