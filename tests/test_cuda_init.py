"""``cuda_initialised()`` at each stage: not loaded, loaded but not initialised, initialised.

A stand-in libcuda (built here with gcc) exports ``cuInit`` and ``cuDeviceGetCount`` with the
driver's semantics for this question: ``cuDeviceGetCount`` answers
``CUDA_ERROR_NOT_INITIALIZED`` (3) until ``cuInit`` has run. Each check runs in a fresh
Python process, since a library once loaded stays mapped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

STAND_IN = r"""
static int initialised;
int cuInit(unsigned int flags) { (void)flags; initialised = 1; return 0; }
int cuDeviceGetCount(int *count) { if (!initialised) return 3; *count = 2; return 0; }
"""

STAGES = r"""
import ctypes, json, sys
from tfslurm.resolver import cuda_initialised
path = sys.argv[1]
seen = [cuda_initialised()]                        # not loaded
lib = ctypes.CDLL(path)                             # loaded (as torch/cupy do at import)
count = ctypes.c_int(0)
first = lib.cuDeviceGetCount(ctypes.byref(count))   # a count asked before cuInit
seen.append(cuda_initialised())
lib.cuInit(0)                                       # initialised
seen.append(cuda_initialised())
seen.append(first)
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the stand-in libcuda")
    root = tmp_path_factory.mktemp("libcuda")
    (root / "stand_in.c").write_text(STAND_IN)
    lib = root / "libcuda.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(root / "stand_in.c")], check=True)
    return lib


def run_stages(script: str, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent.parent))
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_loaded_is_not_initialised(libcuda: Path) -> None:
    assert run_stages(STAGES, str(libcuda)) == "[false, false, true, 3]"


def test_unaskable_mapped_libcuda_counts_as_initialised(tmp_path: Path) -> None:
    # A libcuda without cuDeviceGetCount (not the real driver): assume the worst (initialised).
    (tmp_path / "c.c").write_text("int cuInit(unsigned int f) { (void)f; return 0; }\n")
    lib = tmp_path / "libcuda.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "c.c")], check=True)
    script = (
        "import ctypes, sys\nfrom tfslurm.resolver import cuda_initialised\n"
        "a = cuda_initialised(); ctypes.CDLL(sys.argv[1]); print(a, cuda_initialised())"
    )
    assert run_stages(script, str(lib)) == "False True"


def test_maps_naming_a_libcuda_not_in_this_process(tmp_path: Path, libcuda: Path) -> None:
    # RTLD_NOLOAD never loads: a maps line for a library this process has not loaded (a
    # stale or foreign maps file) is "cannot ask", hence True — and nothing gets loaded.
    maps = tmp_path / "maps"
    maps.write_text(f"7f0000000000-7f0000001000 r-xp 00000000 08:01 123   {libcuda}\n")
    script = (
        "import sys\nfrom tfslurm.resolver import cuda_initialised\n"
        "r = cuda_initialised(sys.argv[1])\n"
        "print(r, any(sys.argv[2] in l for l in open('/proc/self/maps')))"
    )
    assert run_stages(script, str(maps), str(libcuda)) == "True False"
    empty = tmp_path / "empty"
    empty.write_text("")
    assert (
        run_stages(
            "import sys\nfrom tfslurm.resolver import cuda_initialised\nprint(cuda_initialised(sys.argv[1]))",
            str(empty),
        )
        == "False"
    )
