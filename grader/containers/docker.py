"""The grading image and the containers that grade one submission each (docker SDK).

`grader image build` assembles a small build context (docker/, grader/, assignment/, reference/
and, for the CPU variant, the wheels in docker/wheels/) and builds docker/Dockerfile, tagged
with the assignment version: `triton-kernels-grader:2026.1` (GPU) or `...:2026.1-cpu`.

A batch run with `--docker` calls `ContainerRunner.run` once per submission. The container:
the submission mounted read-only at /submission, a per-student output folder at /out (written by
the grader running as root inside; the worker runs as `grader-worker` and cannot touch it), no
network, memory / pids / CPU limits, a read-only root filesystem with a tmpfs /tmp, all
capabilities dropped but the few the grader needs to drop privileges, and one GPU through a
device request. A wall-clock limit kills it; every container is removed afterwards, also when the
batch is interrupted (`kill_all`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import ROOT

IMAGE_NAME = "triton-kernels-grader"
CPU_BASE_IMAGE = os.environ.get("CPU_BASE_IMAGE", "triton-kernels-cpu-base:bookworm")
WORKER_USER = "grader-worker"
LABEL_ROLE = "triton-kernels-grader.role"
LABEL_BATCH = "triton-kernels-grader.batch"
LABEL_STUDENT = "triton-kernels-grader.student"
LABEL_VERSION = "triton-kernels-grader.assignment-version"
LABEL_CONTENT = "triton-kernels-grader.content"
LABEL_VARIANT = "triton-kernels-grader.variant"
# What goes into the image besides the Dockerfile: these folders of the repository.
IMAGE_FOLDERS = ("grader", "assignment", "reference")
DOCKER_FILES = (
    "Dockerfile",
    "entrypoint.sh",
    "install-deps.sh",
    "install-toolchain.sh",
    "requirements-cpu.txt",
    "requirements-gpu.txt",
)
# Capabilities the grader needs as root inside: drop to the worker user (SETUID, SETGID), give it
# its scratch folders (CHOWN, FOWNER), read and write what the host owns (DAC_OVERRIDE), and kill
# what a worker leaves behind (KILL). Everything else (mount, ptrace, raw sockets...) is dropped.
CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"]


class Cancelled(Exception):
    """The batch is stopping (Ctrl-C, SIGTERM): this run's outcome must not be recorded."""


class DockerUnavailable(RuntimeError):
    """No Docker engine answers, or the docker SDK is missing."""


def docker_client(timeout: int = 60) -> Any:
    """A docker SDK client that has answered a ping, or DockerUnavailable saying why not."""
    try:
        import docker
    except ImportError:
        raise DockerUnavailable(
            "the docker Python package is missing: pip install 'docker>=7' (or the [docker] extra)"
        ) from None
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # the SDK raises DockerException, requests and OS errors alike
        raise DockerUnavailable(
            f"no Docker engine answers ({exc}); start dockerd, or see scripts/setup-docker.sh"
        ) from None
    return client


# -- the image -------------------------------------------------------------------------------------


def image_tag(version: str, cpu: bool) -> str:
    return f"{IMAGE_NAME}:{version}{'-cpu' if cpu else ''}"


def _image_files(root: Path) -> list[Path]:
    skip = {"__pycache__", ".pytest_cache"}
    files = [root / "docker" / name for name in DOCKER_FILES]
    for folder in IMAGE_FOLDERS:
        files += sorted(
            p
            for p in (root / folder).rglob("*")
            if p.is_file() and not skip & set(p.relative_to(root).parts) and p.suffix != ".pyc"
        )
    return files


def content_hash(root: Path = ROOT) -> str:
    """A short hash of everything the image copies in: tells whether an image is stale."""
    digest = hashlib.sha256()
    for path in _image_files(root):
        digest.update(str(path.relative_to(root)).encode() + b"\x00" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def stage_context(root: Path, dest: Path, cpu: bool) -> None:
    """Copy into `dest` only what the image needs, keeping .venv, grades and examples out."""
    for path in _image_files(root):
        target = dest / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    wheels = dest / "docker" / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    if cpu:
        found = sorted((root / "docker" / "wheels").glob("*.whl"))
        if not any(p.name.startswith("torch-") for p in found):
            raise RuntimeError(
                "docker/wheels/ holds no torch wheel: run scripts/setup-docker.sh (it downloads the CPU image's "
                "wheels there)"
            )
        for wheel in found:
            try:
                os.link(wheel, wheels / wheel.name)  # same file system: no copy of ~500 MB
            except OSError:
                shutil.copy2(wheel, wheels / wheel.name)


def build_image(
    version: str,
    cpu: bool,
    base: str | None = None,
    tag: str | None = None,
    no_cache: bool = False,
    root: Path = ROOT,
    log: Callable[[str], None] = print,
    client: Any = None,
) -> str:
    """Build docker/Dockerfile and return the tag. Raises RuntimeError with the builder's error."""
    client = client or docker_client(timeout=3600)
    tag = tag or image_tag(version, cpu)
    base = base or (CPU_BASE_IMAGE if cpu else None)
    if cpu:
        try:
            client.images.get(base)
        except Exception:
            raise RuntimeError(
                f"the CPU base image {base} is missing: run scripts/setup-docker.sh (it builds it with debootstrap)"
            ) from None
    buildargs = {
        "VARIANT": "cpu" if cpu else "gpu",
        "ASSIGNMENT_VERSION": version,
        "GRADER_CONTENT": content_hash(root),
    }
    if base:
        buildargs["BASE_IMAGE"] = base
    previous = _image_id(client, tag)
    with tempfile.TemporaryDirectory(prefix="grader-image-") as tmp:
        context = Path(tmp)
        stage_context(root, context, cpu)
        stream = client.api.build(
            path=str(context),
            dockerfile="docker/Dockerfile",
            tag=tag,
            buildargs=buildargs,
            rm=True,
            forcerm=True,
            nocache=no_cache,
            decode=True,
            # the CPU variant installs from local wheels: its build needs no network at all
            network_mode="none" if cpu else None,
        )
        for chunk in stream:
            if "error" in chunk:
                detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                raise RuntimeError(f"building {tag} failed: {detail.strip()}")
            text = chunk.get("stream", "").rstrip()
            if text:
                log(text)
    if previous and previous != _image_id(client, tag):
        # the image this tag named before, now untagged: its Python layers alone are gigabytes
        try:
            client.images.remove(previous, noprune=False)
        except Exception:
            pass  # still used by a container or another tag: docker keeps it, as it should
    return tag


def _image_id(client: Any, tag: str) -> str | None:
    try:
        return client.images.get(tag).id
    except Exception:
        return None


@dataclass
class ImageInfo:
    tag: str
    version: str
    content: str
    variant: str


def inspect_image(client: Any, tag: str) -> ImageInfo:
    """The grading image's labels; RuntimeError naming the command to build it when missing."""
    try:
        image = client.images.get(tag)
    except Exception:
        cpu = " --cpu" if tag.endswith("-cpu") else ""
        raise RuntimeError(
            f"the grading image {tag} is not on this machine: build it with `grader image build{cpu}`"
        ) from None
    labels = image.labels or {}
    return ImageInfo(tag, labels.get(LABEL_VERSION, ""), labels.get(LABEL_CONTENT, ""), labels.get(LABEL_VARIANT, ""))


# -- one container per submission ------------------------------------------------------------------


@dataclass
class ContainerLimits:
    memory: str = "16g"
    pids: int = 4096
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


def remove_stale(client: Any, batch_label: str) -> int:
    """Remove containers a killed earlier run of the same batch left behind."""
    removed = 0
    for container in client.containers.list(all=True, filters={"label": f"{LABEL_BATCH}={batch_label}"}):
        try:
            container.remove(force=True)
            removed += 1
        except Exception:
            pass
    return removed


def _tail(container: Any, limit: int = 4000) -> str:
    try:
        text = container.logs(stdout=True, stderr=True, tail=200).decode("utf-8", errors="replace")
    except Exception as exc:
        return f"(no logs: {exc})"
    return text[-limit:]


# -- GPUs ----------------------------------------------------------------------------------------


def parse_gpus(spec: str | None, probe: Callable[[], list[str]] | None = None) -> list[str]:
    """`--gpus all` -> every GPU the host has; `--gpus 0,1` -> those. Device ids as strings."""
    if not spec:
        return []
    if spec.strip() == "all":
        found = (probe or host_gpus)()
        if not found:
            raise RuntimeError("--gpus all: this machine shows no NVIDIA GPU (nvidia-smi lists none)")
        return found
    ids = [part.strip() for part in spec.split(",") if part.strip()]
    if not ids:
        raise RuntimeError(f"--gpus {spec!r}: expected 'all' or a comma-separated list of GPU indices such as 0,1")
    if len(set(ids)) != len(ids):
        raise RuntimeError(f"--gpus {spec!r}: a GPU is named twice")
    return ids


def host_gpus() -> list[str]:
    """GPU indices on this host: from nvidia-smi (the host's venv may lack CUDA torch), else torch."""
    import subprocess

    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=index", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout
            return [line.strip() for line in out.splitlines() if line.strip()]
        except (subprocess.SubprocessError, OSError):
            pass
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:
        return []
