/*
 * remote.c - slurmstepd (SPANK "remote" context): give each task of a --tf-dist step
 * the marker TFSLURM_TF_DIST=<spec>.
 *
 * Slurm strips _SLURM_SPANK_OPTION_* from the task environment, so the spec has to be
 * passed on under a name of our own.  Nothing is worked out in C: the hostlist, layout,
 * ports and GPUs come from tfslurm's Python hook, which either runs as the site's
 * TaskProlog right after task_init, or (plugstack argument prolog=PATH) is run from here
 * for --tf-dist tasks only, its output applied to the task as slurmstepd would (hook.c).
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
 *
 * prolog= runs Python once per node and step, not once per task, where it can: user_init
 * sets that up and task_init takes the task's lines from the node run (node_run.h);
 * otherwise the task runs the hook for itself.  This file decides which steps and tasks
 * are touched, how a task's environment is set, and how a task fails; node_run.c only
 * shares one hook run among the tasks of a node.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "container.h"
#include "hook.h"
#include "node_run.h"
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

/* The hook's own exit status when it failed this task (hook_failed), so the task exits
 * with the same code as under a TaskProlog= (set-up B): 2 for a user error. */
static int hook_exit_status;

/* Say why this task cannot start: slurmstepd copies its errors to the task's stderr
 * ("slurmstepd-NODE: error: tfslurm: ...") and to the slurmd log. */
static int task_fail(const char *why)
{
	slurm_error("tfslurm: %s", why);
	if (stepd_pid != 0 && getpid() != stepd_pid)
		exit(hook_exit_status > 0 ? hook_exit_status : 1); /* this task's process, before
		exec: fail it even when "optional" */
	return -1;
}

/* Set name=value in the task environment and read it back: spank_setenv reports success
 * even when Slurm drops a value.  Also the hook's "export" (tfd_hook_apply checks its
 * sizes). */
static int hook_set(void *ctx, const char *name, const char *value, char *err, size_t errlen)
{
	spank_t sp = ctx;
	size_t len = strlen(value);
	char *check;
	spank_err_t rc = spank_setenv(sp, name, value, 1);

	if (rc != ESPANK_SUCCESS) {
		snprintf(err, errlen, "could not set %s: %s", name, spank_strerror(rc));
		return -1;
	}
	check = calloc(1, len + 2);
	if (!check) {
		snprintf(err, errlen, "out of memory checking %s", name);
		return -1;
	}
	rc = spank_getenv(sp, name, check, (int) (len + 2));
	if (rc != ESPANK_SUCCESS || strcmp(check, value) != 0) {
		snprintf(err, errlen, "%s was not stored in the task environment (%s)", name,
			 rc == ESPANK_SUCCESS ? "value differs" : spank_strerror(rc));
		free(check);
		return -1;
	}
	free(check);
	return 0;
}

/*
 * The same for the plugin's own variables (overwrite == 0: keep a value already there).
 * Values here are bounded (spec, template), far below Slurm's 128 KiB limit.
 */
static int set_checked(spank_t sp, const char *name, const char *value, int overwrite,
		       char *err, size_t errlen)
{
	char existing[TFD_SPEC_MAX + 2];
	size_t len = strnlen(value, TFD_SPEC_MAX + 1);

	if (len > TFD_SPEC_MAX || strlen(name) + len + 2 >= TFD_ENV_STRLEN_MAX) {
		snprintf(err, errlen, "value for %s too long for the task environment", name);
		return -1;
	}
	if (!overwrite && spank_getenv(sp, name, existing, sizeof(existing)) != ESPANK_ENV_NOEXIST)
		return 0; /* already set (or too long to read): the task's own value stays */
	return hook_set(sp, name, value, err, errlen);
}

/* --- prolog=PATH: run the hook here and apply its lines to this task ---------------- */

static int hook_unset(void *ctx, const char *name, char *err, size_t errlen)
{
	spank_err_t rc = spank_unsetenv((spank_t) ctx, name);

	if (rc != ESPANK_SUCCESS) {
		snprintf(err, errlen, "could not unset %s: %s", name, spank_strerror(rc));
		return -1;
	}
	return 0;
}

/* One line to fd, whole: a short write is resumed, a failed one drops the rest. */
static void write_line(int fd, const char *text, size_t len)
{
	while (len > 0) {
		ssize_t put = write(fd, text, len);

		if (put <= 0)
			return;
		text += put;
		len -= (size_t) put;
	}
	(void) !write(fd, "\n", 1);
}

/* "print" lines go to the task's stdout, as slurmstepd does for a TaskProlog. */
static void hook_print(void *ctx, const char *text, size_t len)
{
	(void) ctx;
	write_line(STDOUT_FILENO, text, len);
}

/* "warn" lines go to the task's stderr, one line each. */
static void hook_warn(void *ctx, const char *text, size_t len)
{
	(void) ctx;
	write_line(STDERR_FILENO, text, len);
}

/* The hook ran and exited non-zero for this task: it has told the user why. */
static int hook_failed(const char *path, int status, char *err, size_t errlen)
{
	hook_exit_status = status;
	snprintf(err, errlen, "the hook %.300s failed with exit status %d (its message is in the "
		 "task's output)", path, status);
	return -1;
}

/* The hook's output applied to the task (and freed), then its exit status judged. */
static int applied(const char *path, const struct tfd_hook_ops *ops, char *out, size_t out_len,
		   int status, char *err, size_t errlen)
{
	int rc = tfd_hook_apply(out, out_len, ops, err, errlen);

	free(out);
	if (rc != 0)
		return -1;
	if (!WIFEXITED(status)) {
		snprintf(err, errlen, "the hook %.300s was killed by signal %d", path, WTERMSIG(status));
		return -1;
	}
	return WEXITSTATUS(status) == 0 ? 0 : hook_failed(path, WEXITSTATUS(status), err, errlen);
}

static int run_hook(spank_t sp, const char *path, char *err, size_t errlen)
{
	struct tfd_hook_ops ops = { hook_set, hook_unset, hook_print, sp, hook_warn };
	char **env = NULL;
	char *out = NULL;
	size_t out_len = 0;
	int status = 0;

	if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || !env) {
		snprintf(err, errlen, "cannot read the task environment to run %.300s", path);
		return -1;
	}
	if (tfd_hook_run(path, env, tfd_config()->hook_timeout, &out, &out_len, &status, err,
			 errlen) != 0)
		return -1;
	return applied(path, &ops, out, out_len, status, err, errlen);
}

/* A prolog=PATH hook is configured and this task step asked for --tf-dist. */
static int runs_prolog(spank_t sp)
{
	char *optarg = NULL;

	return tfd_config()->prolog[0] && is_tf_step(sp) &&
	       spank_option_getopt(sp, tfd_option(), &optarg) == ESPANK_SUCCESS;
}

/* --- prolog=PATH for a task in a container (container.h) --------------------------- */

/* Why the helper could not start, told when task_init needs it. */
static char container_err[512];

int tfd_remote_task_init_privileged(spank_t sp, int ac, char **av)
{
	(void) ac;
	(void) av;
	if (!runs_prolog(sp))
		return 0;
	if (tfd_container_prepare(sp, tfd_config()->prolog, container_err, sizeof(container_err)) != 0)
		container_err[sizeof(container_err) - 1] = '\0';
	return 0;
}

/* The hook, run by the helper on the host for this task now in its container. */
static int container_hook(spank_t sp, const char *path, char *err, size_t errlen)
{
	struct tfd_hook_ops ops = { hook_set, hook_unset, hook_print, sp, hook_warn };
	char *out = NULL;
	size_t out_len = 0;
	int status = 0;

	if (tfd_container_run(sp, &out, &out_len, &status, err, errlen) != 0)
		return -1;
	return applied(path, &ops, out, out_len, status, err, errlen);
}

/* 1: the hook ran for this containerised task (rc in *rc); 0: run it as usual. */
static int in_container(spank_t sp, const char *path, int *rc, char *err, size_t errlen)
{
	static const char wrong_order[] =
		"tfslurm: plugstack.conf lists tfslurm before pyxis, so the container's environment "
		"replaces what --tf-dist sets; list tfslurm after pyxis (tfslurm's admin guide)\n";

	if (tfd_container_entered() && tfd_container_asked()) {
		*rc = container_hook(sp, path, err, errlen);
		return 1;
	}
	if (tfd_container_entered() && container_err[0]) {
		snprintf(err, errlen, "cannot run the hook for a task in a container: %.400s",
			 container_err);
		*rc = -1;
		return 1;
	}
	if (tfd_container_asked()) {
		tfd_container_release();
		(void) !write(STDERR_FILENO, wrong_order, sizeof(wrong_order) - 1);
	}
	return 0;
}

/* --- prolog=PATH, once per node and step if it can (node_run.h) ------------------- */

int tfd_remote_user_init(spank_t sp, int ac, char **av)
{
	(void) ac;
	(void) av;
	if (!runs_prolog(sp))
		return 0;
	tfd_node_share();
	return 0;
}

/* 0 (this task's lines applied), -1 (the hook failed for this task: err says why, as
 * run_hook would), or 1 (no usable node run: run the hook here). */
static int node_hook(spank_t sp, const char *path, char *err, size_t errlen)
{
	struct tfd_hook_ops ops = { hook_set, hook_unset, hook_print, sp, hook_warn };
	int status = 0, rc = tfd_node_apply(sp, path, &ops, &status, err, errlen);

	if (rc == 0 && status != 0)
		return hook_failed(path, status, err, errlen);
	return rc;
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
	/* prolog=PATH: the hook runs here, only for --tf-dist tasks (once per node if it can) */
	if (tfd_config()->prolog[0]) {
		int rc = 0;

		if (in_container(sp, tfd_config()->prolog, &rc, err, sizeof(err))) {
			if (rc != 0)
				return task_fail(err);
			return 0;
		}
		rc = node_hook(sp, tfd_config()->prolog, err, sizeof(err));
		if (rc == 1)
			rc = run_hook(sp, tfd_config()->prolog, err, sizeof(err));
		if (rc != 0)
			return task_fail(err);
	}
	return 0;
}
