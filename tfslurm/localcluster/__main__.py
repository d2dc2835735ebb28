"""``python -m tfslurm.localcluster up|down|status [...]`` = ``tfslurm cluster ...``."""

from __future__ import annotations

import sys

from tfslurm.cli import main

if __name__ == "__main__":
    sys.exit(main(["cluster", *sys.argv[1:]]))
