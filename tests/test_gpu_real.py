"""On a machine with an NVIDIA GPU and driver: tfslurm against the real CUDA runtime.

* The TaskProlog hook's lines and ``tfslurm.SlurmClusterResolver``, on a synthesized step
  that gives this task GPU 0 of the visible ones: TensorFlow then sees exactly that GPU
  (matched to ``nvidia-smi`` by PCI bus id).
* ``cuda_initialised()`` after nothing, ``import torch``, ``torch.cuda.device_count()``,
  ``import cupy``, ``cuInit(0)`` and TensorFlow listing its GPUs, each in a fresh process,
  against what the driver itself shows: after the stage, ``CUDA_VISIBLE_DEVICES`` is
  emptied and the driver asked for its devices; they are still there only when CUDA was
  initialised before (the variable is read once, in ``cuInit``).
* The nvidia-smi probe counts what ``nvidia-smi -L`` lists.

Everywhere else (no nvidia-smi, no GPU listed, no loadable libcuda; CI) the module skips
with a one-line reason. Expected values come from the runtime, never from this file.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from taskprolog import apply_taskprolog_output

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 300  # seconds for one fresh process (TensorFlow's import and GPU start-up)


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=TIMEOUT, env=env, stdin=subprocess.DEVNULL, check=False
    )


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:200] if lines else "no output"


def why_no_gpu() -> str | None:
    """Why this machine cannot run these tests (one line), or None when it can."""
    if shutil.which("nvidia-smi") is None:
        return "no NVIDIA GPU here: nvidia-smi is not on PATH"
    try:
        listed = _run(["nvidia-smi", "-L"])
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi -L did not run: {_first_line(str(exc))}"
    if listed.returncode != 0:
        return f"nvidia-smi -L failed (rc {listed.returncode}): {_first_line(listed.stdout + listed.stderr)}"
    if not gpu_lines(listed.stdout):
        return "nvidia-smi -L lists no GPU"
    loads = _run([sys.executable, "-c", "import ctypes; ctypes.CDLL('libcuda.so.1')"])
    if loads.returncode != 0:
        return f"libcuda.so.1 cannot be loaded: {_last_line(loads.stderr)}"
    return None


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1][:200] if lines else "no output"


def gpu_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("GPU ")]


WHY = why_no_gpu()
if WHY is not None:
    pytest.skip(WHY, allow_module_level=True)

pytestmark = pytest.mark.gpu


def python_env(**extra: str) -> dict[str, str]:
    """This process's environment without Slurm's or tfslurm's variables, tfslurm importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "TFSLURM", "TF_CONFIG"))}
    env.update(PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2", **extra)
    return env


def run_python(code: str, env: dict[str, str], *args: str) -> str:
    done = _run([sys.executable, "-c", code, *args], env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def nvidia_smi_bus_ids() -> list[str]:
    """PCI bus id of each GPU in nvidia-smi's index order, normalised."""
    done = _run(["nvidia-smi", "--query-gpu=index,pci.bus_id", "--format=csv,noheader"])
    assert done.returncode == 0, done.stderr
    rows = [line.split(",") for line in done.stdout.strip().splitlines()]
    return [bus_id(b) for _, b in sorted((int(i), b.strip()) for i, b in rows)]


def bus_id(text: str) -> str:
    """``00000000:18:00.0`` (nvidia-smi) and ``0000:18:00.0`` (TensorFlow) alike."""
    domain, _, rest = text.strip().partition(":")
    return f"{int(domain, 16):x}:{rest.lower()}"


def step_env(num_gpus: int) -> dict[str, str]:
    """Task 0 of a one-node step with a task per visible GPU and every GPU given to the
    step (no per-task binding): the plan gives this task GPU 0."""
    tasks = max(num_gpus, 1)
    gpus = ",".join(str(i) for i in range(num_gpus))
    return python_env(
        SLURM_JOB_ID="4242", SLURM_STEP_ID="0", SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_NODEID="0",
        SLURMD_NODENAME=socket.gethostname().split(".")[0], SLURM_STEP_NODELIST=socket.gethostname().split(".")[0],
        SLURM_STEP_NUM_NODES="1", SLURM_STEP_NUM_TASKS=str(tasks), SLURM_STEP_TASKS_PER_NODE=str(tasks),
        SLURM_GTIDS=",".join(str(i) for i in range(tasks)), SLURM_GPUS_ON_NODE=str(num_gpus),
        SLURM_STEP_GPUS=gpus, SLURM_JOB_GPUS=gpus, CUDA_VISIBLE_DEVICES=gpus,
        CUDA_DEVICE_ORDER="PCI_BUS_ID", TFSLURM_TF_DIST="worker:*",
    )  # fmt: skip


#: Prints TensorFlow's GPUs as a JSON list of PCI bus ids (after the resolver, with argv[1]).
TF_GPUS = r"""
import json, re, sys
if sys.argv[1:] == ["resolver"]:
    import tfslurm
    tfslurm.SlurmClusterResolver()  # writes this task's CUDA_VISIBLE_DEVICES
from tensorflow.python.client import device_lib
ids = [re.search(r"pci bus id: ([0-9a-fA-F:.]+)", d.physical_device_desc).group(1)
       for d in device_lib.list_local_devices() if d.device_type == "GPU"]
print(json.dumps(ids))
"""


@pytest.fixture(scope="module")
def tf_with_gpus() -> None:
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed")
    built = run_python("import tensorflow as tf; print(tf.test.is_built_with_cuda())", python_env())
    if built != "True":
        pytest.skip("tensorflow is a CPU-only build (tensorflow-cpu): it cannot see GPUs")


def visible_count() -> int:
    return len(gpu_lines(_run(["nvidia-smi", "-L"]).stdout))


def tf_bus_ids(env: dict[str, str], *args: str) -> list[str]:
    return [bus_id(b) for b in json.loads(run_python(TF_GPUS, env, *args))]


def test_tf_sees_only_the_gpu_the_taskprolog_gave(tf_with_gpus: None) -> None:
    env = step_env(visible_count())
    hook = _run([sys.executable, "-c", "from tfslurm.prolog import main; raise SystemExit(main())"], env=env)
    assert hook.returncode == 0, hook.stdout + hook.stderr
    task_env, printed = apply_taskprolog_output(env, hook.stdout)
    assert task_env["CUDA_VISIBLE_DEVICES"] == "0", (hook.stdout, printed)
    assigned = [nvidia_smi_bus_ids()[int(i)] for i in task_env["CUDA_VISIBLE_DEVICES"].split(",")]
    assert tf_bus_ids(task_env) == assigned


def test_tf_sees_only_the_gpu_the_resolver_gave(tf_with_gpus: None) -> None:
    env = step_env(visible_count())
    assigned = run_python(
        "import os, tfslurm; tfslurm.SlurmClusterResolver(); print(os.environ['CUDA_VISIBLE_DEVICES'])", env
    )
    assert assigned == "0"
    expected = [nvidia_smi_bus_ids()[int(i)] for i in assigned.split(",")]
    assert tf_bus_ids(env, "resolver") == expected


#: argv[1] is the stage; prints what cuda_initialised() said and what the driver shows after
#: CUDA_VISIBLE_DEVICES is emptied: cuInit's result and the device count.
STAGE = r"""
import ctypes, json, os, sys
stage = sys.argv[1]
if stage == "import torch":
    import torch
elif stage == "torch.cuda.device_count()":
    import torch
    torch.cuda.device_count()
elif stage == "import cupy":
    import cupy
elif stage == "cuInit(0)":
    ctypes.CDLL("libcuda.so.1").cuInit(0)
elif stage == "tensorflow lists its GPUs":
    import tensorflow as tf
    tf.config.list_physical_devices("GPU")
from tfslurm.resolver import cuda_initialised
seen = cuda_initialised()
os.environ["CUDA_VISIBLE_DEVICES"] = ""  # honoured only by a cuInit still to come
driver = ctypes.CDLL("libcuda.so.1")
result = driver.cuInit(0)
count = ctypes.c_int(0)
if result == 0:
    driver.cuDeviceGetCount(ctypes.byref(count))
print(json.dumps({"seen": seen, "cuInit": result, "count": count.value}))
"""
CUDA_ERROR_NO_DEVICE = 100
STAGES = {
    "nothing": None,
    "import torch": "torch",
    "torch.cuda.device_count()": "torch",
    "import cupy": "cupy",
    "cuInit(0)": None,
    "tensorflow lists its GPUs": "tensorflow",
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_cuda_initialised_matches_the_driver(stage: str) -> None:
    module = STAGES[stage]
    if module is not None and importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")
    answer = json.loads(run_python(STAGE, python_env(), stage))
    # CUDA_VISIBLE_DEVICES="" hides every device from a cuInit that reads it
    assert answer["cuInit"] in (0, CUDA_ERROR_NO_DEVICE), answer
    initialised = answer["cuInit"] == 0 and answer["count"] > 0
    if stage in ("nothing", "cuInit(0)"):  # the oracle itself, on the two known cases
        assert initialised == (stage == "cuInit(0)"), answer
    assert answer["seen"] is initialised, answer


def test_probe_counts_what_nvidia_smi_lists() -> None:
    from tfslurm.gpus.probes import count_visible_gpus

    assert count_visible_gpus() == visible_count()
