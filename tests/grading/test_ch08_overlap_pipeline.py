"""08.overlap_without_races judges each run from a clean start, whatever ran before it in the
process, and its time limit separates the reference from the nearest wrong answers."""
import re

import pytest
import torch

from answers_ch08 import (pipeline_all_on_the_side_stream, pipeline_blocking_copies, pipeline_without_record_stream,
                          pipeline_without_wait_stream)
from grader import chapters
from grader.chapters.ch08_porting import NO_OVERLAP, OVERLAP_MARGIN, READ_BACK_RACE
from grader.grading.judge import exercise_cases
from solutions.ch08_porting import run_pipeline
from toychip import RaceError, races

EXERCISE = chapters.get("08.overlap_without_races")
tc = torch.toychip


def produce(function) -> dict:
    """The artifact of ``function`` on the first public case; a race report without the side
    stream's id and the storage's address (they depend on what the process did before)."""
    artifact = EXERCISE.produce(function, EXERCISE.public_cases()[0].build())
    if "race" in artifact:
        artifact["race"] = re.sub(r"stream [1-9]\d*|0x[0-9a-f]+", "?", artifact["race"])
    return artifact


def leave_a_race_behind():
    """A copy on a side stream that nothing waits for, and a block another stream used, freed
    without record_stream: what a learner's earlier cell may leave in the process."""
    side = tc.Stream()
    with tc.stream(side):
        copied = torch.randn(64, 256).pin_memory().to("toychip", non_blocking=True)
    with races.sanitizer("off"):
        torch.relu(copied)
    return copied


@pytest.mark.parametrize("before", ["nothing watched yet", "a race left behind"])
def test_a_verdict_does_not_depend_on_what_ran_before(monkeypatch, before):
    clean = {name: produce(function) for name, function in
             [("reference", run_pipeline), ("no wait", pipeline_without_wait_stream),
              ("no record", pipeline_without_record_stream)]}
    if before == "nothing watched yet":
        monkeypatch.setattr(races, "_watching", False)
        left = None
    else:
        left = leave_a_race_behind()
    assert "race" not in produce(run_pipeline)
    assert produce(run_pipeline)["time_us"] == clean["reference"]["time_us"]
    assert produce(pipeline_without_wait_stream)["race"] == clean["no wait"]["race"]
    assert produce(pipeline_without_record_stream)["race"] == clean["no record"]["race"]
    assert "record_stream" in clean["no record"]["race"] and "aten.mm.default" in clean["no wait"]["race"]
    del left
    tc.synchronize()


def test_a_race_the_learner_catches_still_fails():
    def swallows_races(model, batches):
        try:
            return pipeline_without_wait_stream(model, batches)
        except RaceError:
            return [model(b.to("toychip")) for b in batches]

    assert "aten.mm.default" in produce(swallows_races)["race"]


def test_a_race_found_when_the_caller_reads_the_outputs_says_so():
    assert produce(pipeline_all_on_the_side_stream)["race"].endswith(READ_BACK_RACE)
    assert not produce(pipeline_without_wait_stream)["race"].endswith(READ_BACK_RACE)


def test_the_time_limit_separates_the_reference_from_sequential_and_from_blocking_copies():
    for seed in range(3):
        for planned in exercise_cases(EXERCISE, include_hidden=True, seed=seed):
            if seed and not planned.case.name.startswith("hidden"):
                continue   # the public and designed cases are the same on every seed
            built = planned.case.build()
            reference, blocking = EXERCISE.produce(run_pipeline, built), EXERCISE.produce(pipeline_blocking_copies, built)
            assert reference["time_us"] <= 0.85 * reference["sequential_us"] < NO_OVERLAP * reference["sequential_us"]
            assert blocking["time_us"] >= 1.05 * reference["time_us"] > (1 + OVERLAP_MARGIN) * reference["time_us"]
