/*
 * node.h - one hook run per node and step instead of one per task (prolog= mode).
 *
 * The first task of a step on a node runs the hook with the argument --node.  The hook
 * then prints, after what the wrapper prints for every task (the "preamble", where the
 * hook also states its release, version.h), the lines of every local task of the step:
 *
 *   tfslurm-node 1
 *   task LOCALID STATUS          the exit status the hook would have for that task
 *   input NAME=value             variables that differ from the first task's environment
 *                                (first in the block)
 *   export/unset/print ...       what the hook would print for that task
 *   task ...
 *   end
 *
 * A task uses its block only when its own environment is exactly the first task's with
 * the block's "input" values (the pid variable aside): then the hook, which reads nothing
 * but the environment, would have printed exactly these lines for it.  Anything else
 * (a missing block, another environment, malformed output) means: run the hook for this
 * task itself, as without prolog= mode.
 *
 * This file only reads that output and compares environments; running the hook once and
 * sharing its output among the tasks is node_run.h's, which needs Slurm.  No Slurm
 * headers here: the unit test links this file alone.
 */
#ifndef TFSLURM_NODE_H
#define TFSLURM_NODE_H

#include <stddef.h>

#define TFD_NODE_HEADER "tfslurm-node 1"
/* The one variable that differs between tasks and that the hook never reads. */
#define TFD_NODE_IGNORED "SLURM_TASK_PID"

struct tfd_node_block {
	const char *preamble; /* lines before the header, for every task */
	size_t preamble_len;
	const char *lines;    /* the task's lines after its "task" line (input lines included) */
	size_t lines_len;
	int status;           /* the hook's exit status for this task */
};

/*
 * Find the block of local task `localid` in out[0..len) (NUL-terminated at out[len]).
 * Returns 0, or -1 when the output has no header, no block for the task, no "end", a
 * malformed "task" line, a line outside the protocol, or an "input" line after another
 * kind of line in its block.  Nothing is modified.
 */
int tfd_node_find(const char *out, size_t len, unsigned long localid, struct tfd_node_block *block);

/*
 * Whether `actual` (NULL-terminated NAME=value strings) equals `base` (base_len bytes of
 * NUL-terminated NAME=value strings) with the block's "input NAME=value" lines replacing or
 * adding variables, TFD_NODE_IGNORED left out on both sides.  Returns 1 if equal, else 0
 * with the first differing variable's name (clipped) in why[0..whylen).
 */
int tfd_node_env_matches(char *const actual[], const char *base, size_t base_len,
			 const struct tfd_node_block *block, char *why, size_t whylen);

#endif
