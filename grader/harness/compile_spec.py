"""A Triton kernel specialization as data: what a compile made aside needs on both of its ends.

Triton's own JIT computes a cache key from the kernel's source hash, the specialization
(signature, constants, attributes), the backend, its options and a few environment variables,
and keeps a compile's files in its cache under that key's hash. Both ends compute the key with
Triton's functions: the worker to ask (and to see the answer is already cached), the compile
server to refuse an ask whose key it does not reproduce.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import triton.language as tl
from triton._C.libtriton import get_cache_invalidating_env_vars
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend
from triton.runtime.cache import get_cache_key, get_cache_manager

from grader.protocol.compiles import MAX_BYTES, MAX_FILES


class NotSerializable(ValueError):
    """A specialization this module cannot write as data (a function or an object as a constant)."""


def cache_hash(
    src: ASTSource, target: GPUTarget, options: dict[str, Any] | None, env_vars: dict[str, str] | None = None
) -> tuple[str, str]:
    """(the hash Triton's cache keeps the compile under, the name of its metadata file)."""
    backend = make_backend(target)
    parsed = backend.parse_options(dict(options or {}, **src.parse_options()))
    env = get_cache_invalidating_env_vars() if env_vars is None else env_vars
    key = get_cache_key(src, backend, parsed, env)
    return hashlib.sha256(key.encode("utf-8")).hexdigest(), f"{src.name[:150]}.json"


def cached(hash_: str, metadata: str) -> bool:
    """Whether Triton's cache (this process's TRITON_CACHE_DIR) has the compile already."""
    group = get_cache_manager(hash_).get_group(metadata) or {}
    return metadata in group


def _constant(value: Any) -> Any:
    if isinstance(value, tl.dtype):
        return {"dtype": str(value)}
    if isinstance(value, tl.constexpr):
        return {"constexpr": _constant(value.value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"tuple": [_constant(v) for v in value]}
    raise NotSerializable(f"a constant of type {type(value).__name__}")


def _constant_back(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"dtype"}:
        return tl.dtype(value["dtype"])
    if isinstance(value, dict) and set(value) == {"constexpr"}:
        return tl.constexpr(_constant_back(value["constexpr"]))
    if isinstance(value, dict) and set(value) == {"tuple"}:
        return tuple(_constant_back(v) for v in value["tuple"])
    return value


def _tuples(value: Any) -> Any:
    """JSON's lists as the tuples Triton's signatures and options hold."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def encode(src: ASTSource, options: dict[str, Any] | None) -> str:
    """The specialization as JSON (NotSerializable when a part of it is not plain data)."""
    try:
        return json.dumps(
            {
                "signature": src.signature,
                "constants": [[list(k), _constant(v)] for k, v in src.constants.items()],
                "attrs": [[list(k), v] for k, v in src.attrs.items()],
                "options": options or {},
            }
        )
    except (TypeError, ValueError) as exc:
        raise NotSerializable(str(exc)) from None


def decode(spec: str) -> tuple[dict[str, Any], dict[tuple[int, ...], Any], dict[tuple[int, ...], Any], dict[str, Any]]:
    """(signature, constants, attrs, options) from `encode`'s JSON; ValueError if malformed."""
    data = json.loads(spec)
    if not isinstance(data, dict):
        raise ValueError("the specialization is not a JSON object")
    signature = {str(k): _tuples(v) for k, v in dict(data["signature"]).items()}
    constants = {tuple(k): _constant_back(v) for k, v in data["constants"]}
    attrs = {tuple(k): v for k, v in data["attrs"]}
    options = {str(k): _tuples(v) for k, v in dict(data["options"]).items()}
    return signature, constants, attrs, options


def group_files(hash_: str, metadata: str) -> dict[str, bytes]:
    """The files of a compile in this process's Triton cache, by name (bounded in count and size)."""
    group = get_cache_manager(hash_).get_group(metadata) or {}
    if metadata not in group:
        raise FileNotFoundError(f"no {metadata} in the cache after the compile")
    if len(group) > MAX_FILES:
        raise ValueError(f"the compile left {len(group)} files")
    files = {name: Path(path).read_bytes() for name, path in group.items()}
    if sum(map(len, files.values())) > MAX_BYTES:
        raise ValueError("the compile's files are too large to hand over")
    return files


def pack(files: dict[str, bytes]) -> bytes:
    """A compile's files as one zip of stored entries: what the wire's payload check accepts
    (`protocol.check_archive`), read back without PyTorch, whose ops a watched call would record."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def unpack(blob: bytes) -> dict[str, bytes]:
    """`pack`'s files (bounded in count and size: the blob comes from a submission's process)."""
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        entries = archive.infolist()
        if len(entries) > MAX_FILES or sum(e.file_size for e in entries) > MAX_BYTES:
            raise ValueError("more files, or bytes, than one compile's group")
        return {e.filename: archive.read(e) for e in entries}


def install(hash_: str, metadata: str, files: dict[str, bytes]) -> None:
    """Write a compile's files into this process's Triton cache, as Triton's own compile would."""
    if metadata not in files or len(files) > MAX_FILES:
        raise ValueError("the files handed over are not one compile's group")
    manager = get_cache_manager(hash_)
    paths = {}
    for name, data in files.items():
        if "/" in name or name.startswith(("__grp__", ".")) or not name:
            raise ValueError(f"a file named {name[:40]!r} in the group")
        paths[name] = manager.put(data, name, binary=True)
    manager.put_group(metadata, paths)
