/*
 * config.c - plugstack.conf arguments; see config.h.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "text.h"

#define DEFAULT_SPEC_KEY "default_spec="
#define HOST_TEMPLATE_KEY "host_template="
#define PROLOG_KEY "prolog="
#define HOOK_TIMEOUT_KEY "hook_timeout="
#define HOOK_TIMEOUT_DEFAULT 60
#define HOOK_TIMEOUT_MAX 3600
#define NODE_FIELD "{node}"

int tfd_host_template_check(const char *template, char *err, size_t errlen)
{
	size_t len = strnlen(template, TFD_TEMPLATE_MAX + 1), i, fields = 0;

	if (len > TFD_TEMPLATE_MAX) {
		snprintf(err, errlen, "longer than %d bytes", TFD_TEMPLATE_MAX);
		return -1;
	}
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char) template[i];

		if (strncmp(template + i, NODE_FIELD, strlen(NODE_FIELD)) == 0) {
			fields++;
			i += strlen(NODE_FIELD) - 1;
			continue;
		}
		if (c <= 0x20 || c >= 0x7f || strchr(";:,/{}", c)) {
			char shown[8];

			tfd_quote_n(template + i, 1, shown, sizeof(shown));
			snprintf(err, errlen, "'%s' at byte %zu is not allowed in a host name "
				 "template", shown, i);
			return -1;
		}
	}
	if (fields != 1) {
		/* once: the template names one node's address (tfslurm/plan.py checks the same) */
		snprintf(err, errlen, "must contain {node} once, e.g. {node}-ib");
		return -1;
	}
	return 0;
}

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
	cfg->hook_timeout = HOOK_TIMEOUT_DEFAULT;

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
		} else if (strncmp(arg, HOST_TEMPLATE_KEY, strlen(HOST_TEMPLATE_KEY)) == 0) {
			const char *value = arg + strlen(HOST_TEMPLATE_KEY);
			char reason[96];

			if (tfd_host_template_check(value, reason, sizeof(reason)) != 0) {
				config_error(cfg, arg, reason);
				return;
			}
			snprintf(cfg->host_template, sizeof(cfg->host_template), "%s", value);
		} else if (strncmp(arg, PROLOG_KEY, strlen(PROLOG_KEY)) == 0) {
			const char *value = arg + strlen(PROLOG_KEY);
			size_t len = strnlen(value, TFD_PATH_MAX + 1), k;

			if (value[0] != '/') {
				config_error(cfg, arg, "must be an absolute path");
				return;
			}
			if (len > TFD_PATH_MAX) {
				config_error(cfg, arg, "path too long");
				return;
			}
			for (k = 0; k < len; k++) {
				if ((unsigned char) value[k] <= 0x20 || (unsigned char) value[k] >= 0x7f) {
					config_error(cfg, arg, "path with a blank, control or non-ASCII "
						     "character");
					return;
				}
			}
			snprintf(cfg->prolog, sizeof(cfg->prolog), "%s", value);
		} else if (strncmp(arg, HOOK_TIMEOUT_KEY, strlen(HOOK_TIMEOUT_KEY)) == 0) {
			const char *value = arg + strlen(HOOK_TIMEOUT_KEY);
			unsigned seconds = 0;
			size_t k;

			for (k = 0; value[k] >= '0' && value[k] <= '9' && k < 5; k++)
				seconds = seconds * 10 + (unsigned) (value[k] - '0');
			if (k == 0 || value[k] != '\0' || seconds < 1 || seconds > HOOK_TIMEOUT_MAX) {
				config_error(cfg, arg, "must be whole seconds from 1 to 3600");
				return;
			}
			cfg->hook_timeout = seconds;
		} else {
			config_error(cfg, arg, "unknown argument (known: default_spec=SPEC, "
				     "host_template=TEMPLATE, prolog=PATH, hook_timeout=SECONDS)");
			return;
		}
	}
}
