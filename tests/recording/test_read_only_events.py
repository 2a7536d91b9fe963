"""Batch events are read-only once made, and neither the core nor the recording codec writes into them."""

from __future__ import annotations

import numpy as np
import pytest

from tokenwatch.base.events import GPU_METRICS, Event, GpuBatch, LatencyBatch, ProgressBatch
from tokenwatch.core import RackCore
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings
from tokenwatch.recording.codec import Decoder, dumps


def arrays_of(event: Event) -> list[np.ndarray]:
    if isinstance(event, GpuBatch):
        return [event.node_index, event.gpu, event.values, event.throttle_reasons]
    if isinstance(event, ProgressBatch):
        found = [event.node_index, event.samples_done, event.tokens_done, event.prompt_tokens_done]
        return [a for a in found if a is not None]
    if isinstance(event, LatencyBatch):
        return [a for a in (event.values_s, event.counts) if a is not None]
    return []


def made_from_writable_arrays() -> list[Event]:
    return [
        GpuBatch(
            1.0,
            np.array([0, 0]),
            np.array([0, 1]),
            np.ones((2, len(GPU_METRICS))),
            np.zeros(2, np.uint64),
        ),
        ProgressBatch(1.0, np.array([0, 1]), np.array([3, 4]), np.array([30, 40]), np.array([5, 6])),
        LatencyBatch(1.0, "a", "ttft", np.array([0.1, 0.2]), np.array([1, 2])),
    ]


@pytest.mark.parametrize("event", made_from_writable_arrays(), ids=lambda e: type(e).__name__)
def test_every_array_of_a_batch_is_read_only_once_made(event: Event) -> None:
    arrays = arrays_of(event)
    assert len(arrays) >= 2
    for array in arrays:
        assert array.flags.writeable is False
        with pytest.raises(ValueError, match="read-only"):
            array[0] = array[0]


def test_decoded_batches_are_read_only() -> None:
    decoder = Decoder()
    for event in made_from_writable_arrays():
        back = decoder.loads(dumps(event))
        assert type(back) is type(event)
        assert all(a.flags.writeable is False for a in arrays_of(back))


def test_one_decoder_reuses_index_arrays_two_decoders_do_not_share() -> None:
    batch = made_from_writable_arrays()[0]
    line = dumps(batch)
    first, second = Decoder(), Decoder()
    a, b, c = first.loads(line), first.loads(line), second.loads(line)
    assert isinstance(a, GpuBatch)
    assert isinstance(b, GpuBatch)
    assert isinstance(c, GpuBatch)
    assert a.node_index is b.node_index  # the core recognises a repeated layout by identity
    assert a.gpu is b.gpu
    assert c.node_index is not a.node_index  # the cache lives and dies with its decoder
    assert np.array_equal(c.node_index, a.node_index)


def test_the_core_and_the_codec_leave_event_arrays_as_they_were() -> None:
    """A simulated Server run (GPU, progress and latency batches) through the core and the encoder:
    every array still holds what it held before (a write would also have raised on the frozen array)."""
    settings = SimSettings(load_profile("gb300-nvl72"), scenario="Server", seed=3, duration_s=90.0)
    events = list(RackSimulation(settings).events())
    before = [[a.copy() for a in arrays_of(e)] for e in events]
    assert sum(isinstance(e, LatencyBatch) for e in events) > 0
    core = RackCore()
    decoder = Decoder()
    for event in events:
        core.ingest(event)
        decoder.loads(dumps(event))
    core.snapshot()
    for event, copies in zip(events, before, strict=True):
        for array, copy in zip(arrays_of(event), copies, strict=True):
            assert np.array_equal(array, copy, equal_nan=array.dtype.kind == "f")
