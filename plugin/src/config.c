/*
 * config.c - plugstack.conf arguments; see config.h.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#define DEFAULT_SPEC_KEY "default_spec="

static void config_error(struct tfd_config *cfg, const char *arg, const char *why)
{
	char shown[72];

	tfd_quote(arg, 40, shown, sizeof(shown));
	cfg->valid = 0;
	snprintf(cfg->error, sizeof(cfg->error), "plugstack.conf argument '%s': %s", shown, why);
}

void tfd_config_parse(struct tfd_config *cfg, int ac, char **av)
{
	int i;

	memset(cfg, 0, sizeof(*cfg));
	cfg->valid = 1;
	snprintf(cfg->default_spec, sizeof(cfg->default_spec), "%s", TFD_BUILTIN_DEFAULT_SPEC);

	for (i = 0; i < ac && av; i++) {
		const char *arg = av[i];

		if (!arg)
			continue;
		if (strncmp(arg, DEFAULT_SPEC_KEY, strlen(DEFAULT_SPEC_KEY)) == 0) {
			const char *value = arg + strlen(DEFAULT_SPEC_KEY);
			char why[128], reason[96];

			if (tfd_spec_check(value, reason, sizeof(reason)) != 0) {
				snprintf(why, sizeof(why), "not a valid jobs spec: %s", reason);
				config_error(cfg, arg, why);
				return;
			}
			snprintf(cfg->default_spec, sizeof(cfg->default_spec), "%s", value);
		} else {
			config_error(cfg, arg, "unknown argument (known: default_spec=SPEC)");
			return;
		}
	}
}
