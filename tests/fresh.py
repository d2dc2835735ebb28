"""Python code run in a process of its own, as a task would start it: nothing of this test
session's environment that would change what tfslurm or TensorFlow does there."""

from __future__ import annotations

import os
import subprocess
import sys


def python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -c code`` without the session's Slurm, tfslurm, TF_CONFIG and CUDA variables,
    TF's C++ start-up log and oneDNN's rounding off, with ``env`` on top; not checked."""
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "TFSLURM", "TF_CONFIG", "CUDA"))
    }
    clean.update({"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}, **env)
    return subprocess.run(
        [sys.executable, "-c", code], env=clean, capture_output=True, text=True, timeout=180, check=False
    )
