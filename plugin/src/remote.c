/*
 * remote.c - slurmstepd (SPANK "remote" context): give each task of a --tf-dist step
 * the marker TFSLURM_TF_DIST=<spec>.
 *
 * Slurm strips _SLURM_SPANK_OPTION_* from the task environment, so the spec has to be
 * passed on under a name of our own.  Nothing else happens in C: the hostlist, layout,
 * ports and GPUs are worked out by tfslurm's Python TaskProlog, which runs right after
 * task_init in the same task.
 *
 * Failure policy: a step without --tf-dist is never touched and never failed.  A task
 * of a --tf-dist step whose marker cannot be set fails (exit code 1, the node is not
 * drained), because running TF without its cluster description would hang or train
 * alone.  Slurm only fails the task for a "required" plugin, and "required" also makes
 * every job and slurmd itself fail when the .so is missing or built for another Slurm
 * release; so the plugin is meant to be "optional" and ends the task itself: task_init
 * runs in the task's own forked process (slurmstepd's exec_task), where exiting is
 * exactly what Slurm does for a failing required plugin.  If it ever ran in slurmstepd
 * itself (pid recorded in init), it returns -1 instead of exiting.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "plugin.h"

/* slurmstepd's pid, to tell its own process from the task processes it forks. */
static pid_t stepd_pid;

int tfd_remote_init(spank_t sp, int ac, char **av)
{
	stepd_pid = getpid();
	/* The option must be registered here too, or slurmstepd rejects the forwarded
	 * value; tfd_setup never fails. */
	return tfd_setup(sp, ac, av);
}

/* Batch scripts, the extern step and salloc's interactive step are not TF tasks. */
static int is_tf_step(spank_t sp)
{
	uint32_t stepid = 0;

	if (spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS)
		return 0;
	switch (stepid) {
	case SLURM_BATCH_SCRIPT:
	case SLURM_EXTERN_CONT:
#ifdef SLURM_INTERACTIVE_STEP /* salloc's interactive step (newer releases) */
	case SLURM_INTERACTIVE_STEP:
#endif
#ifdef SLURM_PENDING_STEP
	case SLURM_PENDING_STEP:
#endif
		return 0;
	default:
		return 1;
	}
}

/* Say why this task cannot start: slurmstepd copies its errors to the task's stderr
 * ("slurmstepd-NODE: error: tfslurm: ...") and to the slurmd log. */
static int task_fail(const char *why)
{
	slurm_error("tfslurm: %s", why);
	if (stepd_pid != 0 && getpid() != stepd_pid)
		exit(1); /* this task's process, before exec: fail it even when "optional" */
	return -1;
}

/*
 * Set name=value in the task environment (overwrite == 0: keep a value already there)
 * and read it back: spank_setenv reports success even when Slurm drops a value.
 * Values here are bounded (spec, template), far below Slurm's 128 KiB limit.
 */
static int set_checked(spank_t sp, const char *name, const char *value, int overwrite,
		       char *err, size_t errlen)
{
	char check[TFD_SPEC_MAX + 2];
	size_t len = strnlen(value, TFD_SPEC_MAX + 1);
	spank_err_t rc;

	if (len > TFD_SPEC_MAX || strlen(name) + len + 2 >= TFD_SLURM_ENV_STRLEN_MAX) {
		snprintf(err, errlen, "value for %s too long for the task environment", name);
		return -1;
	}
	memset(check, 0, sizeof(check));
	if (!overwrite && spank_getenv(sp, name, check, sizeof(check)) != ESPANK_ENV_NOEXIST)
		return 0; /* already set (or too long to read): the task's own value stays */
	rc = spank_setenv(sp, name, value, 1);
	if (rc != ESPANK_SUCCESS) {
		snprintf(err, errlen, "could not set %s: %s", name, spank_strerror(rc));
		return -1;
	}
	memset(check, 0, sizeof(check));
	rc = spank_getenv(sp, name, check, sizeof(check));
	if (rc != ESPANK_SUCCESS || strcmp(check, value) != 0) {
		snprintf(err, errlen, "%s was not stored in the task environment (%s)", name,
			 rc == ESPANK_SUCCESS ? "value differs" : spank_strerror(rc));
		return -1;
	}
	return 0;
}

int tfd_remote_task_init(spank_t sp, int ac, char **av)
{
	char *optarg = NULL;
	const char *spec;
	char err[512];

	(void) ac;
	(void) av;
	if (!is_tf_step(sp))
		return 0;
	if (spank_option_getopt(sp, tfd_option(), &optarg) != ESPANK_SUCCESS)
		return 0; /* --tf-dist not given: leave the task alone */

	spec = tfd_resolve_spec(optarg, err, sizeof(err));
	if (!spec)
		return task_fail(err);

	if (set_checked(sp, TFD_MARKER, spec, 1, err, sizeof(err)) != 0)
		return task_fail(err);
	/* Site default for the host names in TF_CONFIG; a user's own value wins. */
	if (tfd_config()->host_template[0] &&
	    set_checked(sp, TFD_HOST_TEMPLATE_VAR, tfd_config()->host_template, 0, err,
			sizeof(err)) != 0)
		return task_fail(err);
	return 0;
}
