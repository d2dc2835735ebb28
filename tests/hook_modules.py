"""Which tfslurm modules the TaskProlog hook may import, and the value types they define.

Shared by test_prolog.py (the hook imports no others) and test_hook_border.py (only these
modules keep the hook's import economies).
"""

from __future__ import annotations

# What a hook run may import of tfslurm. Its start-up is most of what a --tf-dist task (set-up
# B) or node (set-up A) pays (docs/admin-guide.md, "Per-task cost"), so a module joins only
# deliberately: the descriptor is imported only for a TF_CONFIG too large to export, frameworks
# and iface only with TFSLURM_FOR / TFSLURM_IFACE, hostlist's compression only for an error.
HOOK_MODULES = frozenset(
    {"tfslurm", "tfslurm.errors", "tfslurm.numbers", "tfslurm.settings", "tfslurm.prolog",
     "tfslurm.value", "tfslurm.cluster", "tfslurm.step", "tfslurm.layout", "tfslurm.jobspec",
     "tfslurm.plan", "tfslurm.ports", "tfslurm.gpus", "tfslurm.gpus.assignment", "tfslurm.gpus.devices",
     "tfslurm.gpus.policy", "tfslurm.gpus.warnings", "tfslurm.hostlist",
     "tfslurm.hostlist.expansion", "tfslurm.hostlist.grammar", "tfslurm.hostlist.groups",
     "tfslurm.hostlist.scanning"}
)  # fmt: skip
# Modules the hook imports only on some tasks' paths: the descriptor (a TF_CONFIG too large to
# export, or TFSLURM_DESCRIPTOR set), frameworks (TFSLURM_FOR), iface (TFSLURM_IFACE) and the
# container comparison (a task in a container). They are part of the hook's budget when they
# run, so they keep its import economies too.
HOOK_OPTIONAL_MODULES = frozenset(
    {"tfslurm.descriptor", "tfslurm.frameworks", "tfslurm.iface", "tfslurm.container_env"}
)
# The value types those modules define (tfslurm.value): written-out classes, which compile
# nothing at import, where dataclasses would compile five methods each and import inspect.
HOOK_VALUES = (
    "tfslurm.cluster.Cluster", "tfslurm.gpus.assignment.GpuAssignment", "tfslurm.gpus.assignment._VisibleList",
    "tfslurm.gpus.warnings.GpuReview", "tfslurm.layout.Layout",
    "tfslurm.plan.GpuPlan", "tfslurm.plan.PlanOptions", "tfslurm.plan.TaskPlan", "tfslurm.ports.PortRule",
    "tfslurm.settings.Settings", "tfslurm.step.GpuVariables", "tfslurm.step.HetComponent",
    "tfslurm.step.Step",
)  # fmt: skip
