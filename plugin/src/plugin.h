/*
 * plugin.h - what the files of the tfslurm SPANK plugin share.
 *
 * Layout: plugin.c holds the only exported symbols and dispatches on spank_context():
 * srun, sbatch and salloc only register the option, slurmstepd goes to remote.c; option.c
 * owns the --tf-dist option; spec.c checks the jobs spec; text.c quotes input for
 * messages; config.c reads plugstack.conf; hook.c runs the prolog= hook and applies its
 * output; node.c reads its per-node output; node_run.c runs it once per node and step
 * for remote.c; version.c compares the plugin's release with the hook's.  spec.c, text.c,
 * config.c, hook.c, node.c and version.c need no Slurm (the unit test links them alone);
 * plugin.c, option.c, remote.c and node_run.c do.
 */
#ifndef TFSLURM_PLUGIN_H
#define TFSLURM_PLUGIN_H

#include <slurm/spank.h>

#include "config.h"

/* The release this plugin is built from (version.h), e.g. "0.1.0": plugin/Makefile passes
 * it from tfslurm/__init__.py, so the plugin and the hook name the same one. */
#ifndef TFD_VERSION
#error "TFD_VERSION is not defined: build the plugin with plugin/Makefile"
#endif

/* The variable every task of a --tf-dist step gets; tfslurm's TaskProlog acts on it. */
#define TFD_MARKER "TFSLURM_TF_DIST"

/* option.c: the --tf-dist option, its callback and the plugin's per-process state. */
struct spank_option *tfd_option(void);
const struct tfd_config *tfd_config(void);
int tfd_setup(spank_t sp, int ac, char **av); /* parse args + register; never fails */
/* slurmd: log a bad plugstack.conf argument to slurmd's log, once at start. */
void tfd_log_config(int ac, char **av);
/* Whether an option argument means a bare --tf-dist (NULL, "", or Slurm's "(null)"). */
int tfd_bare(const char *optarg);
/* Choose the spec for an option argument (tfd_bare = the site default) and check it.
 * Returns the spec, or NULL with a one-line reason in err. */
const char *tfd_resolve_spec(const char *optarg, char *err, size_t errlen);

/* remote.c */
int tfd_remote_init(spank_t sp, int ac, char **av);
int tfd_remote_user_init(spank_t sp, int ac, char **av);
int tfd_remote_task_init_privileged(spank_t sp, int ac, char **av);
int tfd_remote_task_init(spank_t sp, int ac, char **av);

#endif
