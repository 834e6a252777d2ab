// SPDX-License-Identifier: GPL-2.0-only
/* The host tools' shared command-line helpers (cli.h). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "%s: ", cli_prog);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help'.\n", cli_prog);
	return -1;
}

void cli_help_or_version(const char *arg)
{
	if (!strcmp(arg, "-h") || !strcmp(arg, "--help"))
		fputs(cli_help, stdout);
	else if (!strcmp(arg, "--version"))
		printf("%s %s\n", cli_prog, cli_version);
	else
		return;
	exit(0);
}

int cli_parse_positive(const char *opt, const char *arg, double max,
		       double *v)
{
	char *end;

	errno = 0;
	*v = strtod(arg, &end);
	if (end == arg || *end)
		return cli_usage_error("bad value '%s' for %s: not a number",
				       arg, opt);
	if (errno == ERANGE)
		return cli_usage_error("bad value '%s' for %s: out of range",
				       arg, opt);
	if (!(*v > 0 && *v <= max))
		return cli_usage_error("bad value '%s' for %s: want more than 0, at most %g",
				       arg, opt, max);
	return 0;
}

int cli_check_port(const char *target)
{
	const char *port = strrchr(target, ':');
	char *end;
	long n;

	if (!port++)
		return 0;
	errno = 0;
	n = strtol(port, &end, 10);
	if (!isdigit((unsigned char)*port) || *end || errno || n < 1 ||
	    n > 65535)
		return cli_usage_error("bad value '%s' for HOST:PORT: want a port from 1 to 65535",
				       target);
	return 0;
}
