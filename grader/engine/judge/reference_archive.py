"""The reference cache as one file, so a fresh machine starts warm.

`grader reference-cache build --out FILE` packs this machine's reference cache (compiled kernels
and autotune results, grader/engine/judge/reference_cache.py) into a gzipped tar; grading with
`--reference-cache FILE` (or $GRADER_REFERENCE_ARCHIVE) unpacks it into the local cache before
the reference is first called, so a new container, cluster node or lent GPU skips the 2-4
minutes of reference autotuning (the archive was 8.7 MB compressed on the H200).

Compiled code depends on torch, Triton and the GPU model: the archive's manifest names the
machine key it was built on, and an archive from another key is refused with a message instead
of being unpacked (Triton would miss every entry anyway). Unpacking takes regular files only,
never over a file already there, through tarfile's "data" filter.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

from grader.engine.judge import reference_cache

ENV = "GRADER_REFERENCE_ARCHIVE"
MANIFEST = "manifest.json"
#: an archive larger than this is not a reference cache (the H200's was 8.7 MB compressed)
MAX_ARCHIVE_BYTES = 1 << 30


class ArchiveError(RuntimeError):
    """The archive cannot be used here: a clear reason, never a traceback."""


def pack(version: str, out: Path) -> tuple[int, int]:
    """Write this machine's cache for `version` to `out`; (files, bytes before compression)."""
    folder = reference_cache.location(version)
    if folder is None or not folder.is_dir():
        raise ArchiveError(f"no reference cache to pack for version {version}: run `grader reference-cache build`")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    manifest = {"version": version, "machine": reference_cache.machine_key(), "files": len(files)}
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        data = json.dumps(manifest, indent=1).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for path in files:
            tar.add(path, arcname=f"cache/{path.relative_to(folder)}", recursive=False)
    os.replace(partial, out)
    return len(files), sum(p.stat().st_size for p in files)


def _manifest(tar: tarfile.TarFile, archive: Path) -> dict[str, object]:
    try:
        member = tar.extractfile(MANIFEST)
        if member is None:
            raise KeyError(MANIFEST)
        manifest = json.loads(member.read(1 << 16))
    except (KeyError, ValueError) as exc:
        raise ArchiveError(f"{archive} is not a reference-cache archive (no readable {MANIFEST}: {exc})") from None
    if not isinstance(manifest, dict):
        raise ArchiveError(f"{archive}: its {MANIFEST} is not an object")
    return manifest


def unpack(archive: Path, version: str) -> tuple[Path, int]:
    """Fill this machine's cache for `version` from `archive`; (the cache folder, files added)."""
    try:
        size = archive.stat().st_size
    except OSError as exc:
        raise ArchiveError(f"cannot read the reference-cache archive {archive}: {exc.strerror}") from None
    if size > MAX_ARCHIVE_BYTES:
        raise ArchiveError(f"{archive} is {size / 2**20:.0f} MiB, larger than any reference cache")
    folder = reference_cache.location(version)
    if folder is None:
        raise ArchiveError(f"the reference cache is switched off (${reference_cache.ENV}=off)")
    try:
        with tarfile.open(archive, "r:gz") as tar:
            manifest = _manifest(tar, archive)
            here = reference_cache.machine_key()
            if manifest.get("machine") != here or manifest.get("version") != version:
                raise ArchiveError(
                    f"{archive} was built for version {manifest.get('version')} on {manifest.get('machine')}; this "
                    f"grading is version {version} on {here}: the reference compiles here instead"
                )
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            added = 0
            for member in tar.getmembers():
                if not member.isfile() or not member.name.startswith("cache/"):
                    continue
                member.name = member.name.removeprefix("cache/")
                if (folder / member.name).exists():
                    continue
                tar.extract(member, folder, filter="data")
                added += 1
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ArchiveError(f"cannot unpack the reference-cache archive {archive}: {exc}") from None
    return folder, added
