/*
 * version.h - the plugin's release against the hook's.
 *
 * The plugin and tfslurm's hook must come from one release: the hook's output (hook.h,
 * node.h) is a protocol between them.  The plugin is built with its release (TFD_VERSION,
 * which plugin/Makefile reads from tfslurm/__init__.py).  In its per-node run (node.h) the
 * hook states the release of the tfslurm package that runs it, in a line of its own before
 * the node header:
 *
 *   tfslurm-version X.Y.Z
 *
 * which tfd_hook_apply, like Slurm's TaskProlog, ignores.  When the two differ, or the hook
 * states none (a wrapper from before versions were stated), the plugin says so in one line
 * (node_run.c): a mismatch never fails a task.  No Slurm headers here: the unit test links
 * this file alone.
 */
#ifndef TFSLURM_VERSION_H
#define TFSLURM_VERSION_H

#include <stddef.h>

/* The start of the line in which the hook states its release. */
#define TFD_VERSION_LINE "tfslurm-version "
/* Longest release string read from the hook's output. */
#define TFD_VERSION_MAX 64

/*
 * Compare `plugin` with the release stated in the hook's per-node output out[0..len)
 * (NUL-terminated at out[len]; only lines before the node header count).  Returns 0 when
 * they are equal; otherwise 1 with one printable line in msg[0..msglen) naming both
 * releases, the hook's `path` and the fix.  Nothing is modified.
 */
int tfd_version_check(const char *plugin, const char *path, const char *out, size_t len,
		      char *msg, size_t msglen);

#endif
