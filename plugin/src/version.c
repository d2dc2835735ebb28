/*
 * version.c - the plugin's release against the one the hook states; see version.h.
 */
#include "version.h"

#include <string.h>

#include "node.h"
#include "text.h"

/* The release the hook states before the node header: its first byte and length in
 * *stated and *n, or -1 when it states none (or one longer than TFD_VERSION_MAX). */
static int stated_version(const char *out, size_t len, const char **stated, size_t *n)
{
	const char *p = out, *end = out + len;
	size_t prefix = strlen(TFD_VERSION_LINE), header = strlen(TFD_NODE_HEADER);

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t) (end - p));
		size_t line = nl ? (size_t) (nl - p) : (size_t) (end - p);

		if (line == header && memcmp(p, TFD_NODE_HEADER, header) == 0)
			break; /* the tasks' blocks follow: the hook states its release before them */
		if (line > prefix && line - prefix <= TFD_VERSION_MAX &&
		    memcmp(p, TFD_VERSION_LINE, prefix) == 0) {
			*stated = p + prefix;
			*n = line - prefix;
			return 0;
		}
		p += line + (nl != NULL);
	}
	return -1;
}

int tfd_version_check(const char *plugin, const char *path, const char *out, size_t len,
		      char *msg, size_t msglen)
{
	const char *stated = NULL;
	size_t n = 0;
	char shown_hook[TFD_VERSION_MAX * 4 + 4], shown_path[160], shown_plugin[72];

	if (stated_version(out, len, &stated, &n) == 0 && n == strlen(plugin) &&
	    memcmp(stated, plugin, n) == 0)
		return 0;
	if (stated)
		tfd_quote_n(stated, n, shown_hook, sizeof(shown_hook));
	else
		strcpy(shown_hook, "unstated (older)");
	tfd_quote(path, 120, shown_path, sizeof(shown_path));
	tfd_quote(plugin, 60, shown_plugin, sizeof(shown_plugin));
	tfd_set_err(msg, msglen, "tfslurm: the plugin is version %s but the hook %s is version %s; "
		    "install both from one release (docs/admin-guide.md, \"Versions\")",
		    shown_plugin, shown_path, shown_hook);
	return 1;
}
