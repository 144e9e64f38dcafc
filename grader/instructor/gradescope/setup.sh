#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image. Pick the
# "Ubuntu 24.04" base image: the course needs Python 3.11 or newer (24.04 has 3.12).
set -euo pipefail
SOURCE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "error: the course needs Python 3.11 or newer, but this image has $(python3 --version 2>&1);" \
         "choose Gradescope's Ubuntu 24.04 base image" >&2
    exit 1
fi

apt-get update -qq
# bubblewrap: the sandbox's allowlisted file system. Where Gradescope's container forbids
# the namespaces it needs, the grader falls back and every results.json says which isolation ran.
# g++: TorchInductor compiles the C++ it generates for the CPU, and the toy chip's runtime is C++.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv bubblewrap g++

python3 -m venv "$SOURCE/venv"
"$SOURCE/venv/bin/python" -m pip install --quiet --upgrade pip
# torch from the CPU-only index first: PyPI's Linux wheel pulls several GB of CUDA libraries.
"$SOURCE/venv/bin/python" -m pip install --quiet --index-url https://download.pytorch.org/whl/cpu "@TORCH_PIN@"
"$SOURCE/venv/bin/python" -m pip install --quiet -r "$SOURCE/requirements.txt"
# The course's packages stay where they are (run_autograder puts them on PYTHONPATH); this
# registers their metadata, such as the toy chip's torch.compile backend entry point.
"$SOURCE/venv/bin/python" -m pip install --quiet --no-deps -e "$SOURCE/course"
# The toy chip's C++ runtime, compiled once here (the sandbox cannot write its build folder).
PYTHONPATH="$SOURCE/course/lib" "$SOURCE/venv/bin/python" -m toychip.runtime_build
