"""Import TensorFlow with a one-line error when it is missing (the runtime's only TF entry)."""

from __future__ import annotations

import sys
from types import ModuleType

from tfslurm.errors import TensorFlowMissing


def tensorflow() -> ModuleType:
    try:
        import tensorflow as tf
    except ImportError as exc:
        raise TensorFlowMissing(
            f"TensorFlow cannot be imported by {sys.executable} ({exc}): "
            "pip install tensorflow-cpu (or tensorflow) into the environment tfslurm runs in"
        ) from None
    return tf  # type: ignore[no-any-return]  # TF's module, typed Any where TF is untyped
