#!/usr/bin/env bash
# install.sh: set up tfslurm on a fresh Debian 12 machine, then run `tfslurm demo`.
#
#   sudo ./install.sh            install everything and run the demo
#   sudo ./install.sh --no-demo  install only
#
# What it does, in order (each step is idempotent):
#   1. apt-get installs Slurm's Debian packages (slurm-wlm for the throwaway demo/test
#      cluster, libslurm-dev for the SPANK plugin's <slurm/spank.h>), gcc/make and valgrind.
#   2. creates .venv/ next to this script and installs tfslurm into it, editable, with the
#      `tf` (tensorflow-cpu) and `test` (pytest, hypothesis, python-hostlist) extras, then
#      torch==2.13.0 (CPU) and the `jax` and `torch` extras (Keras 3, JAX, PyTorch runtimes).
#   3. builds the SPANK plugin in plugin/ (not installed into Slurm: see docs/admin-guide.md).
#   4. runs `.venv/bin/tfslurm demo`: TF training across a local multi-node Slurm cluster.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

RUN_DEMO=1
for arg in "$@"; do
    case $arg in
        --no-demo) RUN_DEMO=0 ;;
        -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done
if [[ $EUID -ne 0 ]]; then
    echo "install.sh: must run as root (it apt-get installs Slurm and the demo starts a local cluster)" >&2
    exit 2
fi

step() { printf '\n==> %s\n' "$*"; }

step "Slurm and build tools (Debian packages)"
PKGS=(slurm-wlm slurm-client libslurm-dev iproute2 util-linux gcc make valgrind)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}"
else
    echo "already installed: ${PKGS[*]}"
fi

step "Python environment (.venv)"
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
    apt-get install -y -qq python3-venv
fi
[[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -m pip install -q -e '.[tf,test]' 2>&1 | grep -v '^WARNING: Location' || true
# The jax and torch extras (docs/runtimes.md), so the runtime tests run too. torch first, pinned:
# 2.13.0 is the CPU build this project tests with (a bare `torch` from PyPI is a CUDA build of GBs).
.venv/bin/python -m pip install -q 'torch==2.13.0' 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -m pip install -q -e '.[jax,torch]' 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -c 'import importlib.util as u, tfslurm; assert u.find_spec("tensorflow")' ||
    { echo "install.sh: the Python install failed (see pip's messages above)" >&2; exit 1; }

step "SPANK plugin (plugin/)"
make -C plugin

if ((RUN_DEMO)); then
    step "tfslurm demo"
    .venv/bin/tfslurm demo
fi
