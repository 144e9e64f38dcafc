"""Record chapter 04's PyTorch/XLA reference data (run by the maintainers, where torch_xla installs).

    PJRT_DEVICE=CPU python benchmarks/record_xla_ch04.py assets/xla

torch_xla is released in step with torch (its README's install commands name the same
version of both), so it is not in the course's environment. Run this script in a separate
virtual environment holding such a pair (``pip install torch==X.Y.0 torch_xla==X.Y.0``);
XLA's CPU client (``PJRT_DEVICE=CPU``) is enough, no TPU is needed. It writes
``ch04_xla_reference.json``, with the versions and the date:

* for chapter 04's example ``(x + 1) * 2 - 0.5`` on a float32[3], the pending IR in
  torch_xla's text dump and the HLO module it lowers to (both read before the sync), and
  the HLO after XLA's CPU compiler optimised it (from ``XLA_FLAGS=--xla_dump_to``);
* what an out-of-range ``torch.gather`` gives on the XLA device;
* the ``aten::*`` fallback counters after ``torch.linalg.det``, as chapter 04 shows on LTC,
  and the names of the timing metrics the same step leaves;
* the warnings of the older spellings ``xm.xla_device()`` and ``xm.mark_step()``.
"""
from __future__ import annotations

import datetime
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

DUMP_DIR = Path(tempfile.mkdtemp(prefix="xla_dump_"))
os.environ["XLA_FLAGS"] = f"--xla_dump_to={DUMP_DIR} {os.environ.get('XLA_FLAGS', '')}"  # read when XLA starts

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as metrics

SEED_CHAIN = "(x + 1) * 2 - 0.5, x = torch.tensor([1.0, 2.0, 3.0])"
OUT_OF_RANGE_GATHER = "torch.gather(torch.tensor([1.0, 2.0, 3.0]), 0, torch.tensor([5])).item()"
DET_FALLBACK = "kept = torch.relu(torch.linalg.det(v) * v), v = torch.randn(6, 6); torch_xla.sync(wait=True)"


def seed_chain_dumps(device) -> dict:
    """The IR and the HLO of the seed chain, dumped while it is still pending."""
    x = torch.tensor([1.0, 2.0, 3.0], device=device)
    w = (x + 1) * 2 - 0.5
    dumps = {"ir_text": torch_xla._XLAC._get_xla_tensors_text([w]),
             "hlo_text": torch_xla._XLAC._get_xla_tensors_hlo([w])}
    torch_xla.sync(wait=True)
    return {**dumps, "optimized_hlo_text": first_optimized_module(), "result": w.cpu().tolist()}


def first_optimized_module() -> str:
    """The HLO of the first program XLA compiled in this process, after its optimisations."""
    return sorted(DUMP_DIR.glob("module_*.SyncTensorsGraph.*after_optimizations.txt"))[0].read_text(encoding="utf-8")


def out_of_range_gather(device) -> dict:
    """Index 5 into a length-3 tensor: eager CPU raises; report what the XLA device does."""
    x = torch.tensor([1.0, 2.0, 3.0], device=device)
    picked = torch.gather(x, 0, torch.tensor([5], device=device))
    try:
        return {"result": picked.item(), "error": None}
    except RuntimeError as error:
        return {"result": None, "error": str(error).splitlines()[-1]}


def det_fallback_step(device) -> dict:
    """The ``aten::*`` counters (CPU fallbacks) and the names of the metrics of one step
    that takes a determinant (names only: the timings would need the hardware beside them)."""
    v = torch.randn(6, 6, device=device)
    torch_xla.sync()
    metrics.clear_all()
    kept = torch.relu(torch.linalg.det(v) * v)  # alive at the sync: compiled and run
    torch_xla.sync(wait=True)
    return {"counters": {name: metrics.counter_value(name) for name in metrics.counter_names()
                         if name.startswith("aten::")},
            "metric_names": sorted(metrics.metric_names())}


def older_spelling_warnings() -> dict:
    """What torch_xla says when the older spellings are called."""
    said = {}
    for spelling, call in (("xm.xla_device()", xm.xla_device), ("xm.mark_step()", xm.mark_step)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        said[spelling] = [str(warning.message) for warning in caught]
    return said


def main(outdir: Path) -> None:
    device = torch_xla.device()
    record = {"torch": torch.__version__, "torch_xla": torch_xla.__version__,
              "pjrt_device": os.environ.get("PJRT_DEVICE"), "recorded_on": datetime.date.today().isoformat(),
              "recorded_by": "benchmarks/record_xla_ch04.py",
              "seed_chain": {"program": SEED_CHAIN, **seed_chain_dumps(device)},
              "out_of_range_gather": {"program": OUT_OF_RANGE_GATHER, **out_of_range_gather(device)},
              "det_fallback": {"program": DET_FALLBACK, **det_fallback_step(device)},
              "older_spellings": older_spelling_warnings()}
    shutil.rmtree(DUMP_DIR)
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "ch04_xla_reference.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n",
                                                    encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
