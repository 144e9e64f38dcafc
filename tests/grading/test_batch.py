"""Saved records are reused only for the exact submission bytes and seed they came from."""
import json

from grader.instructor.batch import RECORD_VERSION, current_record, submission_digest


def test_record_is_stale_after_a_resubmission_or_a_new_seed(tmp_path):
    submission, record_path = tmp_path / "03_fx.ipynb", tmp_path / "03_fx.json"
    submission.write_text("first")
    record_path.write_text(json.dumps({"sha256": submission_digest(submission), "version": RECORD_VERSION,
                                       "seed": 7, "status": "graded"}))
    assert current_record(record_path, submission, 7)["status"] == "graded"
    assert current_record(record_path, submission, 8) is None
    submission.write_text("resubmitted")
    assert current_record(record_path, submission, 7) is None
    assert current_record(tmp_path / "absent.json", submission, 7) is None
