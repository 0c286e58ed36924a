"""One grading in one container: its limits, its configuration (no network, read-only submission), its run."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.course.containers.docker import (
    CAPABILITIES,
    DEFAULT_MEMORY,
    DEFAULT_PIDS,
    LABEL_BATCH,
    LABEL_ROLE,
    LABEL_STUDENT,
    Cancelled,
)


@dataclass
class ContainerLimits:
    memory: str = DEFAULT_MEMORY
    pids: int = DEFAULT_PIDS
    cpus: float = 2.0
    wall_s: float = 900.0
    tmpfs: str = "4g"
    shm: str = "2g"


@dataclass
class ContainerJob:
    """What one container grades, and where its files go."""

    student: str
    submission: Path
    out: Path
    image: str
    args: list[str]
    gpu: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    batch_label: str = ""
    entrypoint: list[str] | None = None  # tests replace the grader to fake crashes and garbage


@dataclass
class ContainerOutcome:
    exit_code: int | None
    timed_out: bool = False
    oom_killed: bool = False
    logs: str = ""
    duration_s: float = 0.0


def container_config(job: ContainerJob, limits: ContainerLimits) -> dict[str, Any]:
    """The keyword arguments of `client.containers.create` for one job: every limit in one place."""
    from docker.types import DeviceRequest

    env = {"OMP_NUM_THREADS": str(max(1, int(limits.cpus)))}
    env.update(job.env)
    if os.getuid() != 0:
        env["GRADER_OUT_OWNER"] = f"{os.getuid()}:{os.getgid()}"
    config: dict[str, Any] = {
        "image": job.image,
        "command": job.args,
        "environment": env,
        "volumes": {
            str(job.submission.resolve()): {"bind": "/submission", "mode": "ro"},
            str(job.out.resolve()): {"bind": "/out", "mode": "rw"},
        },
        "network_mode": "none",
        "mem_limit": limits.memory,
        "memswap_limit": limits.memory,  # no swap beyond the memory limit
        "pids_limit": limits.pids,
        "nano_cpus": int(limits.cpus * 1e9),
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,exec,nosuid,nodev,size={limits.tmpfs},mode=1777"},
        "shm_size": limits.shm,
        "cap_drop": ["ALL"],
        "cap_add": list(CAPABILITIES),
        "security_opt": ["no-new-privileges"],
        "init": True,  # reap whatever a worker leaves behind
        "labels": {LABEL_ROLE: "grade", LABEL_BATCH: job.batch_label, LABEL_STUDENT: job.student},
        "detach": True,
    }
    if job.entrypoint is not None:
        config["entrypoint"] = job.entrypoint
    if job.gpu is not None:
        # one GPU per container: exactly the one this job's slot holds
        config["device_requests"] = [DeviceRequest(device_ids=[job.gpu], capabilities=[["gpu"]])]
        env["NVIDIA_DRIVER_CAPABILITIES"] = "compute,utility"
    return config


class ContainerRunner:
    """Runs grading containers, tracking each so that none outlives the batch."""

    def __init__(self, client: Any, limits: ContainerLimits) -> None:
        self.client = client
        self.limits = limits
        self._live: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self, job: ContainerJob) -> ContainerOutcome:
        """Create, start and wait for one container; always removes it. Docker errors propagate."""
        import requests

        job.out.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        config = container_config(job, self.limits)
        container = self.client.containers.create(**config)
        with self._lock:
            self._live[container.id] = container
        try:
            if self.stopping.is_set():
                raise Cancelled()
            container.start()
            timed_out = False
            exit_code: int | None = None
            try:
                status = container.wait(timeout=self.limits.wall_s)
                exit_code = int(status.get("StatusCode", -1))
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                timed_out = True
                self._kill(container)
            if self.stopping.is_set():
                raise Cancelled()
            oom = False
            try:
                container.reload()
                oom = bool(container.attrs.get("State", {}).get("OOMKilled"))
            except Exception:
                pass
            logs = _tail(container)
            return ContainerOutcome(exit_code, timed_out, oom, logs, round(time.monotonic() - started, 3))
        finally:
            self._remove(container)

    def _kill(self, container: Any) -> None:
        try:
            container.kill()
        except Exception:
            pass

    def _remove(self, container: Any) -> None:
        try:
            container.remove(force=True)
        except Exception:
            pass
        with self._lock:
            self._live.pop(container.id, None)

    def kill_all(self) -> int:
        """Kill and remove every container still running (Ctrl-C, SIGTERM); returns how many."""
        self.stopping.set()
        with self._lock:
            live = list(self._live.values())
        for container in live:
            self._remove(container)
        return len(live)


def _tail(container: Any, limit: int = 4000) -> str:
    try:
        text = container.logs(stdout=True, stderr=True, tail=200).decode("utf-8", errors="replace")
    except Exception as exc:
        return f"(no logs: {exc})"
    return text[-limit:]
