"""Autotuning beside other gradings is forgotten: real Triton autotuners, no GPU needed (nothing runs)."""

from __future__ import annotations

import pytest
import triton
import triton.language as tl

from grader.engine.harness import autotune_reset

CONFIGS = [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})]


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


kept_on_disk = triton.autotune(CONFIGS, key=["n"], cache_results=True)(_copy)
in_memory = triton.autotune(CONFIGS, key=["n"])(_copy)


@pytest.fixture(autouse=True)
def as_on_a_gpu() -> None:
    """Triton's interpreter turns disk caching off at construction; a GPU worker's keeps it on."""
    kept_on_disk.cache_results = True


def test_picks_made_in_a_warm_up_stay_off_disk_and_are_forgotten() -> None:
    kept_on_disk.cache[(4096,)] = CONFIGS[1]  # a pick from correctness, before the warm-up
    assert kept_on_disk.cache_results
    with autotune_reset.tuned_again_when_timed():
        assert not kept_on_disk.cache_results and not in_memory.cache_results  # nothing tuned here is kept
        in_memory.cache[(1 << 20,)] = CONFIGS[0]  # as a call at the benchmark shape would tune
    assert kept_on_disk.cache_results and not in_memory.cache_results  # each as it was
    assert kept_on_disk.cache == {} and in_memory.cache == {}  # the timed call tunes again


def test_an_autotuner_made_during_the_warm_up_is_forgotten_too() -> None:
    made: list[triton.runtime.autotuner.Autotuner] = []
    with autotune_reset.tuned_again_when_timed():
        made.append(triton.autotune(CONFIGS, key=["n"])(_copy))
        made[0].cache[(7,)] = CONFIGS[0]
    assert made[0].cache == {}
    assert any(t is made[0] for t in autotune_reset.autotuners())


def test_a_failing_warm_up_still_restores_and_forgets() -> None:
    try:
        with autotune_reset.tuned_again_when_timed():
            kept_on_disk.cache[(9,)] = CONFIGS[0]
            raise RuntimeError("the student's kernel failed at the benchmark shape")
    except RuntimeError:
        pass
    assert kept_on_disk.cache_results and kept_on_disk.cache == {}


def test_a_dead_weak_proxy_beside_the_autotuners_is_passed_over() -> None:
    """gc.get_objects() can hold a weak proxy whose object is gone: asking it its class raises."""
    import weakref

    from grader.engine.harness import autotune_reset

    class Thing:
        pass

    thing = Thing()
    proxy = weakref.proxy(thing)
    del thing
    keep = [proxy]  # reachable from gc's lists
    assert isinstance(autotune_reset.autotuners(), list) and keep
