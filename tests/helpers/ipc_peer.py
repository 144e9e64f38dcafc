"""A second process for the tests of chip tensors through multiprocessing (toychip.ipc).

``Peer`` spawns one process that imports the chip once and then answers requests: the test
process sends the name of a function below with its arguments (chip tensors travel in them,
shared as any queue item is), the peer runs it and sends the result back. Spawning imports
torch, so a test module shares one peer instead of starting processes per test. The peer
keeps what ``hold`` received until ``release``, so a test can watch memory that both
processes map.
"""
from __future__ import annotations

import multiprocessing
import queue
from multiprocessing.reduction import ForkingPickler

import torch

TIMEOUT_S = 60  # a slow spawn on a busy machine; a broken peer fails the test instead of hanging it
_held: list[torch.Tensor] = []


def describe(t: torch.Tensor) -> dict:
    """What the receiver sees: the values and the metadata that must survive the trip."""
    return {"values": t.cpu().tolist(), "size": list(t.shape), "stride": list(t.stride()),
            "offset": t.storage_offset(), "dtype": t.dtype, "device": str(t.device),
            "requires_grad": t.requires_grad, "type": type(t).__name__}


def reshare(t: torch.Tensor) -> str | None:
    """Send a received tensor on: the error's message, or None if it was sent."""
    try:
        ForkingPickler.dumps(t)
    except RuntimeError as error:
        return str(error)
    return None


def hold(t: torch.Tensor) -> None:
    _held.append(t)


def double_held() -> None:
    """Write through the received memory: every held tensor doubles in place."""
    for t in _held:
        t.mul_(2)


def held_values() -> list:
    return [t.cpu().tolist() for t in _held]


def release() -> None:
    _held.clear()


def serve(requests, replies) -> None:
    """The peer's loop: run each request until a None arrives."""
    import toychip  # noqa: F401  (registers the chip, and with it the chip's reducer)

    for name, args in iter(requests.get, None):
        try:
            replies.put(("ok", globals()[name](*args)))
        except Exception as error:  # the test process reports it
            replies.put(("error", f"{type(error).__name__}: {error}"))


def produce_then_exit(tensors, received) -> None:
    """A producer that sends a chip tensor and drops it once it has arrived, then exits."""
    import toychip  # noqa: F401

    t = torch.arange(1.0, 5.0, device="toychip:0")
    tensors.put(t)
    received.wait(TIMEOUT_S)
    del t


class Peer:
    """The spawned peer process; ``call(name, *args)`` runs ``name`` there and returns its result."""

    def __init__(self):
        context = multiprocessing.get_context("spawn")
        self._requests, self._replies = context.Queue(), context.Queue()
        self.process = context.Process(target=serve, args=(self._requests, self._replies), daemon=True)
        self.process.start()

    def call(self, name: str, *args):
        self._requests.put((name, args))
        try:
            status, result = self._replies.get(timeout=TIMEOUT_S)
        except queue.Empty:
            raise TimeoutError(f"the peer process did not answer {name!r} (alive: {self.process.is_alive()})") from None
        if status == "error":
            raise RuntimeError(f"in the peer process: {result}")
        return result

    def close(self) -> int | None:
        """Stop the peer; its exit code."""
        self._requests.put(None)
        self.process.join(TIMEOUT_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        return self.process.exitcode
