/*
 * local.c - srun (SPANK "local" context).
 *
 * srun only needs the option: its callback (option.c) rejects a bad spec before the
 * step is launched, and Slurm forwards the accepted value to slurmstepd.
 */
#include "plugin.h"

int tfd_local_init(spank_t sp, int ac, char **av)
{
	return tfd_setup(sp, ac, av);
}
