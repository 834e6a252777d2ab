// SPDX-License-Identifier: GPL-2.0
/*
 * kmsg-timed TAG COUNT [SIZE]: write COUNT records "npng TAG <i>" to
 * /dev/kmsg, each padded with '.' to SIZE bytes (default: no padding),
 * one write(2) per record, so that each becomes one printk and one
 * netconsole message.  Each write is timed on CLOCK_MONOTONIC: the
 * guest's cost of one message, console output included, on any kernel.
 *
 * Prints the same first line as nc-burst (uptime in seconds at the start
 * and at the end), then the 101 percentiles (0, 1, ..., 100) of the
 * per-write times in microseconds:
 *
 *   burst TAG COUNT T0 T1
 *   us P0 P1 ... P100
 *
 * Exit status 1 on bad arguments, 2 when a write fails (the records
 * written before are reported).
 *
 * Built static for i386 by matrix/rootfs.sh (gcc -m32 -static).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_COUNT	100000
#define MAX_SIZE	1000	/* below printk's record limit of 1024 */

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static double uptime_s(void)
{
	double up = 0;
	FILE *f = fopen("/proc/uptime", "r");

	if (f) {
		if (fscanf(f, "%lf", &up) != 1)
			up = 0;
		fclose(f);
	}
	return up;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void print_percentiles(double *us, int n)
{
	int p;

	qsort(us, n, sizeof(*us), cmp_double);
	printf("us");
	for (p = 0; p <= 100; p++)
		printf(" %.1f", n ? us[(long)p * (n - 1) / 100] : 0.0);
	printf("\n");
}

static int parse(const char *s, int max, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < 0 || v > max)
		return -1;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	char rec[MAX_SIZE + 2];
	int count, size = 0, fd, i, len, ret = 0;
	double t0, t1, *us;

	if (argc < 3 || argc > 4 || parse(argv[2], MAX_COUNT, &count) ||
	    (argc == 4 && parse(argv[3], MAX_SIZE, &size)) ||
	    strlen(argv[1]) > 64) {
		fprintf(stderr, "usage: kmsg-timed TAG COUNT [SIZE]  (COUNT <= %d, SIZE <= %d, TAG <= 64 chars)\n",
			MAX_COUNT, MAX_SIZE);
		return 1;
	}
	us = calloc(count ? count : 1, sizeof(*us));
	fd = open("/dev/kmsg", O_WRONLY);
	if (!us || fd < 0) {
		fprintf(stderr, "kmsg-timed: /dev/kmsg: %s\n", strerror(errno));
		return 2;
	}
	t0 = uptime_s();
	for (i = 0; i < count; i++) {
		double w;

		len = snprintf(rec, sizeof(rec), "npng %s %d ", argv[1], i + 1);
		while (len < size)
			rec[len++] = '.';
		rec[len++] = '\n';
		w = now_us();
		if (write(fd, rec, len) != len) {
			fprintf(stderr, "kmsg-timed: write %d: %s\n", i + 1,
				strerror(errno));
			ret = 2;
			break;
		}
		us[i] = now_us() - w;
	}
	t1 = uptime_s();
	printf("burst %s %d %.2f %.2f\n", argv[1], i, t0, t1);
	print_percentiles(us, i);
	close(fd);
	free(us);
	return ret;
}
