"""PyTorch's kept time per GPU and shape: read back as written, never trusted when unreadable."""

from __future__ import annotations

from pathlib import Path

from grader.engine.judge import pytorch_anchor, reference_cache


def test_a_kept_time_is_read_back_for_the_same_gpu_and_shape_only(tmp_path: Path) -> None:
    here = pytorch_anchor.key("GPU-1", "2.11.0", "gelu", '{"n": 16}')
    other_gpu = pytorch_anchor.key("GPU-2", "2.11.0", "gelu", '{"n": 16}')
    other_torch = pytorch_anchor.key("GPU-1", "2.12.0", "gelu", '{"n": 16}')
    other_shape = pytorch_anchor.key("GPU-1", "2.11.0", "gelu", '{"n": 32}')
    assert len({here, other_gpu, other_torch, other_shape}) == 4
    assert pytorch_anchor.lookup(here, [tmp_path]) is None
    pytorch_anchor.keep(here, 0.125, tmp_path)
    assert pytorch_anchor.lookup(here, [tmp_path]) == 0.125
    assert all(pytorch_anchor.lookup(k, [tmp_path]) is None for k in (other_gpu, other_torch, other_shape))
    assert not list(tmp_path.glob("*.tmp"))


def test_an_unreadable_or_nonsense_time_is_measured_again(tmp_path: Path) -> None:
    for text in ("not json", '{"median_ms": -1}', '{"median_ms": "fast"}', "[]", '{"median_ms": NaN}'):
        (tmp_path / "k.json").write_text(text)
        assert pytorch_anchor.lookup("k", [tmp_path]) is None, text
    pytorch_anchor.keep("k", 0.0, tmp_path)  # a zero is not a time
    assert pytorch_anchor.lookup("k", [tmp_path]) is None


def test_a_read_only_cache_is_read_and_new_times_go_to_the_private_overlay(tmp_path: Path, monkeypatch) -> None:
    base, overlay = tmp_path / "base", tmp_path / "overlay"
    pytorch_anchor.keep("old", 0.5, base / pytorch_anchor.SUBFOLDER)
    monkeypatch.setenv(reference_cache.BASE_ENV, str(base))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(overlay))
    assert pytorch_anchor.lookup("old") == 0.5
    pytorch_anchor.keep("new", 0.25)
    assert (overlay / pytorch_anchor.SUBFOLDER / "new.json").is_file()
    assert not (base / pytorch_anchor.SUBFOLDER / "new.json").exists()
    assert pytorch_anchor.lookup("new") == 0.25
