/*
 * node_run.c - the once-per-node hook run of prolog= mode in slurmstepd; see node_run.h.
 *
 * The buffer is an anonymous shared mapping, so what the first task writes is seen by
 * the other task processes of the step (all forked from the same slurmstepd); the pipe's
 * write end gets one byte that is never read, which makes the read end readable for
 * every waiting task at once.  A task waits at most hook_timeout + 10 s.
 */
#define _GNU_SOURCE /* pipe2 */
#include "node_run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "node.h"
#include "plugin.h"
#include "version.h"

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

/* Set up by tfd_node_share (user_init, in slurmstepd), inherited by every task process
 * it forks. */
static struct node_shared *node;
static int node_ready_fd[2] = { -1, -1 };

void tfd_node_share(void)
{
	void *map;

	/* Any failure here only means every task runs the hook itself. */
	if (pipe2(node_ready_fd, O_CLOEXEC) != 0)
		return;
	map = mmap(NULL, NODE_SHARED_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		close(node_ready_fd[0]);
		close(node_ready_fd[1]);
		node_ready_fd[0] = node_ready_fd[1] = -1;
		return;
	}
	node = map;
	node->state = NODE_PENDING;
}

/*
 * A hook from another release than the plugin: one line in slurmd's log and on this task's
 * stderr.  Only the node's first task runs this, once per node and step, after the others
 * were woken; the step goes on (version.h).
 */
static void version_note(const char *path, const char *out, size_t out_len)
{
	char msg[512];
	size_t len;

	if (tfd_version_check(TFD_VERSION, path, out, out_len, msg, sizeof(msg) - 1) == 0)
		return;
	slurm_info("%s", msg);
	len = strlen(msg);
	msg[len++] = '\n'; /* room kept above: the line goes out in one write */
	(void) !write(STDERR_FILENO, msg, len);
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
	if (state == NODE_READY)
		version_note(path, node->data + used, node->out_len);
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

/* Every task of the step: 0 (applied; *status set), -1 (err) or 1 (run the hook here);
 * see node_run.h. */
int tfd_node_apply(spank_t sp, const char *path, const struct tfd_hook_ops *ops, int *status,
		   char *err, size_t errlen)
{
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
	rc = tfd_hook_apply(copy, block.preamble_len + block.lines_len, ops, err, errlen);
	free(copy);
	if (rc != 0)
		return -1;
	*status = block.status;
	return 0;
}

