/*
 * hook.c - run the tfslurm hook and apply its TaskProlog-protocol output; see hook.h.
 */
#define _GNU_SOURCE /* pipe2 */
#include "hook.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "text.h"

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static int valid_name(const char *name)
{
	const char *p = name;

	if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_'))
		return 0;
	for (p++; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9') || *p == '_'))
			return 0;
	return 1;
}

static int bad_name(const char *name, char *err, size_t errlen)
{
	char shown[72];

	tfd_quote(name, 40, shown, sizeof(shown));
	tfd_set_err(err, errlen, "hook output names an invalid variable '%s'", shown);
	return -1;
}

int tfd_hook_apply(char *buf, size_t len, const struct tfd_hook_ops *ops, char *err,
		   size_t errlen)
{
	size_t pos = 0;

	if (memchr(buf, '\0', len)) {
		tfd_set_err(err, errlen, "hook output contains a NUL byte");
		return -1;
	}
	while (pos < len) {
		char *line = buf + pos;
		char *nl = memchr(line, '\n', len - pos);
		size_t line_len = nl ? (size_t) (nl - line) : len - pos;

		line[line_len] = '\0'; /* nl, or the byte after buf[len-1] (caller's NUL) */
		pos += line_len + 1;

		if (strncmp(line, "print ", 6) == 0) {
			char *text = line + 6;

			while (is_space(*text))
				text++;
			ops->print(ops->ctx, text, strlen(text));
		} else if (strncmp(line, "warn ", 5) == 0) {
			char *text = line + 5;

			while (is_space(*text))
				text++;
			if (ops->warn)
				ops->warn(ops->ctx, text, strlen(text));
		} else if (strncmp(line, "export ", 7) == 0) {
			char *name = line + 7, *eq, *end, *value;

			while (is_space(*name))
				name++;
			eq = strchr(name, '=');
			if (!eq) {
				tfd_set_err(err, errlen, "hook output has an export line without '='");
				return -1;
			}
			value = eq + 1;
			for (end = eq; end > name && is_space(end[-1]); end--)
				;
			*end = '\0';
			if (!valid_name(name))
				return bad_name(name, err, errlen);
			if (strlen(name) + strlen(value) + 2 >= TFD_ENV_STRLEN_MAX) {
				tfd_set_err(err, errlen, "hook output exports %s of %zu bytes, more than "
					"Slurm can pass to a task", name, strlen(value));
				return -1;
			}
			if (ops->set(ops->ctx, name, value, err, errlen) != 0)
				return -1;
		} else if (strncmp(line, "unset ", 6) == 0) {
			char *name = line + 6, *end;

			while (is_space(*name))
				name++;
			end = name + strlen(name);
			while (end > name && is_space(end[-1]))
				end--;
			*end = '\0';
			if (!valid_name(name))
				return bad_name(name, err, errlen);
			if (ops->unset(ops->ctx, name, err, errlen) != 0)
				return -1;
		}
		/* anything else is ignored, as Slurm does */
	}
	return 0;
}

int tfd_hook_run(const char *path, char *const env[], unsigned timeout_s, char **out,
		 size_t *out_len, int *status, char *err, size_t errlen)
{
	return tfd_hook_run_arg(path, NULL, env, timeout_s, out, out_len, status, err, errlen);
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left before `deadline` (-1: no deadline, wait for ever). */
static int left_ms(long deadline)
{
	long left;

	if (deadline < 0)
		return -1;
	left = deadline - now_ms();
	return left <= 0 ? 0 : (left > 1000000 ? 1000000 : (int) left);
}

/* Kill the hook and everything it started (its own process group), then reap it. */
static void kill_hook(pid_t pid, int *status)
{
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
}

/* A descriptor that polls readable once `pid` has exited (Linux 5.3+), else -1. */
static int open_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int) syscall(SYS_pidfd_open, pid, 0);
#else
	(void) pid;
	return -1;
#endif
}

/*
 * Reap the hook, whose output has closed, within what is left of the time: 0, 1 when
 * it was killed for the deadline, -1 with err set.  The output closes a moment before
 * the exit, so a non-blocking waitpid then usually finds it still running; a pidfd wakes
 * us at the exit itself, where sleeping between tries would add the sleep to every step.
 */
static int wait_exit(pid_t pid, long deadline, int *status, char *err, size_t errlen)
{
	int pidfd = deadline < 0 ? -1 : open_pidfd(pid);
	int rc = 0;

	for (;;) {
		pid_t done = waitpid(pid, status, deadline < 0 ? 0 : WNOHANG);

		if (done == pid)
			break;
		if (done < 0 && errno != EINTR) {
			tfd_set_err(err, errlen, "waitpid: %s", strerror(errno));
			rc = -1;
			break;
		}
		if (done == 0) {
			struct pollfd pfd = { pidfd, POLLIN, 0 };

			if (left_ms(deadline) == 0) {
				kill_hook(pid, status);
				rc = 1;
				break;
			}
			if (pidfd >= 0)
				poll(&pfd, 1, left_ms(deadline));
			else
				poll(NULL, 0, 1); /* no pidfd: try again in 1 ms */
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	return rc;
}

int tfd_hook_run_arg(const char *path, const char *arg, char *const env[], unsigned timeout_s,
		     char **out, size_t *out_len, int *status, char *err, size_t errlen)
{
	return tfd_hook_run_in(path, arg, -1, env, timeout_s, out, out_len, status, err, errlen);
}

/*
 * Start the hook with its output to out_fd, its input from in_fd (-1: /dev/null), in a
 * process group of its own (so that a timeout kills what it started, too). posix_spawn,
 * not fork: the caller is a task process, a copy of slurmstepd, whose page tables a fork
 * would copy only for the child to drop them at exec. Returns 0 or an errno value.
 */
static int spawn_hook(const char *path, const char *arg, int in_fd, int out_fd,
		      char *const env[], pid_t *pid)
{
	posix_spawn_file_actions_t actions;
	posix_spawnattr_t attr;
	char *argv[3] = { (char *) path, (char *) arg, NULL }; /* arg NULL: no argument */
	int rc;

	if ((rc = posix_spawn_file_actions_init(&actions)) != 0)
		return rc;
	if ((rc = posix_spawnattr_init(&attr)) != 0) {
		posix_spawn_file_actions_destroy(&actions);
		return rc;
	}
	rc = in_fd >= 0 ? posix_spawn_file_actions_adddup2(&actions, in_fd, 0)
			: posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
	if (rc == 0)
		rc = posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
	if (rc == 0)
		rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
	if (rc == 0)
		rc = posix_spawnattr_setpgroup(&attr, 0);
	if (rc == 0)
		rc = posix_spawn(pid, path, &actions, &attr, argv, env);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&actions);
	return rc;
}

int tfd_hook_run_in(const char *path, const char *arg, int in_fd, char *const env[],
		    unsigned timeout_s, char **out, size_t *out_len, int *status, char *err,
		    size_t errlen)
{
	int fds[2], rc;
	pid_t pid;
	char *buf;
	size_t cap = 8192, n = 0;
	int too_long = 0, timed_out = 0;
	long deadline = timeout_s ? now_ms() + (long) timeout_s * 1000 : -1;

	*out = NULL;
	*out_len = 0;
	if (pipe2(fds, O_CLOEXEC) != 0) {
		tfd_set_err(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	rc = spawn_hook(path, arg, in_fd, fds[1], env, &pid);
	if (rc != 0) {
		close(fds[0]);
		close(fds[1]);
		if (rc == ENOENT || rc == EACCES || rc == ENOEXEC || rc == ENOTDIR || rc == ELOOP) {
			/* a hook that cannot be exec'd fails like one that exits 127, with its line */
			fprintf(stderr, "tfslurm: cannot run the hook %s: %s\n", path, strerror(rc));
			*status = 127 << 8;
			*out = calloc(1, 1);
			if (!*out) {
				tfd_set_err(err, errlen, "out of memory");
				return -1;
			}
			return 0;
		}
		tfd_set_err(err, errlen, "cannot start the hook %.300s: %s", path, strerror(rc));
		return -1;
	}
	close(fds[1]);
	buf = malloc(cap + 1);
	while (buf) {
		ssize_t got;
		struct pollfd pfd = { fds[0], POLLIN, 0 };
		int ready;

		if (n == cap) {
			char *grown;

			if (cap >= TFD_HOOK_OUTPUT_MAX) {
				too_long = 1;
				break;
			}
			cap *= 2;
			grown = realloc(buf, cap + 1);
			if (!grown) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = grown;
		}
		ready = poll(&pfd, 1, left_ms(deadline));
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready == 0) {
			timed_out = 1;
			break;
		}
		got = read(fds[0], buf + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		n += (size_t) got;
	}
	close(fds[0]);
	if (!buf || too_long || timed_out) {
		kill_hook(pid, status);
	} else {
		rc = wait_exit(pid, deadline, status, err, errlen);
		if (rc < 0) {
			free(buf);
			kill(-pid, SIGKILL);
			return -1;
		}
		timed_out = rc > 0;
	}
	if (timed_out) {
		tfd_set_err(err, errlen, "the hook %.300s did not finish within %u s and was killed "
			    "(a SLURM_HOSTFILE that is a pipe, or a hung file system?); the limit is "
			    "hook_timeout= in plugstack.conf", path, timeout_s);
		free(buf);
		return -2;
	}
	if (!buf) {
		tfd_set_err(err, errlen, "out of memory reading the hook's output");
		return -1;
	}
	if (too_long) {
		tfd_set_err(err, errlen, "the hook wrote more than %u bytes", TFD_HOOK_OUTPUT_MAX);
		free(buf);
		return -1;
	}
	buf[n] = '\0';
	*out = buf;
	*out_len = n;
	return 0;
}
