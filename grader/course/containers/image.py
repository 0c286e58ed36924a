"""The grading image: its build context staged from the checkout, its content-hash tag, built and inspected."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import ROOT
from grader.course.containers.docker import (
    CPU_BASE_IMAGE,
    DOCKER_FILES,
    IMAGE_FOLDERS,
    IMAGE_NAME,
    LABEL_BATCH,
    LABEL_CONTENT,
    LABEL_VARIANT,
    LABEL_VERSION,
    docker_client,
)


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
