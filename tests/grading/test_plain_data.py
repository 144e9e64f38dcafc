"""What may cross from the sandbox: plain data only, read without unpickling objects."""
import io
import os
import pickle
import tempfile
import uuid
from pathlib import Path

import pytest
import torch

from grader.sandbox.plain_data import NotPlainData, dumps, loads


# A name of this run's own: a fixed path could be another user's leftover on a shared machine.
PAYLOAD_MARKER = Path(tempfile.gettempdir()) / f"grader-payload-ran-{uuid.uuid4().hex}"


class Payload:
    def __reduce__(self):
        return (os.system, (f"echo pwned > {PAYLOAD_MARKER}",))


class Shadow(torch.Tensor):
    pass


def test_round_trip_of_plain_values():
    value = {"n": 3, "x": 1.5, "s": "图", "b": b"\x00", "none": None, "t": torch.arange(3), "l": [(1, 2)]}
    assert loads(dumps(value))["t"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("value", [
    {"d": Shadow(torch.ones(2))}, [object()], {1: "int key"}, type("Fake", (dict,), {})(),
    {"sparse": torch.eye(2).to_sparse()},
])
def test_refuses_anything_not_plain(value):
    with pytest.raises(NotPlainData):
        dumps(value)


def test_pickled_payload_is_never_executed():
    data = pickle.dumps({"artifact": Payload()})
    with pytest.raises(NotPlainData):
        loads(data)
    buffer = io.BytesIO()
    torch.save({"artifact": Payload()}, buffer)
    with pytest.raises(NotPlainData):
        loads(buffer.getvalue())
    assert not PAYLOAD_MARKER.exists()
