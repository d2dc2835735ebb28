/*
 * spec_test.c - tests for the --tf-dist spec parser (src/spec.c), the message quoting
 * (src/text.c), the plugstack.conf arguments (src/config.c), the hook runner (src/hook.c),
 * the per-node output reader (src/node.c) and the release comparison (src/version.c); none
 * needs Slurm.
 *
 *   spec_test unit            table-driven cases, hostile input, tfd_quote
 *   spec_test fuzz N [SEED]   N random inputs, checked against an independent model (the
 *                             same bytes, and random per-node output, must not crash or
 *                             overrun the hook and node readers)
 *   spec_test check           read NUL-terminated specs on stdin, print "OK" or
 *                             "ERR <reason>" per spec (used by tests/test_plugin.py to
 *                             compare with tfslurm/jobspec.py)
 *   spec_test check-template  the same for host_template= values (src/config.c), compared
 *                             with tfslurm/plan.py's check
 *   spec_test check-message   as check, with the whole line --tf-dist prints after its
 *                             name (tfd_spec_error), which tests/test_spec_messages.py
 *                             compares with tfslurm/jobspec.py's message
 *
 * Every input is copied into a heap buffer of exactly its size, so AddressSanitizer and
 * valgrind see any read past the end.
 */
#include <ctype.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "hook.h"
#include "node.h"
#include "spec.h"
#include "text.h"
#include "version.h"

static int failures;

static char *exact_copy(const char *s, size_t n)
{
	char *p = malloc(n + 1);

	if (!p) {
		perror("malloc");
		exit(2);
	}
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

static int printable_line(const char *s)
{
	for (; *s; s++)
		if ((unsigned char) *s < 0x20 || (unsigned char) *s >= 0x7f)
			return 0;
	return 1;
}

static void expect(const char *spec, int want_ok, const char *want_in_error)
{
	char err[256];
	char *copy = spec ? exact_copy(spec, strlen(spec)) : NULL;
	int rc = tfd_spec_check(copy, err, sizeof(err));
	char shown[128];

	tfd_quote(spec, 40, shown, sizeof(shown));
	if ((rc == 0) != want_ok) {
		printf("FAIL '%s': rc=%d (%s), wanted %s\n", shown, rc, err,
		       want_ok ? "valid" : "invalid");
		failures++;
	} else if (!want_ok && want_in_error && !strstr(err, want_in_error)) {
		printf("FAIL '%s': error '%s' lacks '%s'\n", shown, err, want_in_error);
		failures++;
	} else if (!printable_line(err)) {
		printf("FAIL '%s': error message is not printable ASCII\n", shown);
		failures++;
	}
	free(copy);
}

static void unit_quote(void)
{
	char out[32];

	tfd_quote("a\nb\\c\xff", 100, out, sizeof(out));
	if (strcmp(out, "a\\x0ab\\x5cc\\xff") != 0) {
		printf("FAIL quote escapes: %s\n", out);
		failures++;
	}
	tfd_quote("abcdefghijklmnopqrstuvwxyz0123456789", 100, out, 16);
	if (strlen(out) >= 16 || strcmp(out + strlen(out) - 3, "...") != 0) {
		printf("FAIL quote truncation: %s\n", out);
		failures++;
	}
	tfd_quote("abcdef", 3, out, sizeof(out));
	if (strcmp(out, "abc...") != 0) {
		printf("FAIL quote maxshow: %s\n", out);
		failures++;
	}
	tfd_quote(NULL, 3, out, sizeof(out));
	if (strcmp(out, "(none)") != 0) {
		printf("FAIL quote NULL: %s\n", out);
		failures++;
	}
	tfd_quote("abc", 3, out, 1);
	if (out[0] != '\0') {
		printf("FAIL quote outlen 1\n");
		failures++;
	}
}

static void unit_hostile(void)
{
	char err[64];
	char *buf;
	size_t i;

	/* not NUL-terminated within TFD_SPEC_MAX + 1 bytes: must stop reading there */
	buf = malloc(TFD_SPEC_MAX + 1);
	memset(buf, 'a', TFD_SPEC_MAX + 1);
	if (tfd_spec_check(buf, err, sizeof(err)) != -1 || !strstr(err, "longer than")) {
		printf("FAIL unterminated buffer: %s\n", err);
		failures++;
	}
	free(buf);

	/* exactly TFD_SPEC_MAX bytes: read in full (the length cap is not the error) */
	buf = malloc(TFD_SPEC_MAX + 1);
	memcpy(buf, "worker:1", 8);
	for (i = 8; i < TFD_SPEC_MAX; i++)
		buf[i] = 'x';
	buf[TFD_SPEC_MAX] = '\0';
	if (tfd_spec_check(buf, err, sizeof(err)) != -1 || !strstr(err, "after the count")) {
		printf("FAIL %d-byte junk: %s\n", TFD_SPEC_MAX, err);
		failures++;
	}
	free(buf);

	/* small error buffers are filled safely */
	if (tfd_spec_check("bad spec", err, 1) != -1 || err[0] != '\0') {
		printf("FAIL errlen 1\n");
		failures++;
	}
	if (tfd_spec_check("bad", NULL, 0) != -1) {
		printf("FAIL NULL err buffer\n");
		failures++;
	}
	/* a short buffer gets the start of the message, terminated */
	if (tfd_spec_check("ps:1;worker:3", err, 12) != -1 || strcmp(err, "unexpected ") != 0) {
		printf("FAIL errlen 12: '%s'\n", err);
		failures++;
	}
	{
		char reason[256], line[256];

		tfd_spec_check("ps:1;worker:3", reason, sizeof(reason));
		tfd_spec_error("ps:1;worker:3", reason, line, sizeof(line));
		if (strcmp(line, "jobs spec 'ps:1;worker:3': unexpected ';' at byte 4 after the count "
			    "of job 'ps'; separate jobs with ','") != 0) {
			printf("FAIL tfd_spec_error: '%s'\n", line);
			failures++;
		}
	}
}

static void config_case(const char *args, int want_valid, const char *want_spec,
			const char *want_template, const char *want_in_error)
{
	char buf[512];
	char *av[8];
	int ac = 0;
	struct tfd_config cfg;
	char *tok;

	snprintf(buf, sizeof(buf), "%s", args);
	for (tok = strtok(buf, "|"); tok && ac < 8; tok = strtok(NULL, "|"))
		av[ac++] = tok;
	tfd_config_parse(&cfg, ac, av);
	if (cfg.valid != want_valid ||
	    (want_valid && strcmp(cfg.default_spec, want_spec) != 0) ||
	    (want_valid && strcmp(cfg.host_template, want_template) != 0) ||
	    (!want_valid && !strstr(cfg.error, want_in_error)) || !printable_line(cfg.error)) {
		printf("FAIL config '%s': valid=%d spec='%s' template='%s' error='%s'\n", args,
		       cfg.valid, cfg.default_spec, cfg.host_template, cfg.error);
		failures++;
	}
}

static void unit_config(void)
{
	char longarg[400];

	config_case("", 1, "worker:*", "", NULL);
	config_case("default_spec=chief:1,worker:*", 1, "chief:1,worker:*", "", NULL);
	config_case("host_template={node}-ib|default_spec=ps:1,worker:*", 1, "ps:1,worker:*",
		    "{node}-ib", NULL);
	config_case("host_template={node}.cluster.example.org", 1, "worker:*",
		    "{node}.cluster.example.org", NULL);
	config_case("default_spec=bogus", 0, NULL, NULL, "not a valid jobs spec");
	config_case("default_spec=", 0, NULL, NULL, "not a valid jobs spec: empty");
	config_case("default_spec=chief:2", 0, NULL, NULL, "at most one");
	config_case("host_template=node-ib", 0, NULL, NULL, "must contain {node}");
	config_case("host_template={node}{node}", 0, NULL, NULL, "must contain {node} once");
	config_case("host_template={node}:8888", 0, NULL, NULL, "':' at byte 6");
	config_case("host_template={node} x", 0, NULL, NULL, "' ' at byte 6");
	config_case("host_template={nodes}", 0, NULL, NULL, "'{' at byte 0");
	config_case("host_template={node}}", 0, NULL, NULL, "'}' at byte 6");
	config_case("host_template={node}\x1b", 0, NULL, NULL, "'\\x1b' at byte 6");
	config_case("host_template=\xc3\xa9{node}", 0, NULL, NULL, "'\\xc3' at byte 0");
	config_case("verbose", 0, NULL, NULL, "unknown argument");
	config_case("hook_timeout=5", 1, "worker:*", "", NULL);
	config_case("hook_timeout=0", 0, NULL, NULL, "whole seconds from 1 to 3600");
	config_case("hook_timeout=3601", 0, NULL, NULL, "whole seconds from 1 to 3600");
	config_case("hook_timeout=5s", 0, NULL, NULL, "whole seconds from 1 to 3600");
	config_case("hook_timeout=", 0, NULL, NULL, "whole seconds from 1 to 3600");
	config_case("hook_timeout=999999999", 0, NULL, NULL, "whole seconds from 1 to 3600");
	config_case("default_spec=worker:*|tfdist=1", 0, NULL, NULL, "'tfdist=1': unknown");

	/* a control character in the argument itself, and a template that is too long */
	{
		char *av[1];
		struct tfd_config cfg;
		char arg[] = "host_template={node}\n";

		av[0] = arg;
		tfd_config_parse(&cfg, 1, av);
		if (cfg.valid || !strstr(cfg.error, "\\x0a") || !printable_line(cfg.error)) {
			printf("FAIL config newline: %s\n", cfg.error);
			failures++;
		}
		memset(longarg, 'a', sizeof(longarg) - 1);
		longarg[sizeof(longarg) - 1] = '\0';
		memcpy(longarg, "host_template={node}", 20);
		av[0] = longarg;
		tfd_config_parse(&cfg, 1, av);
		if (cfg.valid || !strstr(cfg.error, "longer than 255")) {
			printf("FAIL config long template: %s\n", cfg.error);
			failures++;
		}
		tfd_config_parse(&cfg, 0, NULL);
		if (!cfg.valid || strcmp(cfg.default_spec, "worker:*") != 0) {
			printf("FAIL config no args\n");
			failures++;
		}
	}
}

/* ---------------------------------------------------------------- hook */

/* What a fake task environment received from tfd_hook_apply. */
struct fake_env {
	char log[8192];
	size_t n;
	int fail_set;
};

static void log_add(struct fake_env *fe, const char *a, const char *b, const char *c)
{
	int w = snprintf(fe->log + fe->n, sizeof(fe->log) - fe->n, "%s%s%s|", a, b, c);

	if (w > 0 && fe->n + (size_t) w < sizeof(fe->log))
		fe->n += (size_t) w;
}

static int fake_set(void *ctx, const char *name, const char *value, char *err, size_t errlen)
{
	struct fake_env *fe = ctx;
	char shown[64];

	if (fe->fail_set) {
		snprintf(err, errlen, "refused %s", name);
		return -1;
	}
	tfd_quote(value, 40, shown, sizeof(shown));
	log_add(fe, name, "=", shown);
	return 0;
}

static int fake_unset(void *ctx, const char *name, char *err, size_t errlen)
{
	(void) err;
	(void) errlen;
	log_add(ctx, "-", name, "");
	return 0;
}

static void fake_print(void *ctx, const char *text, size_t len)
{
	char shown[64];
	char copy[64];

	snprintf(copy, sizeof(copy), "%.*s", (int) (len < 60 ? len : 60), text);
	tfd_quote(copy, 60, shown, sizeof(shown));
	log_add(ctx, "print:", shown, "");
}

static void fake_warn(void *ctx, const char *text, size_t len)
{
	char shown[64];
	char copy[64];

	snprintf(copy, sizeof(copy), "%.*s", (int) (len < 60 ? len : 60), text);
	tfd_quote(copy, 60, shown, sizeof(shown));
	log_add(ctx, "warn:", shown, "");
}

static void hook_case(const char *output, size_t len, int want_rc, const char *want_log,
		      const char *want_in_error)
{
	struct fake_env fe = { .n = 0, .fail_set = 0 };
	struct tfd_hook_ops ops = { fake_set, fake_unset, fake_print, &fe, fake_warn };
	char *buf = malloc(len + 1);
	char err[256] = "";
	int rc;

	memcpy(buf, output, len);
	buf[len] = '\0';
	fe.log[0] = '\0';
	rc = tfd_hook_apply(buf, len, &ops, err, sizeof(err));
	if (rc != want_rc || (want_log && strcmp(fe.log, want_log) != 0) ||
	    (want_in_error && !strstr(err, want_in_error)) || !printable_line(err)) {
		char shown[128];

		tfd_quote_n(output, len < 60 ? len : 60, shown, sizeof(shown));
		printf("FAIL hook '%s': rc=%d log='%s' err='%s'\n", shown, rc, fe.log, err);
		failures++;
	}
	free(buf);
}

#define HOOK(s, rc, log, e) hook_case(s, sizeof(s) - 1, rc, log, e)

/* Whether pid runs (a zombie waiting for its reaper does not). */
static int alive(int pid)
{
	char path[64], line[512];
	FILE *f;
	char *close_paren;
	int running = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(line, sizeof(line), f) && (close_paren = strrchr(line, ')')) && close_paren[1])
		running = close_paren[2] != 'Z';
	fclose(f);
	return running;
}

static void unit_hook(void)
{
	char script[] = "/tmp/tfd_hook_test_XXXXXX";
	char *env[] = { "TFSLURM_TF_DIST=worker:*", "PATH=/usr/bin:/bin", NULL };
	char *out = NULL, err[256];
	size_t out_len = 0;
	int fd, status = 0, rc, saved_stderr, devnull;
	FILE *f;

	HOOK("", 0, "", NULL);
	HOOK("export A=1\nunset B\nprint hello world\n", 0, "A=1|-B|print:hello world|", NULL);
	HOOK("export TF_CONFIG={\"a\": [1, 2]}", 0, "TF_CONFIG={\"a\": [1, 2]}|", NULL);
	HOOK("export  A \t= x = y \n", 0, "A= x = y |", NULL);
	HOOK("export A=\nexport B=a\rb\n", 0, "A=|B=a\\x0db|", NULL);
	HOOK("garbage\nexport\nexported=1\n# export C=1\nprint\n", 0, "", NULL);
	HOOK("unset  SLURM_SCRIPT_CONTEXT  \n", 0, "-SLURM_SCRIPT_CONTEXT|", NULL);
	HOOK("print   spaced\n\n\n", 0, "print:spaced|", NULL);
	HOOK("export A=1\nwarn  tfslurm: replaced A\nwarning x\n", 0, "A=1|warn:tfslurm: replaced A|", NULL);
	{
		/* without a warn callback (TaskProlog-style callers) the line is ignored */
		struct fake_env fe = { .n = 0, .fail_set = 0 };
		struct tfd_hook_ops ops = { fake_set, fake_unset, fake_print, &fe, NULL };
		char line[] = "warn dropped\nexport B=2\n";

		fe.log[0] = '\0';
		if (tfd_hook_apply(line, sizeof(line) - 1, &ops, err, sizeof(err)) != 0 ||
		    strcmp(fe.log, "B=2|") != 0) {
			printf("FAIL hook warn without callback: log='%s'\n", fe.log);
			failures++;
		}
	}
	HOOK("export A=1\nexport 1BAD=2\nexport C=3\n", -1, "A=1|", "invalid variable '1BAD'");
	HOOK("export =2\n", -1, "", "invalid variable ''");
	HOOK("export A-B=2\n", -1, "", "invalid variable 'A-B'");
	HOOK("export NOEQUALS\n", -1, "", "without '='");
	HOOK("unset \n", -1, "", "invalid variable ''");
	HOOK("unset A B\n", -1, "", "invalid variable 'A B'");
	HOOK("export A=1\0\nexport B=2\n", -1, "", "NUL byte");
	HOOK("export \xc3\xa9=1\n", -1, "", "'\\xc3\\xa9'");
	{
		/* a value Slurm would drop: name "X" + value + 2 >= 131072, i.e. 131069 bytes */
		size_t len = 9 + (TFD_ENV_STRLEN_MAX - 3);
		char *big = malloc(len + 1);

		memcpy(big, "export X=", 9);
		memset(big + 9, 'v', len - 9);
		hook_case(big, len, -1, "", "more than Slurm can pass");
		hook_case(big, len - 1, 0, NULL, NULL); /* 131068 bytes fit */
		free(big);
	}
	{
		struct fake_env fe = { .n = 0, .fail_set = 1 };
		struct tfd_hook_ops ops = { fake_set, fake_unset, fake_print, &fe, NULL };
		char line[] = "print first\nexport A=1\nprint never\n";

		fe.log[0] = '\0';
		if (tfd_hook_apply(line, sizeof(line) - 1, &ops, err, sizeof(err)) != -1 ||
		    strcmp(err, "refused A") != 0 || strcmp(fe.log, "print:first|") != 0) {
			printf("FAIL hook stops at a refused set: %s / %s\n", err, fe.log);
			failures++;
		}
	}

	/* tfd_hook_run: a real child process, its output, its status, the environment */
	fd = mkstemp(script);
	f = fdopen(fd, "w");
	fprintf(f, "#!/bin/sh\necho \"export GOT=$TFSLURM_TF_DIST\"\nread x && echo stdin-not-empty\n"
		   "echo \"print $PATH\"\nexit 3\n");
	fclose(f);
	chmod(script, 0700);
	if (tfd_hook_run(script, env, 0, &out, &out_len, &status, err, sizeof(err)) != 0 ||
	    strcmp(out, "export GOT=worker:*\nprint /usr/bin:/bin\n") != 0 || out_len != strlen(out) ||
	    !WIFEXITED(status) || WEXITSTATUS(status) != 3) {
		printf("FAIL hook run: %s / '%s' / %d\n", err, out ? out : "(null)", status);
		failures++;
	}
	free(out);
	/* more output than TFD_HOOK_OUTPUT_MAX: refused, the child is killed, no leak */
	f = fopen(script, "w");
	fprintf(f, "#!/bin/sh\nexec yes export A=1\n");
	fclose(f);
	if (tfd_hook_run(script, env, 0, &out, &out_len, &status, err, sizeof(err)) != -1 ||
	    !strstr(err, "more than") || out != NULL) {
		printf("FAIL hook run flood: %s\n", err);
		failures++;
	}
	/* a hook that never finishes (it reads a FIFO nobody writes): killed after the limit,
	 * with its children, and says so */
	f = fopen(script, "w");
	fprintf(f, "#!/bin/sh\necho 'export A=1'\nsleep 30 &\necho $! > %s.child\nwait\n", script);
	fclose(f);
	chmod(script, 0700);
	{
		char childfile[sizeof(script) + 8];
		FILE *cf;
		int child = 0;
		time_t t0 = time(NULL);
		rc = tfd_hook_run(script, env, 1, &out, &out_len, &status, err, sizeof(err));

		if (rc != -2 || out != NULL || !strstr(err, "did not finish within 1 s") ||
		    time(NULL) - t0 > 5) {
			printf("FAIL hook run timeout: rc %d, %s\n", rc, err);
			failures++;
		}
		snprintf(childfile, sizeof(childfile), "%s.child", script);
		cf = fopen(childfile, "r");
		if (cf) {
			if (fscanf(cf, "%d", &child) != 1)
				child = 0;
			fclose(cf);
		}
		unlink(childfile);
		usleep(100000);
		if (child <= 0 || alive(child)) {
			printf("FAIL hook run timeout: the hook's child %d survived\n", child);
			failures++;
		}
	}
	/* output closed but the hook keeps running: the limit still holds */
	f = fopen(script, "w");
	fprintf(f, "#!/bin/sh\necho 'export A=1'\nexec >&-\nsleep 30\n");
	fclose(f);
	if (tfd_hook_run(script, env, 1, &out, &out_len, &status, err, sizeof(err)) != -2) {
		printf("FAIL hook run timeout after closing stdout: %s\n", err);
		failures++;
	}
	/* output closed, then an exit well within the limit: reaped at the exit, status kept */
	f = fopen(script, "w");
	fprintf(f, "#!/bin/sh\necho 'export A=1'\nexec >&-\nsleep 0.3\nexit 5\n");
	fclose(f);
	{
		time_t t0 = time(NULL);

		rc = tfd_hook_run(script, env, 5, &out, &out_len, &status, err, sizeof(err));
		if (rc != 0 || !out || strcmp(out, "export A=1\n") != 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 5 || time(NULL) - t0 > 2) {
			printf("FAIL hook run exit after closing stdout: rc %d, %s\n", rc, err);
			failures++;
		}
		free(out);
	}
	/* not executable (the child's "cannot run" line goes to /dev/null here, so that a
	 * passing `make check` prints nothing alarming) */
	chmod(script, 0600);
	fflush(stderr);
	saved_stderr = dup(2);
	devnull = open("/dev/null", O_WRONLY);
	dup2(devnull, 2);
	close(devnull);
	rc = tfd_hook_run(script, env, 0, &out, &out_len, &status, err, sizeof(err));
	dup2(saved_stderr, 2);
	close(saved_stderr);
	if (rc != 0 ||
	    !WIFEXITED(status) || WEXITSTATUS(status) != 127) {
		printf("FAIL hook run not executable: %d\n", status);
		failures++;
	}
	free(out);
	unlink(script);
}

/* ---------------------------------------------------------------- per-node output */

static void node_case(const char *out, unsigned long localid, int want_rc, int want_status,
		      const char *want_lines, const char *want_preamble)
{
	struct tfd_node_block block;
	char *copy = exact_copy(out, strlen(out));
	int rc = tfd_node_find(copy, strlen(copy), localid, &block);

	if (rc != want_rc ||
	    (rc == 0 && (block.status != want_status || block.lines_len != strlen(want_lines) ||
			 memcmp(block.lines, want_lines, block.lines_len) != 0 ||
			 block.preamble_len != strlen(want_preamble) ||
			 memcmp(block.preamble, want_preamble, block.preamble_len) != 0))) {
		char shown[128];

		tfd_quote(out, 100, shown, sizeof(shown));
		printf("FAIL node output '%s' task %lu: rc %d (want %d)\n", shown, localid, rc, want_rc);
		failures++;
	}
	free(copy);
}

static void env_case(char *const actual[], const char *base, size_t base_len, const char *inputs,
		     int want, const char *want_why)
{
	struct tfd_node_block block = { NULL, 0, inputs, strlen(inputs), 0 };
	char why[128] = "";
	int got = tfd_node_env_matches(actual, base, base_len, &block, why, sizeof(why));

	if (got != want || (!want && strcmp(why, want_why) != 0)) {
		printf("FAIL env match with inputs '%s': %d '%s' (want %d '%s')\n", inputs, got, why,
		       want, want_why ? want_why : "");
		failures++;
	}
}

static void unit_node(void)
{
	const char *good = "unset SLURM_SCRIPT_CONTEXT\n" TFD_NODE_HEADER "\n"
			   "task 0 0\ninput SLURM_PROCID=4\nexport TF_CONFIG={\"a\":1}\n"
			   "task 1 2\ninput SLURM_PROCID=5\nprint oops\n"
			   "task 2 0\nend\n";
	static const char base[] = "A=1\0B=2\0SLURM_TASK_PID=7\0";
	char *same[] = { "SLURM_TASK_PID=9", "B=3", "A=1", NULL };
	char *extra[] = { "A=1", "B=3", "C=", NULL };
	char *missing[] = { "B=3", NULL };
	char *other_b[] = { "A=1", "B=2", NULL };
	char *no_eq[] = { "A=1", "B=3", "D", NULL };
	char *dup[] = { "A=1", "A=1", "B=3", NULL };

	node_case(good, 0, 0, 0, "input SLURM_PROCID=4\nexport TF_CONFIG={\"a\":1}\n",
		  "unset SLURM_SCRIPT_CONTEXT\n");
	node_case(good, 1, 0, 2, "input SLURM_PROCID=5\nprint oops\n", "unset SLURM_SCRIPT_CONTEXT\n");
	node_case(good, 2, 0, 0, "", "unset SLURM_SCRIPT_CONTEXT\n");
	node_case(good, 3, -1, 0, NULL, NULL); /* no block for this task */
	node_case(TFD_NODE_HEADER "\ntask 0 0\nend", 0, 0, 0, "", ""); /* no final newline */
	node_case("task 0 0\nend\n", 0, -1, 0, NULL, NULL);           /* no header */
	node_case(TFD_NODE_HEADER "\ntask 0 0\n", 0, -1, 0, NULL, NULL); /* cut short: no end */
	node_case(TFD_NODE_HEADER "\ntask 0 0\nend\nexport A=1\n", 0, -1, 0, NULL, NULL);
	node_case(TFD_NODE_HEADER "\ntask 0 0\ntask 0 0\nend\n", 0, -1, 0, NULL, NULL);
	node_case(TFD_NODE_HEADER "\ntask 0 0\nbogus\nend\n", 0, -1, 0, NULL, NULL);
	node_case(TFD_NODE_HEADER "\ntask 0\nend\n", 0, -1, 0, NULL, NULL);
	node_case(TFD_NODE_HEADER "\ntask x 0\nend\n", 0, -1, 0, NULL, NULL);
	node_case(TFD_NODE_HEADER "\ntask 0 256\nend\n", 0, -1, 0, NULL, NULL);
	node_case(TFD_NODE_HEADER "\ntask 0 0 \nend\n", 0, -1, 0, NULL, NULL);
	node_case(TFD_NODE_HEADER "\ntask 1234567890 0\nend\n", 0, -1, 0, NULL, NULL);
	node_case(TFD_NODE_HEADER "\ntask -1 0\nend\n", 0, -1, 0, NULL, NULL);
	node_case(TFD_NODE_HEADER " \ntask 0 0\nend\n", 0, -1, 0, NULL, NULL);
	node_case(TFD_NODE_HEADER "\ntask 0 0\nexport A=1\ninput B=2\nend\n", 0, -1, 0, NULL, NULL);
	node_case(TFD_NODE_HEADER "\ntask 1 0\nexport A=1\ntask 0 0\ninput B=2\nend\n", 0, 0, 0,
		  "input B=2\n", "");
	{
		char with_nul[] = TFD_NODE_HEADER "\ntask 0 0\nexport A=x\0y\nend\n";
		struct tfd_node_block block;

		if (tfd_node_find(with_nul, sizeof(with_nul) - 1, 0, &block) != -1) {
			printf("FAIL node output with a NUL byte accepted\n");
			failures++;
		}
	}

	env_case(same, base, sizeof(base) - 1, "input B=3\nexport X=1\n", 1, NULL);
	env_case(extra, base, sizeof(base) - 1, "input B=3\n", 0, "C");
	env_case(missing, base, sizeof(base) - 1, "input B=3\n", 0, "A");
	env_case(other_b, base, sizeof(base) - 1, "input B=3\n", 0, "B");
	env_case(other_b, base, sizeof(base) - 1, "", 1, NULL);
	env_case(other_b, base, sizeof(base) - 1, "input E=1\n", 0, "E");
	env_case(no_eq, base, sizeof(base) - 1, "input B=3\n", 0, "D");
	env_case(dup, base, sizeof(base) - 1, "input B=3\ninput A=1\n", 1, NULL);
	env_case(other_b, base, sizeof(base) - 1, "input B\n", 0, "B");
	env_case(other_b, "A=1\0B=2\0C=3\0", 12, "", 0, "C");
}

/* ---------------------------------------------------------------- release comparison */

static void version_case(const char *plugin, const char *out, int want, const char *want_in_msg)
{
	char *copy = exact_copy(out, strlen(out));
	char msg[512] = "";
	int got = tfd_version_check(plugin, "/etc/slurm/hook", copy, strlen(copy), msg, sizeof(msg));

	if (got != want || (want && (!strstr(msg, want_in_msg) || !printable_line(msg))) ||
	    (!want && msg[0])) {
		char shown[128];

		tfd_quote(out, 100, shown, sizeof(shown));
		printf("FAIL version %s against '%s': %d '%s' (want %d '%s')\n", plugin, shown, got,
		       msg, want, want_in_msg ? want_in_msg : "");
		failures++;
	}
	free(copy);
}

static void unit_version(void)
{
	const char *blocks = TFD_NODE_HEADER "\ntask 0 0\nexport A=1\nend\n";
	char long_line[200];

	version_case("0.2.0", "unset X\n" TFD_VERSION_LINE "0.2.0\n" TFD_NODE_HEADER "\nend\n", 0, NULL);
	version_case("0.2.0", TFD_VERSION_LINE "0.2.0", 0, NULL); /* no newline, no header */
	version_case("0.2.0", TFD_VERSION_LINE "0.1.0\n" TFD_NODE_HEADER "\nend\n", 1,
		     "the plugin is version 0.2.0 but the hook /etc/slurm/hook is version 0.1.0; "
		     "install both from one release");
	/* another release by a suffix, a prefix or a blank */
	version_case("0.2.0", TFD_VERSION_LINE "0.2.0rc1\n", 1, "is version 0.2.0rc1;");
	version_case("0.2.0", TFD_VERSION_LINE "0.2\n", 1, "is version 0.2;");
	version_case("0.2.0", TFD_VERSION_LINE "0.2.0 \n", 1, "is version 0.2.0 ;");
	version_case("0.2.0", TFD_VERSION_LINE "\n", 1, "is version unstated");
	/* a hook that states none: a wrapper from before versions were stated */
	version_case("0.2.0", "unset X\n", 1, "is version unstated (older)");
	version_case("0.2.0", "", 1, "is version unstated (older)");
	version_case("0.2.0", blocks, 1, "is version unstated (older)");
	/* only before the tasks' blocks: a task's lines cannot state the hook's release */
	version_case("0.2.0", TFD_NODE_HEADER "\n" TFD_VERSION_LINE "0.2.0\nend\n", 1, "unstated");
	version_case("0.2.0", "print " TFD_VERSION_LINE "0.2.0\n", 1, "unstated");
	/* the first statement counts; control bytes are shown escaped, on one line */
	version_case("0.2.0", TFD_VERSION_LINE "0.1.0\n" TFD_VERSION_LINE "0.2.0\n", 1, "0.1.0;");
	version_case("0.2.0", TFD_VERSION_LINE "0.2\x1b[0m\r\n", 1, "0.2\\x1b[0m\\x0d;");
	/* longer than TFD_VERSION_MAX: not a statement */
	memset(long_line, 'v', sizeof(long_line));
	memcpy(long_line, TFD_VERSION_LINE, strlen(TFD_VERSION_LINE));
	long_line[strlen(TFD_VERSION_LINE) + TFD_VERSION_MAX + 1] = '\0';
	version_case("0.2.0", long_line, 1, "unstated");
	long_line[strlen(TFD_VERSION_LINE) + TFD_VERSION_MAX] = '\0';
	version_case("0.2.0", long_line, 1, "is version vvvv");
	{
		char small[40];

		if (tfd_version_check("0.2.0", "/h", "", 0, small, sizeof(small)) != 1 ||
		    strlen(small) != sizeof(small) - 1) {
			printf("FAIL version message not cut to its buffer\n");
			failures++;
		}
	}
}

static int unit(void)
{
	char *big;
	size_t i;

	expect("worker:4", 1, NULL);
	/* TF's job names are exact: another case or one typo is refused, naming the real one */
	expect("Worker:*", 0, "not TensorFlow's 'worker'");
	expect("WORKER:2", 0, "write worker");
	expect("ps:1,wokrer:*", 0, "not TensorFlow's 'worker'");
	expect("workers:*", 0, "not TensorFlow's 'worker'");
	expect("worke:*", 0, "not TensorFlow's 'worker'");
	expect("chef:1,worker:*", 0, "not TensorFlow's 'chief'");
	expect("PS:1,worker:*", 0, "not TensorFlow's 'ps'");
	expect("pss:1,worker:*", 0, "not TensorFlow's 'ps'");
	expect("sp:1,worker:*", 0, "not TensorFlow's 'ps'");
	expect("evaluatr:1,worker:*", 0, "not TensorFlow's 'evaluator'");
	expect("chief:1,worker:*,Evaluator:1", 0, "not TensorFlow's 'evaluator'");
	/* names two edits or more away stay allowed */
	expect("wrkr:2", 1, NULL);
	expect("server:2", 1, NULL);
	expect("ps2x:1,worker:*", 1, NULL);
	expect("learner:1,actor:*", 1, NULL);
	expect("worker:*", 1, NULL);
	expect("chief:1,ps:2,worker:*", 1, NULL);
	expect("ps:1,worker:3", 1, NULL);
	expect("evaluator:1,chief:1,worker:2", 1, NULL);
	expect("My_Job2:123456789012345678", 1, NULL);
	expect(" ps : 1 ,\tworker:* ", 1, NULL);
	expect("worker:0,ps:*", 1, NULL);
	expect("worker:04", 1, NULL);
	expect("chief:1,worker:0,ps:1", 1, NULL);
	expect("chief:*", 1, NULL);

	expect(NULL, 0, "no jobs spec");
	expect("", 0, "empty; write NAME:COUNT");
	expect(" \t ", 0, "empty; write NAME:COUNT");
	expect("worker", 0, "has no count");
	expect("worker,ps:1", 0, "has no count");
	expect("worker:", 0, "needs a count");
	expect("worker:,ps:1", 0, "needs a count");
	expect("worker:0", 0, "every count is 0");
	expect("worker:0,ps:0", 0, "every count is 0");
	expect("worker:-1", 0, "unexpected '-'");
	expect("worker:+1", 0, "unexpected '+'");
	expect("worker:1234567890123456789", 0, "more than 18 digits");
	expect("worker:*,ps:*", 0, "more than one");
	expect("worker:1,worker:2", 0, "appears twice");
	expect("worker:1, worker :*", 0, "appears twice");
	expect("chief:2", 0, "at most one");
	expect("evaluator:3,worker:*", 0, "at most one");
	expect("worker:1,", 0, "empty entry");
	expect(",worker:1", 0, "empty entry");
	expect("ps:1,,worker:1", 0, "empty entry");
	expect("ps:1, ,worker:1", 0, "empty entry");
	expect("1worker:1", 0, "unexpected '1'");
	expect("_w:1", 0, "unexpected '_'");
	expect("wor-ker:1", 0, "unexpected '-' at byte 3 after job 'wor'");
	expect("wor ker:1", 0, "unexpected 'k' at byte 4 after job 'wor'");
	expect("worker:4x", 0, "after the count");
	expect("worker:4 5", 0, "after the count");
	expect("worker:4\n", 0, "control character '\\x0a' at byte 8");
	expect("worker:4\nps:1", 0, "control character '\\x0a'");
	expect("\nworker:4", 0, "control character '\\x0a' at byte 0");
	expect("worker:4\r", 0, "control character '\\x0d'");
	expect("worker:4\x7f", 0, "control character '\\x7f'");
	expect("ps:1;worker:3", 0, "unexpected ';'");
	expect("ps=1", 0, "unexpected '='");
	expect("w\xc3\xb6rker:1", 0, "non-ASCII byte '\\xc3' at byte 1");
	expect("worker:\xef\xbc\x94", 0, "non-ASCII byte '\\xef'");
	expect("worker::4", 0, "unexpected ':'");
	expect("worker:*:1", 0, "after the count");
	expect("worker:**", 0, "after the count");
	expect(":4", 0, "unexpected ':'");
	expect("\x1b[31mworker:1", 0, "control character '\\x1b'");
	expect("worker:1,\xff", 0, "non-ASCII byte '\\xff'");

	/* exactly TFD_SPEC_MAX bytes is accepted, one more is not */
	big = malloc(TFD_SPEC_MAX + 2);
	memcpy(big, "worker:1", 8);
	for (i = 8; i < TFD_SPEC_MAX; i++)
		big[i] = ' ';
	big[TFD_SPEC_MAX] = '\0';
	expect(big, 1, NULL);
	big[TFD_SPEC_MAX] = ' ';
	big[TFD_SPEC_MAX + 1] = '\0';
	expect(big, 0, "longer than 4096 bytes");
	/* the most entries that fit: "a0:1,a1:1,..." with distinct names */
	big[0] = '\0';
	for (i = 0; strlen(big) + 12 < TFD_SPEC_MAX; i++)
		snprintf(big + strlen(big), TFD_SPEC_MAX + 2 - strlen(big), "%sj%zu:1",
			 i ? "," : "", i);
	expect(big, 1, NULL);
	free(big);

	unit_quote();
	unit_hostile();
	unit_config();
	unit_hook();
	unit_node();
	unit_version();
	if (failures) {
		printf("%d failure(s)\n", failures);
		return 1;
	}
	printf("spec_test unit: all cases passed\n");
	return 0;
}

/* ---------------------------------------------------------------- fuzzing */

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* xorshift64*: deterministic for a given seed */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

/*
 * An independent model of the grammar, written differently from spec.c (split first,
 * then check each piece), used to cross-check its verdicts on random input.
 */
static int model_space(char c) { return c == ' ' || c == '\t'; }

/* [lo, hi) of s with spaces and tabs trimmed on both sides. */
static void trim(const char *s, size_t *lo, size_t *hi)
{
	while (*lo < *hi && model_space(s[*lo]))
		(*lo)++;
	while (*hi > *lo && model_space(s[*hi - 1]))
		(*hi)--;
}

/* Optimal-string-alignment distance, case folded: the model's own near-miss rule. */
static size_t model_distance(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b), d[64][16], i, j;

	if (alen >= 64)
		return 99;
	for (i = 0; i <= alen; i++)
		d[i][0] = i;
	for (j = 0; j <= blen; j++)
		d[0][j] = j;
	for (i = 1; i <= alen; i++) {
		for (j = 1; j <= blen; j++) {
			char ca = (char) tolower((unsigned char) a[i - 1]);
			size_t best = d[i - 1][j - 1] + (ca != b[j - 1]);

			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && ca == b[j - 2] &&
			    tolower((unsigned char) a[i - 2]) == b[j - 1] && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[alen][blen];
}

static int model_near_miss(const char *name, size_t len)
{
	static const char *const tf[] = { "chief", "worker", "ps", "evaluator" };
	size_t k;

	for (k = 0; k < 4; k++)
		if (strlen(tf[k]) == len && memcmp(name, tf[k], len) == 0)
			return 0;
	for (k = 0; k < 4; k++)
		if (model_distance(name, len, tf[k]) <= 1)
			return 1;
	return 0;
}

static int model_valid(const char *s, size_t n)
{
	size_t start = 0, i, e = 0, k, j;
	size_t ns[TFD_SPEC_MAX], nl[TFD_SPEC_MAX];
	int stars = 0, positive = 0;

	if (n > TFD_SPEC_MAX)
		return 0;
	for (i = 0; i <= n; i++) {
		size_t colon, nlo, nhi, clo, chi;

		if (i < n && s[i] != ',')
			continue;
		for (colon = start; colon < i && s[colon] != ':'; colon++)
			;
		if (colon == i)
			return 0;
		nlo = start, nhi = colon, clo = colon + 1, chi = i;
		trim(s, &nlo, &nhi);
		trim(s, &clo, &chi);
		if (nhi == nlo)
			return 0;
		if (!((s[nlo] >= 'a' && s[nlo] <= 'z') || (s[nlo] >= 'A' && s[nlo] <= 'Z')))
			return 0;
		for (j = nlo; j < nhi; j++)
			if (!((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
			      (s[j] >= '0' && s[j] <= '9') || s[j] == '_'))
				return 0;
		if (model_near_miss(s + nlo, nhi - nlo))
			return 0;
		if (chi - clo == 1 && s[clo] == '*') {
			stars++;
		} else {
			long long v = 0;

			if (chi == clo || chi - clo > TFD_COUNT_DIGITS)
				return 0;
			for (j = clo; j < chi; j++) {
				if (s[j] < '0' || s[j] > '9')
					return 0;
				v = v * 10 + (s[j] - '0');
			}
			positive |= v > 0;
			if (v > 1 && ((nhi - nlo == 5 && !memcmp(s + nlo, "chief", 5)) ||
				      (nhi - nlo == 9 && !memcmp(s + nlo, "evaluator", 9))))
				return 0;
		}
		for (k = 0; k < e; k++)
			if (nl[k] == nhi - nlo && memcmp(s + ns[k], s + nlo, nl[k]) == 0)
				return 0;
		ns[e] = nlo;
		nl[e] = nhi - nlo;
		e++;
		start = i + 1;
	}
	return stars <= 1 && (stars || positive);
}

static size_t random_input(char *buf, size_t cap)
{
	static const char *pieces[] = {
		"worker", "ps", "chief", "evaluator", ":", ",", "*", "1", "3", "0", "10",
		"999999", "123456789012345678", "1234567890123456789", "_", "a", "Z", " ",
		"\n", "\t", ";", "=",
		"\xc3\xa9", "\xff", "\x01", "-", "::", ",,", "j1", "j2",
	};
	static const char *names[] = { "worker", "ps", "chief", "evaluator", "J1", "a_2",
				       " ps", "ps\t", "Worker", "wokrer", "workers", "PS", "p",
				       "chef", "evaluater", "psx", "wrkr", "Chief_", "sp" };
	static const char *counts[] = { "*", "1", "2", "17", "123456789012345678", "0",
					"01", " 3", "* ", "1234567890123456789" };
	size_t n = 0, target;
	int mode = (int) (rng() % 6);

	if (mode >= 4) {
		/* a spec built from the grammar, then (mode 5) one byte mutated */
		size_t entries = 1 + rng() % 4, e;

		for (e = 0; e < entries; e++) {
			const char *nm = names[rng() % (sizeof(names) / sizeof(names[0]))];
			const char *ct = counts[rng() % (sizeof(counts) / sizeof(counts[0]))];

			n += (size_t) snprintf(buf + n, cap - n, "%s%s:%s", e ? "," : "", nm, ct);
		}
		if (mode == 5 && n > 0) {
			size_t at = rng() % n;

			switch (rng() % 3) {
			case 0: /* replace */
				buf[at] = (char) (1 + rng() % 255);
				break;
			case 1: /* delete */
				memmove(buf + at, buf + at + 1, n - at - 1);
				n--;
				break;
			default: /* insert */
				memmove(buf + at + 1, buf + at, n - at);
				buf[at] = pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))][0];
				n++;
			}
		}
		return n;
	}

	if (mode == 0) {
		/* raw bytes 1..255, any length up to cap */
		target = rng() % cap;
		while (n < target)
			buf[n++] = (char) (1 + rng() % 255);
		return n;
	}
	/* grammar-shaped pieces, sometimes very long */
	target = mode == 3 ? rng() % cap : rng() % 64;
	while (n < target) {
		const char *p = pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))];
		size_t l = strlen(p);

		if (n + l > target)
			break;
		memcpy(buf + n, p, l);
		n += l;
	}
	return n;
}

/* Random --node output: lines from the protocol and near misses, some bytes flipped. */
static size_t random_node_output(char *buf, size_t cap)
{
	static const char *const pieces[] = {
		TFD_NODE_HEADER "\n", "task 0 0\n", "task 1 2\n", "task 2 255\n", "task 1 0\n",
		"task 0\n", "task 99999999999 0\n", "input A=1\n", "input B=\n", "input =x\n",
		"input C\n", "input SLURM_TASK_PID=3\n", "export A=2\n", "unset B\n", "print hi\n",
		"end\n", "end", "garbage\n", "\n", "task ", "input ",
	};
	size_t n = 0, count = rng() % 12, i;

	for (i = 0; i < count; i++) {
		const char *p = pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))];
		size_t len = strlen(p);

		if (n + len >= cap)
			break;
		memcpy(buf + n, p, len);
		n += len;
	}
	if (n && rng() % 4 == 0)
		buf[rng() % n] = (char) (rng() % 256);
	buf[n] = '\0';
	return n;
}

static void fuzz_node(void)
{
	char scratch[512];
	size_t n = random_node_output(scratch, sizeof(scratch));
	char *input = exact_copy(scratch, n);
	char *env[] = { "A=1", "B=", "SLURM_TASK_PID=4", NULL };
	static const char base[] = "A=1\0B=\0";
	unsigned long id;

	for (id = 0; id < 3; id++) {
		struct tfd_node_block block;
		char why[64];

		if (tfd_node_find(input, n, id, &block) != 0)
			continue;
		if (block.preamble + block.preamble_len > input + n ||
		    block.lines + block.lines_len > input + n || block.status < 0 || block.status > 255) {
			printf("FAIL node block outside its output\n");
			failures++;
		}
		(void) tfd_node_env_matches(env, base, sizeof(base) - 1, &block, why, sizeof(why));
	}
	{
		char msg[256];

		if (tfd_version_check("0.2.0", "/h", input, n, msg, sizeof(msg)) != 0 &&
		    !printable_line(msg)) {
			printf("FAIL version message not one printable line\n");
			failures++;
		}
	}
	free(input);
}

static int fuzz(long iterations, uint64_t seed)
{
	char *scratch = malloc(3 * TFD_SPEC_MAX);
	long it, accepted = 0;

	rng_state = seed ? seed : 0x9e3779b97f4a7c15ULL;
	for (it = 0; it < iterations; it++) {
		size_t n = random_input(scratch, 3 * TFD_SPEC_MAX - 1);
		char *input = exact_copy(scratch, n);
		char err[200];
		int rc = tfd_spec_check(input, err, sizeof(err));
		int want = model_valid(input, n);

		if ((rc == 0) != want || (rc != 0 && !printable_line(err))) {
			char shown[128];

			tfd_quote(input, 60, shown, sizeof(shown));
			printf("FAIL fuzz #%ld '%s': parser says %s (%s), model says %s\n", it,
			       shown, rc == 0 ? "valid" : "invalid", err, want ? "valid" : "invalid");
			failures++;
		}
		accepted += rc == 0;
		{
			/* the same bytes as hook output: must never crash or overrun */
			struct fake_env fe = { .n = 0, .fail_set = 0 };
			struct tfd_hook_ops ops = { fake_set, fake_unset, fake_print, &fe, NULL };
			char herr[128];

			fe.log[0] = '\0';
			(void) tfd_hook_apply(input, n, &ops, herr, sizeof(herr));
		}
		free(input);
		fuzz_node();
		if (failures > 10)
			break;
	}
	free(scratch);
	printf("spec_test fuzz: %ld inputs, %ld valid, %d disagreement(s)\n", it, accepted,
	       failures);
	return failures ? 1 : 0;
}

/* ---------------------------------------------------------------- check mode */

enum check_what { CHECK_SPEC, CHECK_TEMPLATE, CHECK_MESSAGE };

static int check_stdin(enum check_what what)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap), *grown;
	int c;

	if (!buf)
		return 2;
	/* every spec ends with a NUL byte (so an empty spec is one NUL) */
	while ((c = getchar()) != EOF) {
		if (c == '\0') {
			char *input = exact_copy(buf, n);
			char err[256], line[1024];

			if ((what == CHECK_TEMPLATE ? tfd_host_template_check(input, err, sizeof(err))
						    : tfd_spec_check(input, err, sizeof(err))) == 0) {
				printf("OK\n");
			} else if (what == CHECK_MESSAGE) {
				tfd_spec_error(input, err, line, sizeof(line));
				printf("ERR %s\n", line);
			} else {
				printf("ERR %s\n", err);
			}
			free(input);
			n = 0;
			continue;
		}
		if (n + 1 >= cap) {
			cap *= 2;
			grown = realloc(buf, cap);
			if (!grown) {
				free(buf);
				return 2;
			}
			buf = grown;
		}
		buf[n++] = (char) c;
	}
	free(buf);
	return n == 0 ? 0 : 2; /* trailing bytes without a NUL: malformed input */
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "unit") == 0)
		return unit();
	if (argc >= 3 && strcmp(argv[1], "fuzz") == 0)
		return fuzz(atol(argv[2]), argc >= 4 ? strtoull(argv[3], NULL, 0) : 0);
	if (argc == 2 && strcmp(argv[1], "check") == 0)
		return check_stdin(CHECK_SPEC);
	if (argc == 2 && strcmp(argv[1], "check-template") == 0)
		return check_stdin(CHECK_TEMPLATE);
	if (argc == 2 && strcmp(argv[1], "check-message") == 0)
		return check_stdin(CHECK_MESSAGE);
	fprintf(stderr, "usage: %s unit | fuzz N [SEED] | check[-message] < NUL-terminated specs | "
		"check-template < NUL-terminated host templates\n", argv[0]);
	return 2;
}
