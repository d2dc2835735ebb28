"""Small training programs shipped with tfslurm (tensorflow-cpu friendly, seconds to run).

* ``python -m tfslurm.examples.mwms``: MultiWorkerMirroredStrategy, custom training loop.
* ``python -m tfslurm.examples.ps``: ParameterServerStrategy + ClusterCoordinator, with a
  side-car evaluator when the cluster has one.

Both checkpoint on preemption and resume after a requeue. Run them under
``srun tfslurm run -- python -m tfslurm.examples.mwms`` or through ``sbatch_templates/``.
"""
