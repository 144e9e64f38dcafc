"""``python -m grader gradescope-bundle``: the zip runs in a simulated ``/autograder`` and
writes a results.json that follows Gradescope's schema, with the points of hidden cases
shown only once grades are published."""
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import jsonschema
import pytest
import torch

from grader import chapters
from grader.instructor.gradescope.bundle import build_bundle, torch_pin
from toychip import runtime_build
from notebook_builders import NOTEBOOKS, write_answers_only, write_filled, wrong_answer_source
from answers_ch03 import fold_conv_bn_ignoring_users

POINTS = {exercise.id: exercise.points for exercise in chapters.chapter("03")}
FULL = sum(POINTS.values())

# results.json as documented at https://gradescope-autograders.readthedocs.io/en/latest/specs/
# ("Output format"); ``score`` is required there unless every test has one: ours always has it.
FORMATS = ["text", "html", "simple_format", "md", "ansi"]
VISIBILITY = ["hidden", "after_due_date", "after_published", "visible"]
TEST_SCHEMA = {
    "type": "object",
    "required": ["name", "score", "max_score"],
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number"}, "max_score": {"type": "number"},
        "status": {"enum": ["passed", "failed"]},
        "name": {"type": "string"}, "name_format": {"enum": FORMATS}, "number": {"type": "string"},
        "output": {"type": "string"}, "output_format": {"enum": FORMATS},
        "tags": {"type": "array", "items": {"type": "string"}},
        "visibility": {"enum": VISIBILITY}, "extra_data": {"type": "object"},
    },
}
RESULTS_SCHEMA = {
    "type": "object",
    "required": ["score", "tests"],
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number"}, "execution_time": {"type": "number"},
        "output": {"type": "string"}, "output_format": {"enum": FORMATS},
        "test_output_format": {"enum": FORMATS}, "test_name_format": {"enum": FORMATS},
        "visibility": {"enum": VISIBILITY}, "stdout_visibility": {"enum": VISIBILITY},
        "extra_data": {"type": "object"}, "tests": {"type": "array", "items": TEST_SCHEMA},
        "leaderboard": {"type": "array"},
    },
}


def grader(*arguments, cwd=None):
    return subprocess.run([sys.executable, "-m", "grader", *arguments], capture_output=True, text=True,
                          check=False, cwd=cwd)


def unzip_like_gradescope(archive, destination):
    """Extract keeping the file modes (Gradescope runs ``run_autograder`` as an executable)."""
    with zipfile.ZipFile(archive) as bundle:
        for info in bundle.infolist():
            bundle.extract(info, destination)
            os.chmod(destination / info.filename, (info.external_attr >> 16) & 0o777 or 0o644)


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    """A simulated /autograder with the chapter 03 bundle unzipped into source/."""
    root = tmp_path_factory.mktemp("gradescope") / "autograder"
    done = grader("gradescope-bundle", "03", str(root.parent / "ch03.zip"))
    assert done.returncode == 0, done.stderr
    unzip_like_gradescope(root.parent / "ch03.zip", root / "source")
    # setup.sh's last step builds the toy chip's runtime into the bundle; a build of the same
    # sources is what this checkout imports, copied instead of compiled again.
    built = (root / "source" / "course" / "lib" / "toychip" / "_build")
    built.mkdir()
    shutil.copy(runtime_build.ensure_built(), built)
    return root


def run_submission(root, *notebooks):
    """Put ``notebooks`` (name → writer) in submission/ and run the bundle's run_autograder."""
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder, ignore_errors=True)
    (root / "submission").mkdir()
    for name, write in notebooks:
        write(root / "submission" / name)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)  # the bundle's own copy of the course must be enough
    done = subprocess.run([str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                          check=False, cwd=root.parent)
    assert done.returncode == 0, done.stderr
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    jsonschema.validate(results, RESULTS_SCHEMA)
    return results


def test_the_schema_rejects_what_gradescope_would_reject():
    good = {"score": 1, "tests": [{"name": "a", "score": 1, "max_score": 1, "visibility": "after_published"}]}
    jsonschema.validate(good, RESULTS_SCHEMA)
    for bad in ({"tests": []}, {**good, "tests": [{**good["tests"][0], "visibility": "later"}]},
                {**good, "tests": [{"name": "a", "max_score": 1}]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, RESULTS_SCHEMA)


def test_the_reference_gets_full_points_released_after_publishing(autograder):
    results = run_submission(autograder, ("03_fx.ipynb", write_filled))
    assert results["score"] == FULL
    assert all(t["status"] == "passed" for t in results["tests"])
    scored = {t["name"].split()[0]: t for t in results["tests"] if t["max_score"] > 0}
    assert {name: t["max_score"] for name, t in scored.items()} == POINTS
    # every chapter 03 exercise has hidden cases: its points wait for publishing,
    # its public cases are visible at once and worth nothing on their own
    assert {t["visibility"] for t in scored.values()} == {"after_published"}
    visible = [t for t in results["tests"] if t["visibility"] == "visible"]
    assert len(visible) == len(POINTS) and all(t["max_score"] == 0 for t in visible)
    assert "isolation" in results["output"] and "03_fx.ipynb" in results["output"]


def test_a_wrong_answer_scores_lower_and_the_best_of_several_notebooks_counts(autograder):
    wrong = wrong_answer_source(fold_conv_bn_ignoring_users, "fold_conv_bn")
    results = run_submission(autograder, ("03_fx.ipynb", lambda path: path.write_bytes(b"{not json")),
                             ("renamed.ipynb", lambda path: write_answers_only(path, answers={"03.fold_conv_bn": wrong})))
    assert "评分的笔记本：renamed.ipynb" in results["output"] and "另一份笔记本 03_fx.ipynb：0 分" in results["output"]
    failed = [t for t in results["tests"] if t["status"] == "failed"]
    assert {t["name"].split()[0] for t in failed} == {"03.fold_conv_bn"}
    [fold] = [t["score"] for t in failed if t["visibility"] == "after_published"]
    assert 0 <= fold < POINTS["03.fold_conv_bn"]   # partial credit for the cases it passes
    assert results["score"] == pytest.approx(FULL - POINTS["03.fold_conv_bn"] + fold)


@pytest.mark.parametrize("notebooks, message", [
    ((), "没有找到第 03 章的笔记本"),
    ((("02_torchscript.ipynb", lambda path: write_filled(path, NOTEBOOKS / "02_torchscript.ipynb")),),
     "已忽略 02_torchscript.ipynb"),
    ((("03_fx.ipynb", lambda path: path.write_bytes(b"{not json")),), "无法评分"),
])
def test_a_submission_without_a_gradable_notebook_scores_zero_with_a_reason(autograder, notebooks, message):
    results = run_submission(autograder, *notebooks)
    assert results["score"] == 0 and message in results["output"]


def test_the_scripts_are_bash_at_the_root_and_torch_comes_from_the_cpu_index(autograder):
    source = autograder / "source"
    for script in ("setup.sh", "run_autograder"):
        assert os.access(source / script, os.X_OK)
        done = subprocess.run(["bash", "-n", str(source / script)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    setup = (source / "setup.sh").read_text(encoding="utf-8")
    # exactly the torch the course runs on here (no local label such as +cpu), within pyproject's 2.13.*
    assert torch_pin() == f"torch=={torch.__version__.split('+')[0]}" and re.fullmatch(r"torch==2\.13\.\d+", torch_pin())
    assert f'--index-url https://download.pytorch.org/whl/cpu "{torch_pin()}"' in setup
    assert "@TORCH_PIN@" not in setup and "bubblewrap" in setup
    assert setup.rstrip().endswith('-m toychip.runtime_build')  # the sandbox cannot build it
    assert not (source / "course" / "lib" / "toychip" / "_build" / "runtime-build.log").exists()  # not this machine's
    assert torch_pin() in (source / "requirements.txt").read_text(encoding="utf-8").splitlines()


def test_setup_stops_with_a_clear_message_on_an_old_python(autograder, tmp_path):
    """Run setup.sh where ``python3`` is 3.10 (a stand-in): it must stop before installing anything."""
    (tmp_path / "python3").write_text('#!/bin/sh\n[ "$1" = --version ] && echo "Python 3.10.12"\nexit 1\n')
    (tmp_path / "python3").chmod(0o755)
    (tmp_path / "apt-get").write_text(f"#!/bin/sh\ntouch {tmp_path}/apt-get-ran\n")
    (tmp_path / "apt-get").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(autograder / "source" / "setup.sh")], env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 1 and not (tmp_path / "apt-get-ran").exists()
    assert "Python 3.11 or newer" in done.stderr and "Python 3.10.12" in done.stderr and "Ubuntu 24.04" in done.stderr


def test_bundles_draw_their_own_seed_or_reuse_a_course_seed(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    (course / ".grader_seed").write_text("1234567")
    seeds = []
    for name, seed_from in (("a.zip", None), ("b.zip", None), ("c.zip", course)):
        build_bundle("ch03", tmp_path / name, seed_from=seed_from)
        with zipfile.ZipFile(tmp_path / name) as bundle:
            seeds.append(bundle.read("secret/.grader_seed").decode())
    assert seeds[0] != seeds[1] and seeds[2] == "1234567"


@pytest.mark.parametrize("arguments, message", [
    (("42",), "unknown chapter '42'"),
    (("03", "--seed-from", "."), "no .grader_seed in ."),
])
def test_bad_input_is_one_clear_line_and_leaves_no_zip(tmp_path, arguments, message):
    out = tmp_path / "bundle.zip"
    done = grader("gradescope-bundle", arguments[0], str(out), *arguments[1:], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and message in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []
