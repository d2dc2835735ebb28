/*
 * text.h - bounded, printable message text, shared by every part of the plugin.
 *
 * Every message the plugin writes (to a user's terminal, to the task's stderr through
 * slurmstepd, to slurmd's log) is one line into a fixed buffer, and any user input it
 * quotes (a spec, a plugstack.conf argument, hook output, a variable name) is shown
 * escaped and clipped, so no control character reaches a terminal or a log and no
 * message overruns.  These helpers are kept apart from the spec checker (spec.h) because
 * config.c, hook.c, node.c and option.c use them too.  No Slurm headers here: the unit
 * test links this file alone.
 */
#ifndef TFSLURM_TEXT_H
#define TFSLURM_TEXT_H

#include <stddef.h>

/*
 * Write a printable, bounded rendering of `s` into out[0..outlen): bytes outside
 * printable ASCII become \xNN, and text beyond `maxshow` input bytes becomes "...".
 * Always NUL-terminates when outlen > 0.  Used to show user input in messages without
 * letting control characters (newlines, escapes) through to a terminal or a log.
 */
void tfd_quote(const char *s, size_t maxshow, char *out, size_t outlen);

/* As tfd_quote, for exactly the n bytes at s (which must not contain a NUL), without "..."
 * unless out is too small. */
void tfd_quote_n(const char *s, size_t n, char *out, size_t outlen);

/* Format a one-line message into err (errlen bytes, always terminated; err may be NULL). */
void tfd_set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
