/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the host tools' command lines share: the usage error, --help and
 * --version, and checked numbers.  Each tool defines cli_prog, cli_help
 * (its --help text) and cli_version.
 */
#ifndef NPNG_CLI_H
#define NPNG_CLI_H

extern const char cli_prog[], cli_help[], cli_version[];

/* "<prog>: <message>" and "Try '<prog> --help'." on stderr; -1 */
int cli_usage_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
/* --help or -h and --version print to stdout and exit 0; else return */
void cli_help_or_version(const char *arg);
/* all of arg, a number in (0, max], into *v: 0, or -1 after the error */
int cli_parse_positive(const char *opt, const char *arg, double max,
		       double *v);
/*
 * PORT of HOST:PORT is 1 to 65535: 0, or -1 after the error; no colon
 * is left to the caller to report
 */
int cli_check_port(const char *target);

#endif
