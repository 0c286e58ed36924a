"""Docker for grading: the engine client, the labels and names the image and containers share.

The rest of the folder: image (the build), runner (one container per grading), gpus.

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

import os
from typing import Any

IMAGE_NAME = "triton-kernels-grader"
#: what one grading container may use unless `grader batch --memory/--pids` says otherwise
DEFAULT_MEMORY = "16g"
DEFAULT_PIDS = 4096
CPU_BASE_IMAGE = os.environ.get("CPU_BASE_IMAGE", "triton-kernels-cpu-base:bookworm")
WORKER_USER = "grader-worker"
LABEL_ROLE = "triton-kernels-grader.role"
LABEL_BATCH = "triton-kernels-grader.course.batch"
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
        client = docker.from_env(timeout=timeout)  # type: ignore[attr-defined]  # the SDK's own export
        client.ping()
    except Exception as exc:  # the SDK raises DockerException, requests and OS errors alike
        raise DockerUnavailable(
            f"no Docker engine answers ({exc}); start dockerd, or see scripts/setup-docker.sh"
        ) from None
    return client


# -- the image -------------------------------------------------------------------------------------


# -- one container per submission ------------------------------------------------------------------


# -- GPUs ----------------------------------------------------------------------------------------
