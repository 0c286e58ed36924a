"""Start a real worker on a one-file gelu submission and read what the file printed at import."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from grader.engine.sandbox.config import SandboxConfig
from grader.engine.sandbox.process import WorkerProcess


def printed_at_import(tmp_path: Path, source: str) -> Any:
    """The first JSON line `source` (gelu.py) prints when a fresh CPU worker imports it."""
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "gelu.py").write_text(source)
    w = WorkerProcess(SandboxConfig(device="cpu"), folder, "gelu", "gelu", "triton_gelu")
    try:
        assert w.wait_ready(time.monotonic() + 60).status == "ready", w.output()
    finally:
        w.close()
    return json.loads(next(line for line in w.stdout.text().splitlines() if line.startswith("{")))
