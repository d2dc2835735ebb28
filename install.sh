#!/usr/bin/env bash
# install.sh: set up tfslurm on a fresh Debian 12 or 13 machine, then run `tfslurm demo`.
#
#   sudo ./install.sh            install everything and run the demo
#   sudo ./install.sh --no-demo  install only
#
# What it does, in order (each step is idempotent):
#   1. apt-get installs Slurm's Debian packages (slurm-wlm for the throwaway demo/test
#      cluster, libslurm-dev for the SPANK plugin's <slurm/spank.h>), gcc/make and valgrind,
#      and the container runtimes the suite runs training in (charliecloud, podman with runc;
#      debootstrap builds their image). Not in tests/matrix.sh's roots (TFSLURM_MATRIX_ROOT
#      set): the host's run covers the containers.
#   2. creates .venv/ next to this script and installs tfslurm into it, editable, with the
#      `tf` (tensorflow-cpu; Python 3.10-3.13) and `test` (pytest, hypothesis, python-hostlist)
#      extras, then the `jax` extra and, where a CPU build is on this machine, torch==2.13.0
#      and the `torch` extra; .venv/tfslurm-absent-runtimes.txt says what was left out and why.
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
[[ -n ${TFSLURM_MATRIX_ROOT:-} ]] || PKGS+=(charliecloud podman runc debootstrap)
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
# A .venv whose creation was cut short (no working pip in it) is made again, not reused.
if ! { [[ -x .venv/bin/python ]] && .venv/bin/python -m pip --version >/dev/null 2>&1; }; then
    "$PYTHON" -m venv --clear .venv
fi
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -m pip install -q -e '.[tf,test]' 2>&1 | grep -v '^WARNING: Location' || true
# The jax and torch extras (docs/runtimes.md), so the runtime tests run too. PyTorch only as a
# CPU build found on this machine (this project's machines keep one for Python 3.11): a torch
# from PyPI is a CUDA build of several GB.
if .venv/bin/python -m pip install -q --no-index --no-deps 'torch==2.13.0' >/dev/null 2>&1; then
    .venv/bin/python -m pip install -q 'torch==2.13.0' 2>&1 | grep -v '^WARNING: Location' || true
    .venv/bin/python -m pip install -q -e '.[jax,torch]' 2>&1 | grep -v '^WARNING: Location' || true
else
    echo "install.sh: no PyTorch CPU build for this Python on this machine: the torch extra is left out"
    .venv/bin/python -m pip install -q -e '.[jax]' 2>&1 | grep -v '^WARNING: Location' || true
fi
# Record what could not be installed here and why (the tests skip those runtimes with it).
.venv/bin/python - <<'PY'
import importlib.util as u, sys
v = "%d.%d" % sys.version_info[:2]
why = {
    "tensorflow": f"TensorFlow has no stable release for Python {v} (the tf extra needs Python < 3.14)",
    "keras": f"Keras 3 comes with TensorFlow, which has no stable release for Python {v}",
    "torch": f"no PyTorch CPU build for Python {v} on this machine (install one: docs/runtimes.md)",
}
absent = [m for m in why if u.find_spec(m) is None]
with open(sys.prefix + "/tfslurm-absent-runtimes.txt", "w") as out:
    out.writelines(f"{m}: {why[m]}\n" for m in absent)
if "tensorflow" in absent and sys.version_info < (3, 14) or u.find_spec("jax") is None:
    sys.exit("install.sh: the Python install failed (see pip's messages above)")
for m in absent:
    print(f"install.sh: {m} is not installed: {why[m]}")
PY
# The container tests (docs/containers.md) need Charliecloud, podman and debootstrap (for the
# image, tests/images.sh), installed above on the host; in tests/matrix.sh's roots they skip
# with this line (the host's run covers them).
if [[ -n ${TFSLURM_MATRIX_ROOT:-} ]]; then
    echo "containers: not run in tests/matrix.sh's Debian roots (the host's run covers them)" \
        >>.venv/tfslurm-absent-runtimes.txt
    echo "install.sh: the container tests will skip in this Debian root (the host's run covers them)"
fi

step "SPANK plugin (plugin/)"
make -C plugin

if ((RUN_DEMO)) && ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info >= (3, 14))'; then
    echo "install.sh: no demo: it trains with TensorFlow, which has no stable release for this Python;" \
        "use Python 3.10-3.13 for it (PYTHON=python3.13 ./install.sh)"
elif ((RUN_DEMO)); then
    step "tfslurm demo"
    .venv/bin/tfslurm demo
fi
