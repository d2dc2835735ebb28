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
 * prolog= runs Python once per node and step, not once per task: user_init (in
 * slurmstepd, before the tasks fork) maps a shared buffer and a pipe; in task_init the
 * step's first local task runs the hook with --node, which prints every local task's
 * lines (node.h), and signals the pipe; the other tasks wait for it.  Each task takes its
 * lines only if its environment is exactly what the hook computed them from; otherwise,
 * or if anything about the node run fails, it runs the hook for itself.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "hook.h"
#include "node.h"
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

/* "print" lines go to the task's stdout, as slurmstepd does for a TaskProlog. */
static void hook_print(void *ctx, const char *text, size_t len)
{
	(void) ctx;
	while (len > 0) {
		ssize_t put = write(STDOUT_FILENO, text, len);

		if (put <= 0)
			return;
		text += put;
		len -= (size_t) put;
	}
	(void) !write(STDOUT_FILENO, "\n", 1);
}

/* The hook ran and exited non-zero for this task: it has told the user why. */
static int hook_failed(const char *path, int status, char *err, size_t errlen)
{
	hook_exit_status = status;
	snprintf(err, errlen, "the hook %.300s failed with exit status %d (its message is in the "
		 "task's output)", path, status);
	return -1;
}

static int run_hook(spank_t sp, const char *path, char *err, size_t errlen)
{
	struct tfd_hook_ops ops = { hook_set, hook_unset, hook_print, sp };
	char **env = NULL;
	char *out = NULL;
	size_t out_len = 0;
	int status = 0, rc;

	if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || !env) {
		snprintf(err, errlen, "cannot read the task environment to run %.300s", path);
		return -1;
	}
	if (tfd_hook_run(path, env, tfd_config()->hook_timeout, &out, &out_len, &status, err,
			 errlen) != 0)
		return -1;
	rc = tfd_hook_apply(out, out_len, &ops, err, errlen);
	free(out);
	if (rc != 0)
		return -1;
	if (!WIFEXITED(status)) {
		snprintf(err, errlen, "the hook %.300s was killed by signal %d", path, WTERMSIG(status));
		return -1;
	}
	return WEXITSTATUS(status) == 0 ? 0 : hook_failed(path, WEXITSTATUS(status), err, errlen);
}

/* --- prolog=PATH, once per node: see the top of this file and node.h ---------------- */

#define NODE_SHARED_SIZE (8u << 20)  /* address space only: pages are used as written */
/* then a task gives up waiting and runs the hook itself: the first task's hook run is
 * bounded by hook_timeout, so this only fires when that task itself is stuck */
#define NODE_WAIT_MS ((long) tfd_config()->hook_timeout * 1000 + 10000)

/* NODE_TIMED_OUT: the node run hit hook_timeout; every task fails with that reason
 * rather than waiting as long again on its own run. */
enum { NODE_PENDING, NODE_READY, NODE_FAILED, NODE_TIMED_OUT };

struct node_shared {
	volatile int state;
	size_t env_len; /* data[0..env_len): the first task's environment, NUL-separated */
	size_t out_len; /* data[env_len..+out_len]: the hook's --node output, NUL-terminated */
	char data[];
};

/* Set up by user_init in slurmstepd, inherited by every task process it forks. */
static struct node_shared *node;
static int node_ready_fd[2] = { -1, -1 };

int tfd_remote_user_init(spank_t sp, int ac, char **av)
{
	char *optarg = NULL;
	void *map;

	(void) ac;
	(void) av;
	if (!tfd_config()->prolog[0] || !is_tf_step(sp) ||
	    spank_option_getopt(sp, tfd_option(), &optarg) != ESPANK_SUCCESS)
		return 0;
	/* Any failure here only means every task runs the hook itself. */
	if (pipe2(node_ready_fd, O_CLOEXEC) != 0)
		return 0;
	map = mmap(NULL, NODE_SHARED_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		close(node_ready_fd[0]);
		close(node_ready_fd[1]);
		node_ready_fd[0] = node_ready_fd[1] = -1;
		return 0;
	}
	node = map;
	node->state = NODE_PENDING;
	return 0;
}

/* The first local task: run the hook for the whole node, publish, wake the others. */
static void node_lead(const char *path, char **env)
{
	size_t room = NODE_SHARED_SIZE - sizeof(*node), used = 0, i;
	char *out = NULL, err[512];
	size_t out_len = 0;
	int status = 0, state = NODE_FAILED, rc;

	for (i = 0; env && env[i]; i++) {
		size_t len = strlen(env[i]) + 1;

		if (len > room - used)
			goto publish;
		memcpy(node->data + used, env[i], len);
		used += len;
	}
	node->env_len = used;
	if (!env)
		goto publish;
	rc = tfd_hook_run_arg(path, "--node", env, tfd_config()->hook_timeout, &out, &out_len,
			      &status, err, sizeof(err));
	if (rc == -2) {
		state = NODE_TIMED_OUT;
		goto publish;
	}
	if (rc != 0) {
		slurm_debug("tfslurm: per-node hook run failed (%s); tasks run the hook each", err);
		goto publish;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && out_len < room - used) {
		memcpy(node->data + used, out, out_len + 1);
		node->out_len = out_len;
		state = NODE_READY;
	} else {
		slurm_debug("tfslurm: per-node hook run failed (%s %d, %zu bytes of output); tasks run "
			    "the hook each", WIFEXITED(status) ? "exit status" : "signal",
			    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), out_len);
	}
	free(out);
publish:
	__sync_synchronize();
	node->state = state;
	__sync_synchronize();
	(void) !write(node_ready_fd[1], "", 1); /* one byte, never read: readable for everyone */
}

/* The other tasks: wait until the first one has published (0), or give up (-1). */
static int node_wait(void)
{
	struct pollfd pfd = { node_ready_fd[0], POLLIN, 0 };
	struct timespec start, now;
	long waited = 0;

	clock_gettime(CLOCK_MONOTONIC, &start);
	while (waited < NODE_WAIT_MS) {
		int rc = poll(&pfd, 1, (int) (NODE_WAIT_MS - waited));

		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -1;
		clock_gettime(CLOCK_MONOTONIC, &now);
		waited = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
	}
	return -1;
}

/*
 * Apply this task's lines from the node run.  Returns 0 (done), -1 (the hook failed for
 * this task: err says why, as run_hook would), or 1 (not usable: run the hook here).
 */
static int node_apply(spank_t sp, const char *path, char *err, size_t errlen)
{
	struct tfd_hook_ops ops = { hook_set, hook_unset, hook_print, sp };
	struct tfd_node_block block;
	char **env = NULL, why[128], *copy;
	int localid = -1, rc;

	if (!node || spank_get_item(sp, S_TASK_ID, &localid) != ESPANK_SUCCESS || localid < 0)
		return 1;
	if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS)
		env = NULL;
	if (localid == 0)
		node_lead(path, env); /* publishes even without an environment: the others wait */
	else if (!env)
		return 1;
	else if (node_wait() != 0) {
		slurm_debug("tfslurm: task %d: gave up waiting for the per-node hook run", localid);
		return 1;
	}
	__sync_synchronize();
	if (node->state == NODE_TIMED_OUT) {
		snprintf(err, errlen, "the hook %.300s did not finish within %u s and was killed "
			 "(a SLURM_HOSTFILE that is a pipe, or a hung file system?); the limit is "
			 "hook_timeout= in plugstack.conf", path, tfd_config()->hook_timeout);
		return -1;
	}
	if (node->state != NODE_READY)
		return 1;
	if (tfd_node_find(node->data + node->env_len, node->out_len, (unsigned long) localid, &block) != 0) {
		slurm_debug("tfslurm: task %d: no block for it in the per-node hook output (a wrapper "
			    "without --node?); running the hook for this task", localid);
		return 1;
	}
	if (!tfd_node_env_matches(env, node->data, node->env_len, &block, why, sizeof(why))) {
		slurm_debug("tfslurm: task %d: %s differs from what the per-node hook run assumed; "
			    "running the hook for this task", localid, why);
		return 1;
	}
	/* tfd_hook_apply writes into its buffer: work on a private copy */
	copy = malloc(block.preamble_len + block.lines_len + 1);
	if (!copy)
		return 1;
	memcpy(copy, block.preamble, block.preamble_len);
	memcpy(copy + block.preamble_len, block.lines, block.lines_len);
	copy[block.preamble_len + block.lines_len] = '\0';
	rc = tfd_hook_apply(copy, block.preamble_len + block.lines_len, &ops, err, errlen);
	free(copy);
	if (rc != 0)
		return -1;
	if (block.status != 0)
		return hook_failed(path, block.status, err, errlen);
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
	/* prolog=PATH: the hook runs here, only for --tf-dist tasks (once per node if it can) */
	if (tfd_config()->prolog[0]) {
		int rc = node_apply(sp, tfd_config()->prolog, err, sizeof(err));

		if (rc == 1)
			rc = run_hook(sp, tfd_config()->prolog, err, sizeof(err));
		if (rc != 0)
			return task_fail(err);
	}
	return 0;
}
