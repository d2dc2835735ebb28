"""tfslurm: TensorFlow distributed training on Slurm, right on every allocation shape.

The core (hostlists, the step model, layouts, GPUs, ports, plans) never imports
TensorFlow; ``SlurmClusterResolver`` imports it lazily, on first use.
"""

from __future__ import annotations

from tfslurm.errors import (
    GpuError,
    HostlistError,
    JobSpecError,
    LayoutError,
    PlanError,
    PortError,
    SlurmEnvError,
    TfslurmError,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # type checkers see the lazy attributes below with their real types
    from tfslurm.resolver import SlurmClusterResolver
    from tfslurm.runtime import run
    from tfslurm.runtime.termination import termination_config

__version__ = "0.1.0"

__all__ = [
    "GpuError",
    "HostlistError",
    "JobSpecError",
    "LayoutError",
    "PlanError",
    "PortError",
    "SlurmClusterResolver",
    "SlurmEnvError",
    "TfslurmError",
    "__version__",
    "run",
    "termination_config",
]


def __getattr__(name: str) -> object:
    # Lazy attributes keep `import tfslurm` cheap, and every TaskProlog hook run imports it:
    # the resolver and the runtime are for training scripts, which ask for them by name.
    if name == "SlurmClusterResolver":
        from tfslurm.resolver import SlurmClusterResolver  # typing, and TensorFlow when first used

        return SlurmClusterResolver
    if name in ("run", "termination_config"):
        from tfslurm.runtime import run, termination  # the whole runtime, none of it the hook's

        return run if name == "run" else termination.termination_config
    raise AttributeError(f"module 'tfslurm' has no attribute {name!r}")
