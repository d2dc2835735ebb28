/*
 * spec.c - syntax check of a --tf-dist jobs spec; see spec.h and docs/tf-dist.md.
 *
 * Written as a single bounded left-to-right scan: no allocation, no recursion, and no
 * read past TFD_SPEC_MAX + 1 bytes, so hostile input (huge, binary, unterminated
 * entries) costs nothing and cannot overrun.
 */
#include "spec.h"

#include <stdio.h>
#include <string.h>

#include "text.h"

static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_space(char c) { return c == ' ' || c == '\t'; }

/* The message for a byte that is not allowed where it stands. */
static void bad_byte(char *err, size_t errlen, const char *spec, size_t pos, const char *where)
{
	unsigned char c = (unsigned char) spec[pos];
	char shown[8];

	tfd_quote_n(spec + pos, 1, shown, sizeof(shown));
	if (c < 0x20 || c == 0x7f)
		tfd_set_err(err, errlen, "control character '%s' at byte %zu %s", shown, pos, where);
	else if (c >= 0x80)
		tfd_set_err(err, errlen, "non-ASCII byte '%s' at byte %zu %s", shown, pos, where);
	else
		tfd_set_err(err, errlen, "unexpected '%s' at byte %zu %s", shown, pos, where);
}

/* TensorFlow's own job names: exact, lower case (tfslurm/jobspec.py TF_JOB_NAMES). */
static const char *const tf_names[] = { "chief", "worker", "ps", "evaluator" };

static char lower(char c) { return (c >= 'A' && c <= 'Z') ? (char) (c - 'A' + 'a') : c; }

/* Whether a[0..alen) turns into b (NUL-terminated) by at most one edit, ignoring case:
 * one byte changed, added or dropped, or two neighbours swapped. */
static int within_one_edit(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b), i = 0, j;

	if (alen + 1 < blen || blen + 1 < alen)
		return 0;
	while (i < alen && i < blen && lower(a[i]) == b[i])
		i++;
	if (i == alen && i == blen)
		return 1;
	if (alen == blen) {
		/* changed at i, or a[i], a[i+1] swapped */
		if (i + 1 < alen && lower(a[i]) == b[i + 1] && lower(a[i + 1]) == b[i])
			i += 2;
		else
			i += 1;
		for (j = i; j < alen; j++)
			if (lower(a[j]) != b[j])
				return 0;
		return 1;
	}
	/* one byte more in the longer: skip it at i, the rest must match */
	for (j = i; j + (alen > blen) < alen && j + (blen > alen) < blen; j++)
		if (lower(a[j + (alen > blen)]) != b[j + (blen > alen)])
			return 0;
	return 1;
}

/* The TF job name that name[0..nlen) nearly is (another case, or one typo), or NULL when
 * it is one exactly or is far from all of them (other names are allowed). */
static const char *near_tf_name(const char *name, size_t nlen)
{
	size_t k;

	for (k = 0; k < sizeof(tf_names) / sizeof(tf_names[0]); k++)
		if (strlen(tf_names[k]) == nlen && memcmp(name, tf_names[k], nlen) == 0)
			return NULL;
	for (k = 0; k < sizeof(tf_names) / sizeof(tf_names[0]); k++)
		if (within_one_edit(name, nlen, tf_names[k]))
			return tf_names[k];
	return NULL;
}

static size_t skip_space(const char *spec, size_t pos, size_t len)
{
	while (pos < len && is_space(spec[pos]))
		pos++;
	return pos;
}

int tfd_spec_check(const char *spec, char *err, size_t errlen)
{
	/* offsets and lengths of the names seen so far, for the duplicate check; an entry
	 * takes at least 4 bytes ("a:1,"), so this many always suffice */
	unsigned short name_at[TFD_SPEC_MAX / 4 + 2], name_len[TFD_SPEC_MAX / 4 + 2];
	size_t len, pos, entries = 0, k;
	int seen_rest = 0, any_fixed = 0;
	char shown[64], where[160];

	tfd_set_err(err, errlen, "no error");
	if (!spec) {
		tfd_set_err(err, errlen, "no jobs spec given");
		return -1;
	}
	len = strnlen(spec, TFD_SPEC_MAX + 1);
	if (len > TFD_SPEC_MAX) {
		tfd_set_err(err, errlen, "jobs spec longer than %d bytes", TFD_SPEC_MAX);
		return -1;
	}
	if (skip_space(spec, 0, len) == len) {
		tfd_set_err(err, errlen, "empty jobs spec; expected e.g. worker:* or ps:1,worker:*");
		return -1;
	}

	for (pos = 0;;) {
		size_t start, nlen, digits = 0;
		long long count = 0;

		/* job name: [A-Za-z][A-Za-z0-9_]* */
		pos = skip_space(spec, pos, len);
		if (pos == len || spec[pos] == ',') {
			tfd_set_err(err, errlen, "empty entry at byte %zu (two commas, or a comma at "
				"the start or end)", pos);
			return -1;
		}
		if (!is_alpha(spec[pos])) {
			bad_byte(err, errlen, spec, pos, "where a job name should start (job names "
				 "are a letter followed by letters, digits or _)");
			return -1;
		}
		start = pos;
		while (pos < len && (is_alpha(spec[pos]) || is_digit(spec[pos]) || spec[pos] == '_'))
			pos++;
		nlen = pos - start;
		tfd_quote_n(spec + start, nlen, shown, sizeof(shown));
		{
			const char *meant = near_tf_name(spec + start, nlen);

			if (meant) {
				tfd_set_err(err, errlen, "job '%s' is not TensorFlow's '%s' (its job names "
					"are exact: chief, worker, ps, evaluator); write %s", shown,
					meant, meant);
				return -1;
			}
		}
		pos = skip_space(spec, pos, len);
		if (pos == len || spec[pos] == ',') {
			tfd_set_err(err, errlen, "job '%s' has no count; write %s:N or %s:*", shown,
				shown, shown);
			return -1;
		}
		if (spec[pos] != ':') {
			snprintf(where, sizeof(where), "after job '%s' (job names are a letter "
				 "followed by letters, digits or _)", shown);
			bad_byte(err, errlen, spec, pos, where);
			return -1;
		}
		for (k = 0; k < entries; k++) {
			if (name_len[k] == nlen && memcmp(spec + name_at[k], spec + start, nlen) == 0) {
				tfd_set_err(err, errlen, "job '%s' appears twice", shown);
				return -1;
			}
		}
		name_at[entries] = (unsigned short) start;
		name_len[entries] = (unsigned short) nlen;
		entries++;
		pos = skip_space(spec, pos + 1, len);

		/* count: '*' or 1 to TFD_COUNT_DIGITS decimal digits */
		if (pos < len && spec[pos] == '*') {
			if (seen_rest) {
				tfd_set_err(err, errlen, "more than one job has the count *");
				return -1;
			}
			seen_rest = 1;
			pos++;
		} else if (pos < len && is_digit(spec[pos])) {
			while (pos < len && is_digit(spec[pos])) {
				if (++digits > TFD_COUNT_DIGITS) {
					tfd_set_err(err, errlen, "count of job '%s' has more than %d digits",
						shown, TFD_COUNT_DIGITS);
					return -1;
				}
				count = count * 10 + (spec[pos] - '0');
				pos++;
			}
			if (count > 0)
				any_fixed = 1;
			if (count > 1 && ((nlen == 5 && memcmp(spec + start, "chief", 5) == 0) ||
					  (nlen == 9 && memcmp(spec + start, "evaluator", 9) == 0))) {
				tfd_set_err(err, errlen, "job '%s' has count %lld; TensorFlow allows at "
					"most one", shown, count);
				return -1;
			}
		} else if (pos == len || spec[pos] == ',') {
			tfd_set_err(err, errlen, "job '%s' needs a count (a number or *) after ':'",
				shown);
			return -1;
		} else {
			snprintf(where, sizeof(where), "in the count of job '%s' (a number or *)",
				 shown);
			bad_byte(err, errlen, spec, pos, where);
			return -1;
		}
		pos = skip_space(spec, pos, len);
		if (pos == len)
			break;
		if (spec[pos] != ',') {
			snprintf(where, sizeof(where), "after the count of job '%s'; separate "
				 "jobs with ','", shown);
			bad_byte(err, errlen, spec, pos, where);
			return -1;
		}
		pos++; /* ',' */
	}
	if (!seen_rest && !any_fixed) {
		tfd_set_err(err, errlen, "every count is 0: no task would get a job");
		return -1;
	}
	return 0;
}
