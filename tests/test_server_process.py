"""A PS task's TF server process (``tfslurm run`` for ps and worker tasks) in a process of
its own: TensorFlow without what only a program would use, and the server still starts."""

from __future__ import annotations

import pytest

from conftest import needs
from fresh import python

pytestmark = pytest.mark.pure


@pytest.mark.tf
@needs("tensorflow")
@needs("jax")
def test_a_server_imports_tensorflow_without_jax_and_serves() -> None:
    code = (
        "import sys\n"
        "from tfslurm.runtime.servers import server_tensorflow\n"
        "tf = server_tensorflow()\n"
        "assert sys.modules.get('jax') is None, 'JAX imported'\n"
        "server = tf.distribute.Server.create_local_server()\n"
        "print(server.target)\n"
    )
    done = python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("grpc://localhost:"), done.stdout
