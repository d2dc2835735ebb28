/*
 * allocator.c - sbatch and salloc (SPANK "allocator" context).
 *
 * Registering with spank_option_register here is what makes sbatch/salloc accept the
 * option (a static spank_options table is ignored in this context).  An accepted value
 * is exported by Slurm as SLURM_SPANK__SLURM_SPANK_OPTION_tfslurm_tf_dist into the batch
 * environment, so every srun inside the script inherits it.
 */
#include "plugin.h"

int tfd_allocator_init(spank_t sp, int ac, char **av)
{
	return tfd_setup(sp, ac, av);
}
