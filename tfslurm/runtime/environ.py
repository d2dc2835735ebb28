"""The environment a task's TensorFlow runs with, built as one dict.

TensorFlow takes its cluster from ``TF_CONFIG`` and its devices from the GPU variables,
both read from the process environment, so whatever runs TF must have them there. The
environment is built here from the caller's, explicitly, and installed only in the process
that runs the program (``tfslurm run``'s child, a TF server, or ``tfslurm.run`` inside the
program itself).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from tfslurm.runtime.roles import Role

# Any of these set sends gRPC through a proxy: the cluster's own hosts must then be in no_proxy.
PROXY_VARIABLES = ("http_proxy", "https_proxy", "grpc_proxy", "HTTP_PROXY", "HTTPS_PROXY")


def task_environ(role: Role, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` plus what this task's TensorFlow must see: the role's variables (its
    GPUs), its TF_CONFIG, TFSLURM_ROLE (``job:index``, for the program and its children),
    and, when a proxy is set, the cluster's hosts in no_proxy."""
    env = dict(environ)
    env.update(role.env)
    env["TF_CONFIG"] = role.tf_config()
    env["TFSLURM_ROLE"] = f"{role.job}:{role.index}"
    env.update(_no_proxy(role, env))
    return env


def _no_proxy(role: Role, env: Mapping[str, str]) -> dict[str, str]:
    """no_proxy and NO_PROXY with the cluster's hosts and the loopback names added; nothing
    when no proxy is set."""
    if not any(env.get(name) for name in PROXY_VARIABLES):
        return {}
    hosts = {a.host for a in role.addresses(("chief", "worker", "ps", "evaluator"))}
    current = [h for h in env.get("no_proxy", "").split(",") if h]
    merged = ",".join(current + sorted(h for h in hosts | {"127.0.0.1", "localhost"} if h not in current))
    return {"no_proxy": merged, "NO_PROXY": merged}


def install_environ(env: Mapping[str, str]) -> None:
    """Make ``env`` this process's environment, for TensorFlow (which reads the C
    environment) and a program that run in this process."""
    for name in [name for name in os.environ if name not in env]:
        del os.environ[name]
    os.environ.update(env)
