import sys

from tfslurm.cli import main

sys.exit(main())
