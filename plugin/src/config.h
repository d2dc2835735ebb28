/*
 * config.h - site defaults from the plugin's plugstack.conf arguments.
 *
 *   required /usr/local/lib/slurm/spank_tfslurm.so default_spec=worker:*
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

struct tfd_config {
	int valid;                            /* 1 when every argument was understood */
	char error[256];                      /* why not, when valid == 0 */
	char default_spec[TFD_SPEC_MAX + 1];  /* spec for a bare --tf-dist */
};

/* Fill `cfg` from plugstack.conf arguments; never fails, records problems in cfg. */
void tfd_config_parse(struct tfd_config *cfg, int ac, char **av);

#endif
