"""Data races between the chip's streams, reported the way PyTorch's CUDA sanitizer finds them.

The toy chip computes synchronously (NumPy, at call time), so a missing ``wait_stream`` never
corrupts a value here. On a real chip it does: work on two streams runs in any order unless
one waits for the other. This module tells the learner where that would happen, with the
bookkeeping of ``torch/cuda/_sanitizer.py`` (``TORCH_CUDA_SANITIZER=1``):

* each stream has a *vector clock*: its own count of launched ops, and for every other
  stream the count it is known to have waited for. ``Event.record`` copies the recording
  stream's clock into the event; ``Event.wait`` (``wait_stream`` records and waits on one)
  joins it into the waiting stream's. The host has a clock too: a synchronisation
  (``torch.toychip.synchronize()``, ``torch.accelerator.synchronize()``, ``Stream.synchronize()``,
  ``Event.synchronize()``: up to the event's record) and a copy with ``non_blocking=False``
  make the host wait for a stream, and every stream issued later waits too;
* each storage remembers its last write (stream, count, op) and the reads since;
* an op on stream ``S`` that reads a storage last written on ``W != S`` -- or writes one
  read or written on another stream -- when ``S``'s clock has not reached that access is a
  **data race**.

Two things differ from the CUDA sanitizer. It cannot see a missing ``record_stream`` (it
forgets a tensor when it is freed, and skips ``aten.record_stream``); here a block the
caching allocator (:mod:`toychip.allocator`) hands out again while another stream may still
use it -- a tensor used on a side stream and freed without ``Tensor.record_stream`` -- is
reported too: the race ``record_stream`` exists to prevent. And it has one mode, raising
``CUDASanitizerErrors``; here a race is a :class:`RaceWarning` by default (``warnings``: one
line naming the op, the two streams and the tensor, English and Chinese), a
:class:`RaceError` in strict mode, and nothing when off. ``TOYCHIP_SANITIZER=strict|warn|off``
sets the mode for the process; ``with toychip.sanitizer("strict"):`` for a block. It is
separate from ``toychip.strict()``, which is about CPU fallbacks: a port can be fully native
and still race, and tests that assert no fallback should not fail on a missing ``wait_stream``.

What is watched: the chip's eager kernels and memory ops (copies, fills, random fills,
``.item()``) through :mod:`toychip.op_table`. Not watched: ops that fall back to the CPU,
compiled graphs and lazy mode, and the host's own reads and writes of pinned memory -- a
pinned staging buffer refilled on the host (``stage.copy_(batch)``) while an earlier
``non_blocking`` copy from it may still run is a race on a real chip, which neither this
report nor the CUDA sanitizer sees. A ``non_blocking=True`` copy from pageable memory counts as
asynchronous here, as ``cudaMemcpyAsync`` may return before the data has arrived (the
simulated clock still makes the host wait for it, see :mod:`toychip.ledger`). Accesses are
recorded from the first op queued on a side stream (a stream other than a chip's default), so
single-stream programs pay two C calls per op. Before that only which chips' default streams
have work the host has not waited for is noted; a storage made then counts, when watching
starts, as written by that work -- reading it on a side stream without waiting for the default
stream is the race it would be on a real chip -- and as finished where the host has waited
since. A judge whose verdict must not depend on what ran earlier in the process opens
:func:`watching`.
"""
from __future__ import annotations

import contextlib
import os
import warnings

import torch

from . import ledger, runtime
from .ledger import StreamKey

MODES = ("off", "warn", "strict")


class RaceError(RuntimeError):
    """Strict mode: an op races with work on another stream."""


class RaceWarning(UserWarning):
    """Warn mode (the default): an op races with work on another stream."""


def _mode_from_env() -> str:
    mode = os.environ.get("TOYCHIP_SANITIZER", "warn").strip().lower() or "warn"
    if mode not in MODES:
        raise ValueError(f"TOYCHIP_SANITIZER={mode!r}: expected one of {', '.join(MODES)}")
    return mode


_mode = _mode_from_env()
_watching = False                                   # work has been queued on a side stream
_unwatched: set[int] = set()                         # chips whose default stream ran unwatched work not waited for
_earlier: dict[int, int] = {}                        # chip -> the count that unwatched work had when watching began
EARLIER_WORK = "work queued before the first side stream"
_clocks: dict[StreamKey, dict[StreamKey, int]] = {}  # stream -> its vector clock (own count included)
_host: dict[StreamKey, int] = {}                     # what the host has waited for
_events: dict[int, dict[StreamKey, int]] = {}        # event id -> clock of its stream when recorded
_logs: list[list[str]] = []                          # the reports of each open watching() block


def mode() -> str:
    """``"off"``, ``"warn"`` or ``"strict"``."""
    return _mode


@contextlib.contextmanager
def sanitizer(new_mode: str = "strict"):
    """Inside the block, races are errors (``"strict"``), warnings (``"warn"``) or ignored (``"off"``)."""
    global _mode
    if new_mode not in MODES:
        raise ValueError(f"sanitizer mode {new_mode!r}: expected one of {', '.join(MODES)}")
    previous, _mode = _mode, new_mode
    try:
        yield
    finally:
        _mode = previous


@contextlib.contextmanager
def watching():
    """Watch every access inside the block, from a clean start, and collect its reports (a list
    of messages, filled even where strict mode's error was caught): a judge's view of one run.

    On entry the host waits for every stream (:func:`synchronize`: earlier work races with
    nothing in the block) and watching starts, so the block's verdict does not depend on
    whether a side stream was used before it in the process; on exit the host waits again,
    so that nothing after the block races with the block's work (the bookkeeping only: the
    simulated clock's host does not wait).
    """
    global _watching
    synchronize()
    previous, _watching = _watching, True
    log: list[str] = []
    _logs.append(log)
    try:
        yield log
    finally:
        _logs.remove(log)
        synchronize()
        _watching = previous


class Access:
    """What happened to one storage: its last write (stream, count, op) and the reads since."""

    __slots__ = ("writer", "seq", "op", "reads")

    def __init__(self, writer: StreamKey | None = None, seq: int = 0, op: str = ""):
        self.writer, self.seq, self.op = writer, seq, op
        self.reads: dict[StreamKey, tuple[int, str]] = {}

    def uses(self):
        """Every (stream, count, op) that touched the storage since its last write, the write included."""
        if self.writer is not None:
            yield self.writer, self.seq, self.op
        for stream, (seq, op) in self.reads.items():
            yield stream, seq, op


# --------------------------------------------------------------------------- clocks
def _clock(stream: StreamKey) -> dict[StreamKey, int]:
    clock = _clocks.get(stream)
    if clock is None:  # a stream first seen starts from what the host has waited for
        clock = _clocks[stream] = dict(_host)
    return clock


def _join(into: dict, other: dict) -> None:
    for stream, seq in other.items():
        if into.get(stream, 0) < seq:
            into[stream] = seq


def own_count(stream: StreamKey) -> int:
    """How many watched ops ``stream`` has launched."""
    return _clocks.get(stream, _host).get(stream, 0)


def stream_of_work() -> StreamKey | None:
    """The stream an op is queued on, if accesses are watched; ``None`` otherwise (hot path).

    Watching starts with the first op on a side stream and then lasts for the process.
    """
    if _mode == "off":
        return None
    stream = ledger.current_stream()
    if not _watching:
        if stream[1] == 0:
            _unwatched.add(stream[0])
            return None
        _start_watching()
    return stream


def _start_watching() -> None:
    """The first side-stream op: from now on every access is recorded."""
    global _watching
    _watching = True
    for device in list(_unwatched):
        _count_unwatched(device)


def _count_unwatched(device: int) -> None:
    """The chip's unwatched default-stream work becomes one op that stream has done, which the
    storages made before watching began are taken to be written by (:func:`access_of`)."""
    default = (device, 0)
    clock = _clock(default)
    _earlier[device] = clock[default] = clock.get(default, 0) + 1
    _unwatched.discard(device)


def record_event(event_id: int, stream: StreamKey) -> None:
    """``Event.record``: the event carries ``stream``'s clock as it is now (its unwatched work included)."""
    if stream[1] == 0 and stream[0] in _unwatched:
        _count_unwatched(stream[0])
    _events[event_id] = dict(_clock(stream))


def wait_event(event_id: int, stream: StreamKey) -> None:
    """``Event.wait`` / ``wait_stream``: ``stream`` has waited for everything the event saw."""
    seen = _events.get(event_id)
    if seen is not None:
        _join(_clock(stream), seen)


def forget_event(event_id: int) -> None:
    _events.pop(event_id, None)


def host_waits(stream: StreamKey) -> None:
    """The host waits for ``stream`` (``Stream.synchronize``, a blocking copy): work issued later,
    on any stream, comes after all of it."""
    if stream[1] == 0 and stream[0] in _unwatched:
        _count_unwatched(stream[0])
    _host_reaches(_clock(stream))


def host_waits_for_event(event_id: int) -> None:
    """``Event.synchronize``: the host waits for what the event's stream had done when it was recorded."""
    seen = _events.get(event_id)
    if seen is not None:
        _host_reaches(seen)


def _host_reaches(done: dict[StreamKey, int]) -> None:
    _join(_host, done)
    for clock in _clocks.values():
        _join(clock, done)


def synchronize(device: int | None = None) -> None:
    """``torch.toychip.synchronize()``: the host waits for every stream (of ``device``, if given).
    After waiting for all of them every stream's clock would be the host's, so the clocks are
    dropped: a stream seen again starts from the host's (:func:`_clock`), and the bookkeeping
    stays as small as the streams used since."""
    for chip in [d for d in _unwatched if device in (None, d)]:
        _count_unwatched(chip)
    if device is not None:
        for stream in [s for s in _clocks if s[0] == device]:
            host_waits(stream)
        return
    for clock in _clocks.values():
        _join(_host, clock)
    _clocks.clear()


def host_has_waited(uses: dict[StreamKey, int]) -> bool:
    """Whether the host has waited for the given counts of these streams (the allocator's
    test that a block's recorded uses are done, as c10 queries the events it recorded)."""
    return all(_host.get(stream, 0) >= seq for stream, seq in uses.items())


# --------------------------------------------------------------------------- accesses
def access_of(storage) -> Access:
    """The storage's access record. A storage without one was made before watching began: written
    by its chip's unwatched default-stream work, if there was any (see :func:`_start_watching`)."""
    try:
        return storage._access
    except AttributeError:
        device = storage.device.index
        earlier = _earlier.get(device)
        access = storage._access = Access() if earlier is None else Access((device, 0), earlier, EARLIER_WORK)
        lease = getattr(storage, "_block", None)
        if lease is not None:
            lease.access = access  # the allocator checks the block's last uses when it is handed out again
        return access


ALLOCATION = "allocation"  # the "op" of new memory until a kernel claims it as its result (see produced)


def fresh(storage) -> None:
    """A new storage: written, on the stream it is allocated on, by the op that made it."""
    if not _watching:
        return
    stream = stream_of_work()
    if stream is not None:
        stream = _on_device(stream, storage.device.index)
        access = access_of(storage)
        access.writer, access.seq, access.op, access.reads = stream, own_count(stream), ALLOCATION, {}
        if storage._block is not None:  # new memory, new lease
            storage._block.access = access


def produced(name: str, results) -> None:
    """The kernel ``name`` made ``results`` (a tensor or a tuple): a race on them names it as their writer."""
    for t in _chip_tensors(results if isinstance(results, tuple) else (results,)):
        access = access_of(t.untyped_storage())
        if access.op == ALLOCATION:
            access.op = name


def op(name: str, stream: StreamKey, reads=(), writes=()) -> None:
    """One op on ``stream`` reading and writing these tensors (lists of tensors too): check, then record.
    It runs on its first chip tensor's chip, on that chip's current stream."""
    read, written = _chip_tensors(reads), _chip_tensors(writes)
    first = (read or written or (None,))[0]
    if first is not None:
        stream = _on_device(stream, first.device.index)
    clock = _clock(stream)
    seq = clock[stream] = clock.get(stream, 0) + 1
    for t in read:
        _read(name, stream, seq, clock, t)
    for t in written:
        _write(name, stream, seq, clock, t)


def _on_device(stream: StreamKey, device: int | None) -> StreamKey:
    """The current stream of ``device`` (``stream`` is the current chip's; ``None``: that chip)."""
    return stream if device is None or device == stream[0] else (device, runtime.current_stream_id(device))


def _chip_tensors(values) -> list:
    """The chip tensors among ``values`` and in the lists among them (every watched op calls this)."""
    found = []
    for v in values:
        if isinstance(v, (list, tuple)):
            found += _chip_tensors(v)
        elif isinstance(v, torch.Tensor) and v.device.type != "cpu":
            found.append(v)
    return found


def _read(name: str, stream: StreamKey, seq: int, clock: dict, t) -> None:
    access = access_of(t.untyped_storage())
    if access.writer is not None and access.writer != stream and clock.get(access.writer, 0) < access.seq:
        _report(name, "reads", stream, access.writer, access.op, t)
    access.reads[stream] = (seq, name)


def _write(name: str, stream: StreamKey, seq: int, clock: dict, t) -> None:
    access = access_of(t.untyped_storage())
    for other, other_seq, other_op in access.uses():
        if other != stream and clock.get(other, 0) < other_seq:
            _report(name, "writes", stream, other, other_op, t)
            break
    access.writer, access.seq, access.op, access.reads = stream, seq, name, {}


def check_reuse(access: Access, stream: StreamKey, nbytes: int) -> None:
    """The allocator hands ``stream`` a block whose last tensor was used as ``access`` says."""
    clock = _clock(stream)
    for other, seq, other_op in access.uses():
        if other != stream and clock.get(other, 0) < seq:
            _report_reuse(stream, other, other_op, nbytes)
            return


def _name(stream: StreamKey) -> str:
    return f"toychip:{stream[0]} stream {stream[1]}"


def _op(name: str) -> str:
    """An op as reports name it: ``aten.mm.default``, or ``its allocation``."""
    return "its allocation" if name == ALLOCATION else f"aten.{name}"


def _report(name: str, verb: str, stream: StreamKey, other: StreamKey, other_op: str, t) -> None:
    what = f"tensor {tuple(t.shape)} {str(t.dtype).removeprefix('torch.')} (storage {t.untyped_storage().data_ptr():#x})"
    _raise_or_warn(
        f"toychip data race: {_op(name)} on {_name(stream)} {verb} {what}, used by {_op(other_op)} on {_name(other)} "
        f"with no wait_stream/Event.wait since (数据竞争：{_name(stream)} 上的 {_op(name)} 没有先等待 {_name(other)})")


def _report_reuse(stream: StreamKey, other: StreamKey, other_op: str, nbytes: int) -> None:
    _raise_or_warn(
        f"toychip data race: the caching allocator gives {_name(stream)} a freed block of {nbytes} bytes that "
        f"{_op(other_op)} on {_name(other)} may still be using; call tensor.record_stream() for that stream before "
        f"freeing it (数据竞争：块被释放时另一条流可能还在用它，释放前应调用 record_stream)")


def _raise_or_warn(message: str) -> None:
    for log in _logs:
        log.append(message)
    if _mode == "strict":
        raise RaceError(message)
    warnings.warn(message, RaceWarning, stacklevel=4)
