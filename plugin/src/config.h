/*
 * config.h - site defaults from the plugin's plugstack.conf arguments.
 *
 *   required /usr/local/lib/slurm/spank_tfslurm.so default_spec=worker:* host_template={node}-ib
 *
 * default_spec=SPEC       the spec a bare --tf-dist means (built-in: worker:*)
 * host_template=TEMPLATE  TFSLURM_HOST_TEMPLATE for --tf-dist tasks that do not set it:
 *                         how a node name becomes the host name in TF_CONFIG
 * prolog=PATH             run tfslurm's hook (the wrapper `tfslurm prolog --write-wrapper`
 *                         writes) for --tf-dist tasks from the plugin itself (once per
 *                         node and step, see node_run.h), instead of a site-wide TaskProlog=
 *                         that runs for every task of every job
 * hook_timeout=SECONDS    most time one run of that hook may take (default 60, 1 to 3600);
 *                         a hook past it is killed and the task fails saying so
 *
 * Arguments are read in every context.  A bad argument never fails a job that did not ask
 * for --tf-dist: it is logged, and only --tf-dist itself is then refused with the reason.
 */
#ifndef TFSLURM_CONFIG_H
#define TFSLURM_CONFIG_H

#include <stddef.h>

#include "spec.h"

/* The spec used for a bare --tf-dist when plugstack.conf gives none. */
#define TFD_BUILTIN_DEFAULT_SPEC "worker:*"
/* Longest host template accepted. */
#define TFD_TEMPLATE_MAX 255
/* Longest prolog= path accepted. */
#define TFD_PATH_MAX 1024
/* The variable a host_template= argument sets (read by tfslurm/plan.py). */
#define TFD_HOST_TEMPLATE_VAR "TFSLURM_HOST_TEMPLATE"

struct tfd_config {
	int valid;                            /* 1 when every argument was understood */
	char error[256];                      /* why not, when valid == 0 */
	char default_spec[TFD_SPEC_MAX + 1];  /* spec for a bare --tf-dist */
	char host_template[TFD_TEMPLATE_MAX + 1]; /* "" = none given */
	char prolog[TFD_PATH_MAX + 1];            /* "" = none given */
	unsigned hook_timeout;                    /* seconds, for prolog= */
};

/* Check a host template ({node} at least once; printable ASCII without blanks, braces
 * other than {node}, or any of ";:,/").  Returns 0 or -1 with a reason in err. */
int tfd_host_template_check(const char *template, char *err, size_t errlen);

/* Fill `cfg` from plugstack.conf arguments; never fails, records problems in cfg. */
void tfd_config_parse(struct tfd_config *cfg, int ac, char **av);

#endif
