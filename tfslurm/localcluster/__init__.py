"""A throwaway, real multi-node Slurm cluster on one machine (root, Debian slurm-wlm).

For the test suite (tests/conftest.py), ``tfslurm cluster up|down|status`` and
``tfslurm demo``. See docs/test-cluster.md. Not for production: it runs Slurm with
``AuthType=auth/none``, so any local user can act as any other user on it.
"""

from __future__ import annotations

from tfslurm.errors import ClusterConfigError, ClusterTimeout
from tfslurm.localcluster.cluster import LocalCluster
from tfslurm.localcluster.config import ClusterConfig
from tfslurm.localcluster.host import clean_environ, missing_requirements, slurm_version
from tfslurm.localcluster.orphans import reap_orphans

__all__ = [
    "ClusterConfig",
    "ClusterConfigError",
    "ClusterTimeout",
    "LocalCluster",
    "clean_environ",
    "missing_requirements",
    "reap_orphans",
    "slurm_version",
]
