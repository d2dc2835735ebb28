/*
 * spec.h - syntax check of a --tf-dist jobs spec ("ps:1,worker:*").
 *
 * This is the C twin of tfslurm/jobspec.py (grammar in docs/tf-dist.md), so that a typo
 * fails at submit time in srun/sbatch/salloc.  It refuses exactly what jobspec.py's
 * split_spec refuses (which walks the spec's bytes the same way), specs no step could
 * ever satisfy included (all counts 0; a fixed chief or evaluator count above 1), and
 * every control character but tab and every non-ASCII byte.  Whether the counts add up
 * to the step's tasks is checked in Python, in every task, because only the task knows
 * its step.  No Slurm headers here: the unit test links this file alone.
 *
 * Both sides take the text of every refusal from one table,
 * tfslurm/data/spec_messages.def, and stop at the same first error, so a bad spec reads
 * the same in srun's error and in Python's (tests/test_spec_messages.py compares them).
 */
#ifndef TFSLURM_SPEC_H
#define TFSLURM_SPEC_H

#include <stddef.h>

/* Longest spec accepted, in bytes (same cap as tfslurm/jobspec.py; real ones are short). */
#define TFD_SPEC_MAX 4096
/* Most digits in one count (as in tfslurm/jobspec.py; fits a long long). */
#define TFD_COUNT_DIGITS 18

/* Bytes of a spec quoted in tfd_spec_error (as tfslurm/jobspec.py quotes it). */
#define TFD_SPEC_SHOWN 80

/*
 * Check that `spec` is a valid jobs spec.  Reads at most TFD_SPEC_MAX + 1 bytes of it.
 * Returns 0 when valid.  Otherwise returns -1 and writes a one-line reason (printable
 * ASCII only, NUL-terminated, truncated to fit) into err[0..errlen).
 * `spec` == NULL is invalid.
 */
int tfd_spec_check(const char *spec, char *err, size_t errlen);

/*
 * The whole message for a spec that tfd_spec_check refused with `reason`: "jobs spec
 * '<spec, quoted>': <reason>", as tfslurm/jobspec.py words it, into out[0..outlen).
 */
void tfd_spec_error(const char *spec, const char *reason, char *out, size_t outlen);

#endif
