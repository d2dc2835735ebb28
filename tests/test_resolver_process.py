"""What importing tfslurm and its resolver brings in, and the resolver in a process of its
own: TensorFlow only once the resolver class is used; without TensorFlow, plain dicts; a
warning when TF's devices were initialised before the resolver could set the GPUs. Each
runs a fresh Python with a written step environment: nothing of the installed Slurm.
"""

from __future__ import annotations

import pytest

from conftest import needs
from fresh import python
from stepenv import ONE_NODE_STEP as STEP

pytestmark = pytest.mark.pure


@pytest.mark.tf
@needs("tensorflow")
def test_importing_tfslurm_and_the_resolver_does_not_import_tf() -> None:
    done = python(
        "import sys, tfslurm, tfslurm.resolver, tfslurm.plan\n"
        "assert 'tensorflow' not in sys.modules, 'imported TF'\n"
        "cls = tfslurm.SlurmClusterResolver\n"
        "assert 'tensorflow' in sys.modules\n"
        "import tensorflow as tf\n"
        "assert issubclass(cls, tf.distribute.cluster_resolver.ClusterResolver)\n"
        "assert cls is tfslurm.resolver.SlurmClusterResolver\n"
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_without_tensorflow_the_resolver_works_on_plain_dicts() -> None:
    done = python(
        "import sys; sys.modules['tensorflow'] = None\n"
        "import tfslurm\n"
        "r = tfslurm.SlurmClusterResolver(port_base=5000)\n"
        "print(r.cluster_spec(), r.task_type, r.task_id, r.num_accelerators())\n",
        **STEP,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "{'worker': ['n1:5000', 'n1:5001']} worker 1 {'GPU': 1}"


@pytest.mark.tf
@needs("tensorflow")
def test_auto_set_gpu_warns_once_tf_devices_are_initialised() -> None:
    code = (
        "import warnings, os, tensorflow as tf, tfslurm\n"
        "tf.constant(1.0) + 1\n"  # initialises TF's devices: CUDA_VISIBLE_DEVICES is read now
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    r = tfslurm.SlurmClusterResolver()\n"
        "    again = tfslurm.SlurmClusterResolver()\n"  # idempotent: nothing to change, no warning
        "print(os.environ['CUDA_VISIBLE_DEVICES'], [w.category.__name__ for w in caught])\n"
        "print(' | '.join(str(w.message) for w in caught))\n"
    )
    done = python(code, **STEP)
    assert done.returncode == 0, done.stderr[-2000:]
    first, message = done.stdout.strip().splitlines()
    assert first == "1 ['RuntimeWarning']"
    assert "already initialised" in message
    quiet = python(code.replace("tf.constant(1.0) + 1\n", ""), **STEP)
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert quiet.stdout.splitlines()[0] == "1 []"  # set before TF's devices exist: no warning
