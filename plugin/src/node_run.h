/*
 * node_run.h - prolog=PATH run once per node and step instead of once per task, in
 * slurmstepd: the Slurm side of the per-node protocol whose parsing is in node.h.
 *
 * user_init (in slurmstepd, before the tasks fork) maps a shared buffer and a pipe
 * (tfd_node_share); in task_init the step's first local task runs the hook with --node,
 * which prints every local task's lines (node.h), publishes its environment and that
 * output in the buffer and signals the pipe; the other tasks wait for it
 * (tfd_node_apply).  Each task takes its lines only if its environment is exactly what
 * the hook computed them from; otherwise, or if anything about the node run fails, the
 * caller runs the hook for that task alone.
 *
 * Kept apart from node.c because this part needs Slurm (spank_get_item, slurm_debug)
 * and fork/shared-memory state of slurmstepd, while node.c is pure parsing that the unit
 * test (plugin/test) links without Slurm headers.
 */
#ifndef TFSLURM_NODE_RUN_H
#define TFSLURM_NODE_RUN_H

#include <stddef.h>

#include <slurm/spank.h>

#include "hook.h"

/*
 * slurmstepd, user_init of a --tf-dist step with prolog=: set up the buffer and pipe the
 * task processes inherit.  Never fails: without them every task runs the hook itself.
 */
void tfd_node_share(void);

/*
 * task_init: take this task's lines from the node run of hook `path` (the first local
 * task runs it) and apply them through `ops`.  Returns 0 (done: *status is the hook's
 * exit status for this task, which the caller handles as if the hook had run for it
 * alone), -1 (err says why; fail the task), or 1 (not usable: run the hook here).
 */
int tfd_node_apply(spank_t sp, const char *path, const struct tfd_hook_ops *ops, int *status,
		   char *err, size_t errlen);

#endif
