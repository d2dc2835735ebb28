/*
 * hook.h - run tfslurm's hook for a --tf-dist task from the plugin itself
 * (plugstack.conf argument prolog=PATH), so a site needs no TaskProlog= and tasks of
 * other jobs run no prolog at all.
 *
 * The hook speaks Slurm's TaskProlog protocol on its stdout, one line each:
 *   export NAME=value   (value: the rest of the line, literally)
 *   unset NAME
 *   print TEXT          (TEXT is written to the task's stdout)
 *   warn TEXT           (TEXT is written to the task's stderr; Slurm's TaskProlog protocol
 *                        has no such line and ignores it)
 * Other lines are ignored, as Slurm ignores them.  No Slurm headers here: the unit test
 * links this file alone.
 */
#ifndef TFSLURM_HOOK_H
#define TFSLURM_HOOK_H

#include <stddef.h>

/* Most hook output read, in bytes (a TF_CONFIG is at most 128 KiB). */
#define TFD_HOOK_OUTPUT_MAX (4u << 20)
/* Slurm refuses a variable when strlen(name) + strlen(value) + 2 >= this (env.c). */
#define TFD_ENV_STRLEN_MAX 131072

struct tfd_hook_ops {
	/* each returns 0, or -1 after writing a reason into err[0..errlen) */
	int (*set)(void *ctx, const char *name, const char *value, char *err, size_t errlen);
	int (*unset)(void *ctx, const char *name, char *err, size_t errlen);
	void (*print)(void *ctx, const char *text, size_t len);
	void *ctx;
	void (*warn)(void *ctx, const char *text, size_t len); /* NULL: warn lines ignored */
};

/*
 * Apply the protocol lines in buf[0..len); buf[len] must exist and be a NUL (as
 * tfd_hook_run leaves it).  buf is modified (line ends become NULs).
 * Output containing a NUL byte, a malformed variable name, or a variable Slurm would
 * refuse for size is an error: nothing after the bad line is applied.
 * Returns 0, or -1 with a one-line reason in err.
 */
int tfd_hook_apply(char *buf, size_t len, const struct tfd_hook_ops *ops, char *err,
		   size_t errlen);

/* Default limit on one run of the hook, in seconds (plugstack.conf hook_timeout=). */
#define TFD_HOOK_TIMEOUT_DEFAULT 60

/*
 * Run `path` (no arguments) with environment `env`, stdin from /dev/null, stdout captured
 * (at most TFD_HOOK_OUTPUT_MAX bytes), stderr inherited, in a process group of its own.
 * A hook still running after timeout_s seconds (0: no limit) is killed with its group:
 * a hook that reads a FIFO or a hung file system must not hold the step for ever.
 * On success *out is a malloc'd, NUL-terminated buffer of *out_len bytes and *status the
 * wait status.  Returns 0; -2 when the time ran out; -1 otherwise; with a one-line
 * reason in err (nothing to free then).
 */
int tfd_hook_run(const char *path, char *const env[], unsigned timeout_s, char **out,
		 size_t *out_len, int *status, char *err, size_t errlen);

/* The same, with one argument `arg` (NULL: none). */
int tfd_hook_run_arg(const char *path, const char *arg, char *const env[], unsigned timeout_s,
		     char **out, size_t *out_len, int *status, char *err, size_t errlen);

/* The same, with the hook's stdin read from in_fd (-1: /dev/null). */
int tfd_hook_run_in(const char *path, const char *arg, int in_fd, char *const env[],
		    unsigned timeout_s, char **out, size_t *out_len, int *status, char *err,
		    size_t errlen);

#endif
