/*
 * text.c - quote user input for a message, format a one-line error; see text.h.
 */
#include "text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void tfd_set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Quote exactly n bytes of s (no NUL inside); "..." marks truncation to fit outlen. */
static void quote_span(const char *s, size_t n, int more, char *out, size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0, i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char) s[i];
		char piece[4];
		size_t plen;

		if (c >= 0x20 && c < 0x7f && c != '\\') {
			piece[0] = (char) c;
			plen = 1;
		} else {
			piece[0] = '\\';
			piece[1] = 'x';
			piece[2] = hex[c >> 4];
			piece[3] = hex[c & 0xf];
			plen = 4;
		}
		/* keep 3 bytes for a possible "..." and 1 for the NUL */
		if (o + plen + 4 > outlen) {
			more = 1;
			break;
		}
		memcpy(out + o, piece, plen);
		o += plen;
	}
	if (more && o + 4 <= outlen) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}

void tfd_quote(const char *s, size_t maxshow, char *out, size_t outlen)
{
	size_t n;

	if (!out || outlen == 0)
		return;
	if (!s) {
		snprintf(out, outlen, "(none)");
		return;
	}
	n = strnlen(s, maxshow + 1);
	quote_span(s, n > maxshow ? maxshow : n, n > maxshow, out, outlen);
}

void tfd_quote_n(const char *s, size_t n, char *out, size_t outlen)
{
	if (!out || outlen == 0)
		return;
	quote_span(s, n, 0, out, outlen);
}
