"""Steps for ``benchmarking.compile_timing.first_call_in_fresh_process`` that compile nothing,
so the protocol can be tested in a fraction of a second."""
import os
import time
from pathlib import Path


def sleeper(seconds: float):
    return lambda: time.sleep(seconds)


def cache_reporter(out: str):
    """Writes the Inductor cache directory the fresh process was given."""
    return lambda: Path(out).write_text(os.environ.get("TORCHINDUCTOR_CACHE_DIR", ""))
