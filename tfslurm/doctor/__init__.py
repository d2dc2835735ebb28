"""``tfslurm doctor``: what would stop a real training run, found before it starts.

One module per concern: :mod:`~tfslurm.doctor.findings` (a finding, the report and its
exit status), :mod:`~tfslurm.doctor.site` (the login node: Slurm, the plugin, the hook's
wrapper), :mod:`~tfslurm.doctor.node` (what one node of the allocation sees: its port, GPUs,
frameworks, container, the others' names and ports, the shared directory) and
:mod:`~tfslurm.doctor.gather` (the gathering point: the one step over every node, the
nodes' clocks, and the decisions over all their reports). The command
(``tfslurm/commands/doctor.py``) reads the environment and hands it down typed.
"""
