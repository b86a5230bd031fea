"""The pinned buffer the CUDA tensor copies of a dump take slices of: bounded, first in first out,
never two live slices over the same bytes, a full buffer makes the caller wait for the writer.

On the CPU the buffer is ordinary memory; the page-locked one runs in tests/gpu."""

from __future__ import annotations

import random
import threading
import time

import pytest
import torch

from ts_torch.device_copies import PinnedRing


def ring(capacity: int = 4096) -> PinnedRing:
    return PinnedRing(capacity, lambda n: torch.zeros(n, dtype=torch.uint8))


def test_slices_never_overlap_and_all_the_room_comes_back_in_any_fifo_run() -> None:
    r = ring()
    rng = random.Random(0)
    live: list[tuple[torch.Tensor, object, int]] = []
    for step in range(3000):
        if live and (rng.random() < 0.5 or len(live) > 12):
            view, give_back, mark = live.pop(0)  # the writer gives slices back in the order taken
            assert bool((view == mark).all()), "a later slice wrote over a live one"
            give_back()
            continue
        taken = r.take(rng.randint(1, 1500), timeout=0)
        if taken is None:  # full: only when the live slices leave too little room
            assert live
            continue
        view, give_back = taken
        mark = step % 251
        view.fill_(mark)
        live.append((view, give_back, mark))
        assert r.in_use <= r.capacity
    for view, give_back, mark in live:
        assert bool((view == mark).all())
        give_back()
    assert r.in_use == 0


def test_slices_given_back_out_of_order_never_let_a_new_slice_over_a_live_one() -> None:
    # two GPUs' backward threads, or a copy the writer drops: slices can come back in any order
    r = ring(1024)
    rng = random.Random(1)
    live: list[tuple[torch.Tensor, object, int]] = []
    for step in range(5000):
        if live and rng.random() < 0.45:
            view, give_back, mark = live.pop(rng.randrange(len(live)))
            assert bool((view == mark).all()), "a later slice wrote over a live one"
            give_back()
            continue
        taken = r.take(rng.choice([1, 200, 256, 300, 512]), timeout=0)
        if taken is None:
            continue
        view, give_back = taken
        mark = step % 251
        view.fill_(mark)
        live.append((view, give_back, mark))
    for view, give_back, mark in live:
        assert bool((view == mark).all())
        give_back()
    assert r.in_use == 0


def test_a_full_buffer_makes_the_caller_wait_until_the_writer_gives_room_back() -> None:
    r = ring(1024)
    first = r.take(800)
    assert first is not None
    got: list[object] = []
    caller = threading.Thread(target=lambda: got.append(r.take(800, timeout=10)))
    caller.start()
    time.sleep(0.3)
    assert not got  # waiting: no room
    first[1]()
    caller.join(10)
    assert got and got[0] is not None


@pytest.mark.parametrize(("nbytes", "timeout"), [(5000, 1.0), (100, 0.0)])
def test_no_slice_for_a_tensor_larger_than_the_buffer_or_past_the_timeout(
    nbytes: int, timeout: float
) -> None:
    r = ring(4096)
    held = r.take(4000)
    assert held is not None
    assert r.take(nbytes, timeout=timeout) is None  # the dump then copies that tensor at once
    held[1]()
    held[1]()  # giving back twice frees once
    assert r.in_use == 0
