/*
 * spec.c - syntax check of a --tf-dist jobs spec; see spec.h and docs/tf-dist.md.
 *
 * Written as a single bounded left-to-right scan: no allocation, no recursion, and no
 * read past TFD_SPEC_MAX + 1 bytes, so hostile input (huge, binary, unterminated
 * entries) costs nothing and cannot overrun.  tfslurm/jobspec.py walks a spec the same
 * way and takes its messages from the same table (spec_messages.def), so a bad spec gets
 * the same explanation at submit time and in the task.
 */
#include "spec.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "text.h"

/* The message table, shared with tfslurm/jobspec.py (the Python package holds it, so that
 * an installed wheel finds it too). */
enum tfd_spec_message {
#define TFD_SPEC_MESSAGE(name, text) MSG_##name,
#include "../../tfslurm/data/spec_messages.def"
#undef TFD_SPEC_MESSAGE
};

static const char *const messages[] = {
#define TFD_SPEC_MESSAGE(name, text) [MSG_##name] = text,
#include "../../tfslurm/data/spec_messages.def"
#undef TFD_SPEC_MESSAGE
};

/*
 * Fill message `id` into err[0..errlen): each %s takes the next of the `nargs` strings
 * (numbers are formatted to text by the caller).  Not printf: the templates are data, and
 * Python fills the same ones with its % operator, which agrees with this on %s alone.
 */
static void say(char *err, size_t errlen, enum tfd_spec_message id, int nargs, ...)
{
	const char *t = messages[id];
	size_t o = 0;
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, nargs);
	while (*t && o + 1 < errlen) {
		if (t[0] == '%' && t[1] == 's') {
			const char *arg = nargs-- > 0 ? va_arg(ap, const char *) : "";

			while (*arg && o + 1 < errlen)
				err[o++] = *arg++;
			t += 2;
		} else {
			err[o++] = *t++;
		}
	}
	va_end(ap);
	err[o] = '\0';
}

void tfd_spec_error(const char *spec, const char *reason, char *out, size_t outlen)
{
	char shown[TFD_SPEC_SHOWN * 4 + 4];

	tfd_quote(spec, TFD_SPEC_SHOWN, shown, sizeof(shown));
	say(out, outlen, MSG_SPEC_IS, 2, shown, reason);
}

static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_space(char c) { return c == ' ' || c == '\t'; }

/* The message for a byte that is not allowed where it stands; `where` is a filled message. */
static void bad_byte(char *err, size_t errlen, const char *spec, size_t pos, const char *where)
{
	unsigned char c = (unsigned char) spec[pos];
	char shown[8], at[24];

	tfd_quote_n(spec + pos, 1, shown, sizeof(shown));
	snprintf(at, sizeof(at), "%zu", pos);
	say(err, errlen, c < 0x20 || c == 0x7f ? MSG_CONTROL_BYTE
			 : c >= 0x80		 ? MSG_NON_ASCII_BYTE
						 : MSG_UNEXPECTED_BYTE,
	    3, shown, at, where);
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
	char shown[64], where[160], number[24];

	if (err && errlen)
		err[0] = '\0';
	if (!spec) {
		say(err, errlen, MSG_NO_SPEC, 0);
		return -1;
	}
	len = strnlen(spec, TFD_SPEC_MAX + 1);
	if (len > TFD_SPEC_MAX) {
		snprintf(number, sizeof(number), "%d", TFD_SPEC_MAX);
		say(err, errlen, MSG_TOO_LONG, 1, number);
		return -1;
	}
	if (skip_space(spec, 0, len) == len) {
		say(err, errlen, MSG_EMPTY, 0);
		return -1;
	}

	for (pos = 0;;) {
		size_t start, nlen, digits = 0;
		long long count = 0;

		/* job name: [A-Za-z][A-Za-z0-9_]* */
		pos = skip_space(spec, pos, len);
		if (pos == len || spec[pos] == ',') {
			snprintf(number, sizeof(number), "%zu", pos);
			say(err, errlen, MSG_EMPTY_ENTRY, 1, number);
			return -1;
		}
		if (!is_alpha(spec[pos])) {
			say(where, sizeof(where), MSG_WHERE_NAME, 0);
			bad_byte(err, errlen, spec, pos, where);
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
				say(err, errlen, MSG_NEAR_TF_NAME, 3, shown, meant, meant);
				return -1;
			}
		}
		pos = skip_space(spec, pos, len);
		if (pos == len || spec[pos] == ',') {
			say(err, errlen, MSG_NO_COUNT, 3, shown, shown, shown);
			return -1;
		}
		if (spec[pos] != ':') {
			say(where, sizeof(where), MSG_AFTER_NAME, 1, shown);
			bad_byte(err, errlen, spec, pos, where);
			return -1;
		}
		for (k = 0; k < entries; k++) {
			if (name_len[k] == nlen && memcmp(spec + name_at[k], spec + start, nlen) == 0) {
				say(err, errlen, MSG_TWICE, 1, shown);
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
				say(err, errlen, MSG_TWO_RESTS, 0);
				return -1;
			}
			seen_rest = 1;
			pos++;
		} else if (pos < len && is_digit(spec[pos])) {
			while (pos < len && is_digit(spec[pos])) {
				if (++digits > TFD_COUNT_DIGITS) {
					snprintf(number, sizeof(number), "%d", TFD_COUNT_DIGITS);
					say(err, errlen, MSG_TOO_MANY_DIGITS, 2, shown, number);
					return -1;
				}
				count = count * 10 + (spec[pos] - '0');
				pos++;
			}
			if (count > 0)
				any_fixed = 1;
			if (count > 1 && ((nlen == 5 && memcmp(spec + start, "chief", 5) == 0) ||
					  (nlen == 9 && memcmp(spec + start, "evaluator", 9) == 0))) {
				snprintf(number, sizeof(number), "%lld", count);
				say(err, errlen, MSG_AT_MOST_ONE, 2, shown, number);
				return -1;
			}
		} else if (pos == len || spec[pos] == ',') {
			say(err, errlen, MSG_COUNT_MISSING, 1, shown);
			return -1;
		} else {
			say(where, sizeof(where), MSG_IN_COUNT, 1, shown);
			bad_byte(err, errlen, spec, pos, where);
			return -1;
		}
		pos = skip_space(spec, pos, len);
		if (pos == len)
			break;
		if (spec[pos] != ',') {
			say(where, sizeof(where), MSG_AFTER_COUNT, 1, shown);
			bad_byte(err, errlen, spec, pos, where);
			return -1;
		}
		pos++; /* ',' */
	}
	if (!seen_rest && !any_fixed) {
		say(err, errlen, MSG_ALL_ZERO, 0);
		return -1;
	}
	return 0;
}
