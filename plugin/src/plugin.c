/*
 * plugin.c - entry points of the tfslurm SPANK plugin (--tf-dist).
 *
 * The library is built with -fvisibility=hidden; only what Slurm looks up by name is
 * exported here: the plugin identification symbols Slurm's loader requires
 * (plugin_name, plugin_type, plugin_version, spank_plugin_version, and on Slurm >= 25.05
 * slurm_spank_init_failure_mode) and the slurm_spank_* callbacks.  Each callback only
 * dispatches on the context: srun, sbatch and salloc need nothing but the option
 * (option.c); slurmstepd's work is in remote.c.
 */
#include <slurm/spank.h>

#include "plugin.h"

#define TFD_EXPORT __attribute__((visibility("default")))

/* Same values SPANK_PLUGIN(tfslurm, 1) would define, but exported explicitly. */
TFD_EXPORT const char plugin_name[] = "tfslurm";
TFD_EXPORT const char plugin_type[] = "spank";
TFD_EXPORT const unsigned int plugin_version = SLURM_VERSION_NUMBER;
TFD_EXPORT const unsigned int spank_plugin_version = 1;

#if defined(SLURM_VERSION_NUM) && SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
/* If slurm_spank_init ever failed, fail the job rather than drain the node. */
TFD_EXPORT int slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE;
#endif

TFD_EXPORT int slurm_spank_init(spank_t sp, int ac, char **av);
TFD_EXPORT int slurm_spank_user_init(spank_t sp, int ac, char **av);
TFD_EXPORT int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av);
TFD_EXPORT int slurm_spank_task_init(spank_t sp, int ac, char **av);

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	/* srun only needs the option: its callback (option.c) rejects a bad spec before the
	 * step is launched, and Slurm forwards the accepted value to slurmstepd. */
	case S_CTX_LOCAL:
	/* sbatch/salloc: registering with spank_option_register is what makes them accept
	 * the option (a static spank_options table is ignored there).  Slurm exports an
	 * accepted value as SLURM_SPANK__SLURM_SPANK_OPTION_tfslurm_tf_dist into the batch
	 * environment, so every srun inside the script inherits it. */
	case S_CTX_ALLOCATOR:
		return tfd_setup(sp, ac, av);
	case S_CTX_REMOTE:
		return tfd_remote_init(sp, ac, av);
	case S_CTX_SLURMD:
		/* where admins look: the release, and a bad plugstack.conf argument, in slurmd's
		 * log at start */
		slurm_info("tfslurm: plugin version %s", TFD_VERSION);
		tfd_log_config(ac, av);
		return 0;
	default:
		return 0; /* job_script context: nothing to do */
	}
}

/* slurmstepd, once per step and node, before the tasks are forked */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	return tfd_remote_user_init(sp, ac, av);
}

/* slurmstepd, in each task's process before any plugin's task_init: still as root and
 * in the host's namespaces (container.h) */
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	return tfd_remote_task_init_privileged(sp, ac, av);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	return tfd_remote_task_init(sp, ac, av);
}
