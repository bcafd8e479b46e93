#!/usr/bin/env bash
# The prepared GPU check: data-gen, training and eval ppl in bf16 against fp32 on one GPU,
# one table at the end. Under 8 minutes on one H200; run it whenever a GPU machine is lent and record the
# table in bench/RESULTS.md. Needs the .venv of scripts/setup.sh (or PYTHON=... with ralm installed).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
nvidia-smi -L
timeout 480 "$PY" bench/gpu_check.py --device cuda "$@"
