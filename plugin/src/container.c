/*
 * container.c - the host-side helper of prolog= mode for containerised tasks; see
 * container.h.
 *
 * The helper is forked from the task's own process at task_init_privileged, so it
 * lives in the host's namespaces and dies with the task (PR_SET_PDEATHSIG).  It
 * drops to the job's user before it reads anything.  Its conversation with the task is
 * one request and one reply: the task writes its environment (NAME=value strings, each
 * NUL-terminated) and closes the pipe; the helper answers "tfslurm-helper RC STATUS\n"
 * and then the hook's output (RC 0) or a one-line reason (RC -1, -2: time ran out).
 * A task that closes the pipe without writing (tfslurm runs the hook itself) makes the
 * helper exit at once.
 */
#define _GNU_SOURCE /* memfd_create, setresuid, setresgid */
#include "container.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "hook.h"
#include "plugin.h"

#define HELPER_HEADER "tfslurm-helper"
/* The task's environment sent to the helper: Slurm caps each variable at 128 KiB. */
#define REQUEST_MAX (16u << 20)

/* pyxis's option: asked by name, as Slurm looks options up by name only. */
static struct spank_option image_option = { "container-image", "IMAGE", "", 1, 0, NULL };

static pid_t helper = -1;
static int to_helper = -1, from_helper = -1;
static struct stat host_mnt;
static int host_mnt_known;

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t put = write(fd, buf, len);

		if (put < 0 && errno == EINTR)
			continue;
		if (put <= 0)
			return -1;
		buf += put;
		len -= (size_t) put;
	}
	return 0;
}

/* Read fd to its end (at most max bytes) within deadline_ms (-1: none); NUL-terminated. */
static int read_all(int fd, size_t max, long deadline_ms, char **out, size_t *out_len)
{
	size_t cap = 8192, n = 0;
	char *buf = malloc(cap + 1);

	while (buf) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		long left = deadline_ms < 0 ? -1 : deadline_ms - now_ms();
		ssize_t got;
		int ready;

		if (n == cap) {
			char *grown = cap >= max ? NULL : realloc(buf, cap * 2 + 1);

			if (!grown)
				break;
			buf = grown;
			cap *= 2;
		}
		if (deadline_ms >= 0 && left <= 0)
			break;
		ready = poll(&pfd, 1, left < 0 ? -1 : (int) (left > 1000000 ? 1000000 : left));
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0)
			break;
		got = read(fd, buf + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			break;
		if (got == 0) {
			buf[n] = '\0';
			*out = buf;
			*out_len = n;
			return 0;
		}
		n += (size_t) got;
	}
	free(buf);
	return -1;
}

/* NUL-separated strings to a NULL-terminated array pointing into buf. */
static char **split_env(char *buf, size_t len)
{
	size_t count = 0, i, k = 0;
	char **env;

	for (i = 0; i < len; i++)
		count += buf[i] == '\0';
	env = calloc(count + 2, sizeof(*env));
	if (!env)
		return NULL;
	for (i = 0; i < len; i += strlen(buf + i) + 1)
		if (buf[i])
			env[k++] = buf + i;
	env[k] = NULL;
	return env;
}

static void reply(int fd, int rc, int status, const char *text, size_t len)
{
	char head[64];
	int n = snprintf(head, sizeof(head), HELPER_HEADER " %d %d\n", rc, status);

	if (write_all(fd, head, (size_t) n) == 0)
		(void) write_all(fd, text, len);
}

/* The helper: never returns. */
static void helper_main(const char *path, char **host_env, int req, int resp, uid_t uid,
			gid_t gid, gid_t *gids, int ngids, pid_t task)
{
	char *buf = NULL, *out = NULL, err[512] = "";
	size_t len = 0, out_len = 0, i;
	char **env;
	int memfd, status = 0, rc;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != task) /* the task died before that took effect */
		_exit(0);
	if (setgroups((size_t) (ngids > 0 ? ngids : 0), gids) != 0 || setresgid(gid, gid, gid) != 0 ||
	    setresuid(uid, uid, uid) != 0) {
		snprintf(err, sizeof(err), "could not become the job's user: %s", strerror(errno));
		reply(resp, -1, 0, err, strlen(err));
		_exit(0);
	}
	if (read_all(req, REQUEST_MAX, -1, &buf, &len) != 0 || len == 0)
		_exit(0);
	env = split_env(buf, len);
	memfd = memfd_create("tfslurm-host-env", MFD_CLOEXEC);
	if (!env || memfd < 0) {
		snprintf(err, sizeof(err), "no memory for the hook's input");
		reply(resp, -1, 0, err, strlen(err));
		_exit(0);
	}
	for (i = 0; host_env && host_env[i]; i++)
		if (write_all(memfd, host_env[i], strlen(host_env[i]) + 1) != 0)
			break;
	lseek(memfd, 0, SEEK_SET);
	rc = tfd_hook_run_in(path, TFD_CONTAINER_ARG, memfd, env, tfd_config()->hook_timeout, &out,
			     &out_len, &status, err, sizeof(err));
	if (rc == 0)
		reply(resp, 0, status, out, out_len);
	else
		reply(resp, rc, 0, err, strlen(err));
	_exit(0);
}

int tfd_container_prepare(spank_t sp, const char *path, char *err, size_t errlen)
{
	char *image = NULL, **host_env = NULL;
	int req[2], resp[2], ngids = 0;
	pid_t task;
	uid_t uid;
	gid_t gid, *gids = NULL;

	host_mnt_known = stat("/proc/self/ns/mnt", &host_mnt) == 0;
	if (spank_option_getopt(sp, &image_option, &image) != ESPANK_SUCCESS || !image || !image[0])
		return 0; /* no container for this step */
	if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &gids, &ngids) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_ENV, &host_env) != ESPANK_SUCCESS) {
		snprintf(err, errlen, "cannot read the job's user or environment for the container helper");
		return -1;
	}
	if (pipe2(req, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	if (pipe2(resp, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		close(req[0]);
		close(req[1]);
		return -1;
	}
	task = getpid();
	helper = fork();
	if (helper == 0) {
		close(req[1]);
		close(resp[0]);
		helper_main(path, host_env, req[0], resp[1], uid, gid, gids, ngids, task);
	}
	close(req[0]);
	close(resp[1]);
	if (helper < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(req[1]);
		close(resp[0]);
		return -1;
	}
	to_helper = req[1];
	from_helper = resp[0];
	return 0;
}

int tfd_container_asked(void)
{
	return helper > 0;
}

int tfd_container_entered(void)
{
	struct stat now;

	if (!host_mnt_known)
		return 0;
	/* no /proc/self/ns/mnt here: not the host's file system */
	if (stat("/proc/self/ns/mnt", &now) != 0)
		return 1;
	return now.st_dev != host_mnt.st_dev || now.st_ino != host_mnt.st_ino;
}

static void reap(void)
{
	if (helper > 0)
		while (waitpid(helper, NULL, 0) < 0 && errno == EINTR)
			;
	helper = -1;
}

void tfd_container_release(void)
{
	if (to_helper >= 0)
		close(to_helper);
	if (from_helper >= 0)
		close(from_helper);
	to_helper = from_helper = -1;
	reap();
}

static int send_env(spank_t sp, char *err, size_t errlen)
{
	char **env = NULL;
	struct sigaction ignore = { .sa_handler = SIG_IGN }, old;
	size_t i;
	int rc = 0;

	if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || !env) {
		snprintf(err, errlen, "cannot read the task environment for the hook");
		return -1;
	}
	sigaction(SIGPIPE, &ignore, &old); /* a helper that died must not kill the task */
	for (i = 0; env[i] && rc == 0; i++)
		rc = write_all(to_helper, env[i], strlen(env[i]) + 1);
	sigaction(SIGPIPE, &old, NULL);
	close(to_helper);
	to_helper = -1;
	if (rc != 0)
		snprintf(err, errlen, "the hook's helper on the host went away (%s)", strerror(errno));
	return rc;
}

int tfd_container_run(spank_t sp, char **out, size_t *out_len, int *status, char *err,
		      size_t errlen)
{
	char *buf = NULL, *body;
	size_t len = 0;
	int rc = -1, hrc = 0, hstatus = 0, used = 0;
	long deadline = now_ms() + ((long) tfd_config()->hook_timeout + 10) * 1000;

	if (send_env(sp, err, errlen) != 0) {
		tfd_container_release();
		return -1;
	}
	if (read_all(from_helper, TFD_HOOK_OUTPUT_MAX + 4096, tfd_config()->hook_timeout ? deadline : -1,
		     &buf, &len) != 0) {
		snprintf(err, errlen, "no answer from the hook's helper on the host within %u s",
			 tfd_config()->hook_timeout + 10);
		if (helper > 0)
			kill(helper, SIGKILL);
		tfd_container_release();
		return -1;
	}
	tfd_container_release();
	if (sscanf(buf, HELPER_HEADER " %d %d\n%n", &hrc, &hstatus, &used) != 2 || used <= 0) {
		snprintf(err, errlen, "the hook's helper on the host ended without an answer");
		free(buf);
		return -1;
	}
	body = buf + used;
	if (hrc != 0) {
		snprintf(err, errlen, "%.*s", (int) (len - (size_t) used), body);
		free(buf);
		return -1;
	}
	memmove(buf, body, len - (size_t) used + 1);
	*out = buf;
	*out_len = len - (size_t) used;
	*status = hstatus;
	rc = 0;
	return rc;
}
