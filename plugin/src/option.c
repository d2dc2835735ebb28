/*
 * option.c - the --tf-dist[=SPEC] option, shared by every context.
 *
 * SPANK callbacks carry no user pointer, so the parsed plugstack.conf arguments live in
 * one static struct per process (srun, sbatch, salloc or slurmstepd each load the
 * plugin afresh).
 */
#include <stdio.h>
#include <string.h>

#include "plugin.h"
#include "text.h"

static struct tfd_config state_config;

static int tfd_option_cb(int val, const char *optarg, int remote);

static struct spank_option tf_dist_option = {
	"tf-dist",
	"SPEC",
	"TensorFlow cluster for this step: jobs in rank order, e.g. ps:1,worker:* "
	"(bare --tf-dist: site default). Sets TF_CONFIG and CUDA_VISIBLE_DEVICES "
	"for every task (docs/tf-dist.md; tfslurm " TFD_VERSION ").",
	2, /* optional argument: --tf-dist or --tf-dist=SPEC */
	0,
	tfd_option_cb,
};

struct spank_option *tfd_option(void)
{
	return &tf_dist_option;
}

const struct tfd_config *tfd_config(void)
{
	return &state_config;
}

/*
 * Whether the option was given without a value.  A bare `sbatch --tf-dist` (or
 * `#SBATCH --tf-dist`, `salloc --tf-dist`) reaches the steps of the job as the literal
 * text "(null)": Slurm prints the missing value with %s into the environment it hands
 * on.  "(null)" is no valid spec (a name cannot start with '('), so taking it as bare
 * cannot hide a user's own value.
 */
int tfd_bare(const char *optarg)
{
	return !optarg || !optarg[0] || strcmp(optarg, "(null)") == 0;
}

const char *tfd_resolve_spec(const char *optarg, char *err, size_t errlen)
{
	const char *spec;
	char reason[256], line[400];

	if (!state_config.valid) {
		snprintf(err, errlen, "--tf-dist is misconfigured at this site (%s); "
			 "tell your Slurm admins", state_config.error);
		return NULL;
	}
	spec = tfd_bare(optarg) ? state_config.default_spec : optarg;
	if (tfd_spec_check(spec, reason, sizeof(reason)) != 0) {
		/* the line tfslurm/jobspec.py writes for the same spec, after the option's name */
		tfd_spec_error(spec, reason, line, sizeof(line));
		snprintf(err, errlen, "invalid --tf-dist: %s", line);
		return NULL;
	}
	return spec;
}

/*
 * Runs where the user typed the option (srun/sbatch/salloc, remote == 0) and again in
 * slurmstepd (remote == 1).  Locally a bad spec stops the command before anything is
 * submitted; remotely remote.c does the checking in task_init, where a failure fails
 * only this step's tasks.
 */
static int tfd_option_cb(int val, const char *optarg, int remote)
{
	char err[512];

	(void) val;
	if (remote)
		return 0;
	if (!tfd_resolve_spec(optarg, err, sizeof(err))) {
		slurm_error("%s", err);
		return -1;
	}
	return 0;
}

/*
 * A bad plugstack.conf argument is the admins' business: it goes to slurmd's log (once
 * when slurmd starts, see plugin.c, and as info from each slurmstepd), and to a user only
 * when they use --tf-dist (the option callback and remote.c refuse it with the reason).
 * srun, sbatch and salloc of everyone else stay silent.
 */
int tfd_setup(spank_t sp, int ac, char **av)
{
	spank_err_t rc;

	tfd_config_parse(&state_config, ac, av);
	if (!state_config.valid && spank_context() == S_CTX_REMOTE)
		slurm_info("tfslurm: %s; --tf-dist will be refused until it is fixed",
			   state_config.error);
	rc = spank_option_register(sp, &tf_dist_option);
	if (rc != ESPANK_SUCCESS)
		slurm_error("tfslurm: could not register --tf-dist: %s", spank_strerror(rc));
	/* Never fail here: jobs that do not use --tf-dist must not notice this plugin. */
	return 0;
}

void tfd_log_config(int ac, char **av)
{
	tfd_config_parse(&state_config, ac, av);
	if (!state_config.valid)
		slurm_error("tfslurm: %s; --tf-dist will be refused until it is fixed",
			    state_config.error);
}
