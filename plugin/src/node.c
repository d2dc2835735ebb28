/*
 * node.c - read the per-node hook output: find a task's block, check its environment;
 * see node.h (the run itself is node_run.c).
 */
#include "node.h"

#include <stdio.h>
#include <string.h>

#include "text.h"

/* The line starting at p (before end): its length without the newline. */
static size_t line_len(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t) (end - p));

	return nl ? (size_t) (nl - p) : (size_t) (end - p);
}

/* From the line at p to the next one (past its newline, if any). */
static size_t line_skip(const char *p, const char *end)
{
	size_t n = line_len(p, end);

	return n + (p + n < end);
}

static int line_is(const char *p, size_t n, const char *word)
{
	return n == strlen(word) && memcmp(p, word, n) == 0;
}

static int starts(const char *p, size_t n, const char *prefix)
{
	size_t k = strlen(prefix);

	return n >= k && memcmp(p, prefix, k) == 0;
}

/* Parse a decimal number of at most 9 digits at *p (before end); *p moves past it. */
static int number(const char **p, const char *end, unsigned long *value)
{
	const char *s = *p;
	unsigned long v = 0;
	int digits = 0;

	while (s < end && *s >= '0' && *s <= '9' && digits < 10) {
		v = v * 10 + (unsigned long) (*s - '0');
		s++;
		digits++;
	}
	if (digits == 0 || digits > 9)
		return -1;
	*p = s;
	*value = v;
	return 0;
}

/* "task LOCALID STATUS" exactly. */
static int task_line(const char *p, size_t n, unsigned long *localid, int *status)
{
	const char *end = p + n, *s = p + 5;
	unsigned long st;

	if (number(&s, end, localid) != 0 || s >= end || *s != ' ')
		return -1;
	s++;
	if (number(&s, end, &st) != 0 || s != end || st > 255)
		return -1;
	*status = (int) st;
	return 0;
}

int tfd_node_find(const char *out, size_t len, unsigned long localid, struct tfd_node_block *block)
{
	const char *end = out + len, *p = out, *header = NULL;
	const char *mine = NULL, *mine_end = NULL;
	int in_block = 0, seen_end = 0, past_inputs = 0;

	memset(block, 0, sizeof(*block));
	if (memchr(out, '\0', len))
		return -1;
	/* the header line */
	for (; p < end && !header; p += line_skip(p, end))
		if (line_is(p, line_len(p, end), TFD_NODE_HEADER))
			header = p;
	if (!header)
		return -1;
	while (p < end) {
		size_t n = line_len(p, end);
		const char *next = p + line_skip(p, end);

		if (seen_end)
			return -1; /* nothing may follow "end" */
		if (line_is(p, n, "end") || starts(p, n, "task ")) {
			if (in_block && !mine_end)
				mine_end = p;
			in_block = 0;
			past_inputs = 0;
			if (line_is(p, n, "end")) {
				seen_end = 1;
			} else {
				unsigned long id;
				int status;

				if (task_line(p, n, &id, &status) != 0)
					return -1;
				if (id == localid) {
					if (mine)
						return -1; /* two blocks for one task */
					mine = next;
					block->status = status;
					in_block = 1;
				}
			}
		} else if (starts(p, n, "input ")) {
			if (past_inputs)
				return -1; /* a block's input lines come first */
		} else if (starts(p, n, "export ") || starts(p, n, "unset ") || starts(p, n, "print ")) {
			past_inputs = 1;
		} else {
			return -1; /* a line outside the protocol */
		}
		p = next;
	}
	if (!seen_end || !mine || !mine_end)
		return -1;
	block->preamble = out;
	block->preamble_len = (size_t) (header - out);
	block->lines = mine;
	block->lines_len = (size_t) (mine_end - mine);
	return 0;
}

static size_t name_len(const char *entry)
{
	return strcspn(entry, "=");
}

static int is_ignored(const char *name, size_t n)
{
	return line_is(name, n, TFD_NODE_IGNORED);
}

/* The value of "input NAME=value" for name[0..n) in the block, or NULL; *vlen its length. */
static const char *input_value(const struct tfd_node_block *block, const char *name, size_t n,
			       size_t *vlen)
{
	const char *p = block->lines, *end = block->lines + block->lines_len;

	while (p < end) {
		size_t len = line_len(p, end);

		if (!starts(p, len, "input "))
			break; /* the input lines come first (tfd_node_find checks) */
		if (len > 6 + n && memcmp(p + 6, name, n) == 0 && p[6 + n] == '=') {
			*vlen = len - 7 - n;
			return p + 7 + n;
		}
		p += len + (p + len < end);
	}
	return NULL;
}

/* The first base entry named name[0..n), or NULL. */
static const char *base_entry(const char *base, size_t base_len, const char *name, size_t n)
{
	const char *p = base, *end = base + base_len;

	while (p < end) {
		size_t len = strnlen(p, (size_t) (end - p));

		if (name_len(p) == n && memcmp(p, name, n) == 0)
			return p;
		p += len + 1;
	}
	return NULL;
}

static const char *actual_entry(char *const actual[], const char *name, size_t n)
{
	size_t i;

	for (i = 0; actual[i]; i++)
		if (name_len(actual[i]) == n && memcmp(actual[i], name, n) == 0)
			return actual[i];
	return NULL;
}

static int differs(const char *name, size_t n, char *why, size_t whylen)
{
	char shown[96];

	tfd_quote_n(name, n < 40 ? n : 40, shown, sizeof(shown));
	snprintf(why, whylen, "%s", shown);
	return 0;
}

int tfd_node_env_matches(char *const actual[], const char *base, size_t base_len,
			 const struct tfd_node_block *block, char *why, size_t whylen)
{
	const char *p, *end;
	size_t i;

	/* every variable of the task is predicted with the same value */
	for (i = 0; actual[i]; i++) {
		const char *a = actual[i], *b, *v;
		size_t n = name_len(a), vlen;

		if (is_ignored(a, n))
			continue;
		v = input_value(block, a, n, &vlen);
		if (v) {
			if (a[n] != '=' || strlen(a + n + 1) != vlen || memcmp(a + n + 1, v, vlen) != 0)
				return differs(a, n, why, whylen);
			continue;
		}
		b = base_entry(base, base_len, a, n);
		if (!b || strcmp(a, b) != 0)
			return differs(a, n, why, whylen);
	}
	/* every predicted variable is in the task with that value */
	for (p = base, end = base + base_len; p < end; p += strnlen(p, (size_t) (end - p)) + 1) {
		size_t n = name_len(p), vlen;
		const char *a;

		if (is_ignored(p, n) || input_value(block, p, n, &vlen))
			continue;
		a = actual_entry(actual, p, n);
		if (!a || strcmp(a, p) != 0)
			return differs(p, n, why, whylen);
	}
	/* every input value is in the task (the input lines come first in the block) */
	for (p = block->lines, end = block->lines + block->lines_len; p < end; p += line_skip(p, end)) {
		size_t len = line_len(p, end), n;
		const char *name = p + 6, *eq, *a;

		if (!starts(p, len, "input "))
			break;
		eq = memchr(name, '=', len - 6);
		n = eq ? (size_t) (eq - name) : len - 6;
		if (!eq)
			return differs(name, n, why, whylen);
		if (is_ignored(name, n))
			continue;
		a = actual_entry(actual, name, n);
		if (!a || a[n] != '=' || strlen(a + n + 1) != len - 7 - n ||
		    memcmp(a + n + 1, eq + 1, len - 7 - n) != 0)
			return differs(name, n, why, whylen);
	}
	return 1;
}
