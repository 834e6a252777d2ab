// SPDX-License-Identifier: GPL-2.0-only
/*
 * netsysrq: authenticated SysRq commands over UDP, to the kernel's
 * netsysrq client.
 *
 *	netsysrq --key-file K 192.0.2.2:6667 t
 *
 * Every datagram is an NPA1 datagram (include/linux/netpoll.h; here
 * tools/common/npa1.c), seq and ack 0, whose payload starts with the key
 * id (the first 4 bytes of HMAC-SHA256(key, "netsysrq key id")) and a
 * 64-bit counter.  Our QUERY carries a random challenge as its counter;
 * the target's STATUS echoes it, with the target's per-boot nonce and
 * the last command counter it accepted.  Our COMMAND carries that nonce,
 * a larger counter and the SysRq keys; the target's ACK carries one
 * result byte per key.  The target answers nothing forged, for another
 * key, another boot or an old counter; a copy of the command it accepted
 * last is not run again but acknowledged again.  So the QUERY, then the
 * COMMAND, is sent again every --rto-ms until answered, --timeout-s at
 * most.  --nonce skips the QUERY.
 *
 * It prints one line per key (run, not a SysRq key, refused by
 * kernel.sysrq), then "netsysrq: counter=N nonce=HEX acked_ms=T sends=N
 * status_ms=T" (status_ms "-" with --nonce).  --self-test checks the
 * HMAC against RFC 4231 and the datagrams against the vectors of the
 * kernel's KUnit test, and exits.  --help lists the options, their
 * defaults and the exit status (cli_help below; man/netsysrq.1).
 */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "cli.h"
#include "npa1.h"

#ifndef TOOL_VERSION
#define TOOL_VERSION	"1.0"
#endif
#define PROG		"netsysrq"
#define KEY_ID_LABEL	"netsysrq key id"
#define PREFIX_LEN	12		/* key id, counter */
#define MAX_KEYS	16
#define MAX_DGRAM	1600

/* the options' defaults and largest values */
#define RTO_MS		200
#define TIMEOUT_S	10
#define MAX_MS		60000
#define MAX_S		86400

#define STR(x)		#x
#define XSTR(x)		STR(x)

enum { QUERY = 1, STATUS = 2, COMMAND = 3, ACK = 4 };
enum { RUN = 0, HELP = 1, REFUSED = 2 };	/* an ACK's result bytes */
enum { ANSWERED, TIMED_OUT, INTERRUPTED, SEND_FAILED };

struct sysrq_msg {
	uint8_t type;
	uint64_t nonce;
	uint32_t key_id;
	uint64_t counter;
	const uint8_t *rest;		/* what follows key id and counter */
	size_t rest_len;
};

/* the answer awaited */
struct want {
	uint8_t type;
	int any_nonce;			/* STATUS: its nonce is what we learn */
	uint64_t nonce;
	uint64_t counter;
	size_t rest_len;
};

struct tool {
	int fd;
	const char *target;
	struct hmac_sha256 key;
	uint32_t key_id;
	double rto, timeout;
	unsigned long refused, ignored;
};

/* one request sent until answered */
struct round {
	int sends;
	double ms;			/* first send to answer */
};

struct outcome {
	uint64_t nonce, counter;
	struct round status;		/* no sends: --nonce */
	struct round command;
};

struct opts {
	const char *key_file, *target, *keys, *stats_file;
	int self_test, have_nonce, have_counter;
	uint64_t nonce, counter;
	double rto, timeout;
};

static void catch_signals(void)
{
	stop_on(SIGINT);
	stop_on(SIGTERM);
}

static const char *type_name(uint8_t type)
{
	static const char *const names[] = {
		[QUERY] = "QUERY", [STATUS] = "STATUS",
		[COMMAND] = "COMMAND", [ACK] = "ACK",
	};

	return type < 5 && names[type] ? names[type] : "unknown type";
}

static uint32_t key_id_of(const struct hmac_sha256 *key)
{
	uint8_t tag[SHA256_LEN];

	hmac_sha256(key, KEY_ID_LABEL, strlen(KEY_ID_LABEL), tag);
	return (uint32_t)get_be(tag, 4);
}

/* buf holds MAX_DGRAM bytes; s->rest_len is MAX_KEYS at most */
static size_t seal_sysrq(const struct hmac_sha256 *key, uint8_t *buf,
			 const struct sysrq_msg *s)
{
	uint8_t payload[PREFIX_LEN + MAX_KEYS];
	struct npa1_msg m = { .type = s->type, .nonce = s->nonce,
			      .data = payload, .len = PREFIX_LEN + s->rest_len };

	put_be(payload, s->key_id, 4);
	put_be(payload + 4, s->counter, 8);
	if (s->rest_len)
		memcpy(payload + PREFIX_LEN, s->rest, s->rest_len);
	return npa1_seal(key, buf, &m);
}

static size_t build_query(const struct tool *t, uint8_t *buf,
			  uint64_t challenge)
{
	struct sysrq_msg q = { .type = QUERY, .key_id = t->key_id,
			       .counter = challenge };

	return seal_sysrq(&t->key, buf, &q);
}

static size_t build_command(const struct tool *t, uint8_t *buf,
			    uint64_t nonce, uint64_t counter, const char *keys)
{
	struct sysrq_msg c = { .type = COMMAND, .nonce = nonce,
			       .key_id = t->key_id, .counter = counter,
			       .rest = (const uint8_t *)keys,
			       .rest_len = strlen(keys) };

	return seal_sysrq(&t->key, buf, &c);
}

static struct want status_wanted(uint64_t challenge)
{
	struct want w = { .type = STATUS, .any_nonce = 1,
			  .counter = challenge, .rest_len = 8 };

	return w;
}

static struct want ack_wanted(uint64_t nonce, uint64_t counter, size_t nkeys)
{
	struct want w = { .type = ACK, .nonce = nonce, .counter = counter,
			  .rest_len = nkeys };

	return w;
}

static int answers(const struct sysrq_msg *m, const struct want *w,
		   uint32_t key_id)
{
	return m->type == w->type && m->key_id == key_id &&
	       (w->any_nonce || m->nonce == w->nonce) &&
	       m->counter == w->counter && m->rest_len == w->rest_len;
}

/* 0: buf is the answer w describes, in m (pointing into buf); -1: dropped */
static int take_reply(struct tool *t, const uint8_t *buf, size_t len,
		      const struct want *w, struct sysrq_msg *m)
{
	struct npa1_msg n;

	if (npa1_open(&t->key, buf, len, &n)) {
		t->refused++;
		vlog(PROG, "drop %zu bytes: not NPA1, or not sealed with our key\n",
		     len);
		return -1;
	}
	if (n.len < PREFIX_LEN) {
		t->ignored++;
		vlog(PROG, "drop %s: %zu-byte payload\n", type_name(n.type), n.len);
		return -1;
	}
	m->type = n.type;
	m->nonce = n.nonce;
	m->key_id = (uint32_t)get_be(n.data, 4);
	m->counter = get_be(n.data + 4, 8);
	m->rest = n.data + PREFIX_LEN;
	m->rest_len = n.len - PREFIX_LEN;
	if (!answers(m, w, t->key_id)) {
		t->ignored++;
		vlog(PROG, "drop %s nonce %016llx key id %08x counter %llu, %zu more bytes: not the %s awaited\n",
		     type_name(m->type), (unsigned long long)m->nonce,
		     m->key_id, (unsigned long long)m->counter, m->rest_len,
		     type_name(w->type));
		return -1;
	}
	return 0;
}

static int send_dgram(const struct tool *t, const uint8_t *buf, size_t len)
{
	/* nothing listening yet (ICMP port unreachable): send it again later */
	if (send(t->fd, buf, len, 0) < 0 && errno != ECONNREFUSED) {
		fprintf(stderr, PROG ": send: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/* out every rto until the answer w describes comes into in and m */
static int exchange(struct tool *t, const uint8_t *out, size_t out_len,
		    const struct want *w, uint8_t *in, struct sysrq_msg *m,
		    struct round *r)
{
	double start = now(), end = start + t->timeout, next = start;
	ssize_t n;

	r->sends = 0;
	while (!stopping && now() < end) {
		if (now() >= next) {
			if (send_dgram(t, out, out_len))
				return SEND_FAILED;
			r->sends++;
			vlog(PROG, "send %s #%d, %zu bytes\n", type_name(out[5]),
			     r->sends, out_len);
			next = now() + t->rto;
		}
		if (!wait_readable(t->fd, next < end ? next : end))
			continue;
		n = recv(t->fd, in, MAX_DGRAM, 0);
		if (n < 0)
			continue;
		if (!take_reply(t, in, n, w, m)) {
			r->ms = (now() - start) * 1000;
			return ANSWERED;
		}
	}
	return stopping ? INTERRUPTED : TIMED_OUT;
}

static int no_answer(const struct tool *t, int rc, const char *what)
{
	if (rc == INTERRUPTED)
		fprintf(stderr, PROG ": interrupted while waiting for the %s from %s\n",
			what, t->target);
	else if (rc == TIMED_OUT && !strcmp(what, "STATUS"))
		fprintf(stderr, PROG ": no STATUS from %s within %g s: is netsysrq keyed with this key, and the address right?\n",
			t->target, t->timeout);
	else if (rc == TIMED_OUT)
		fprintf(stderr, PROG ": no ACK from %s within %g s: is the nonce this boot's (did the target reboot?), the counter above the last one accepted, the key and the address right?\n",
			t->target, t->timeout);
	return 3;
}

/* QUERY until a STATUS echoes our challenge: the target's nonce, last counter */
static int query_status(struct tool *t, uint64_t *nonce, uint64_t *last,
			struct round *r)
{
	uint8_t out[MAX_DGRAM], in[MAX_DGRAM];
	uint64_t challenge;
	struct sysrq_msg m;
	struct want w;
	size_t len;
	int rc;

	if (getrandom(&challenge, sizeof(challenge), 0) != sizeof(challenge)) {
		fprintf(stderr, PROG ": getrandom: %s\n", strerror(errno));
		return 3;
	}
	len = build_query(t, out, challenge);
	w = status_wanted(challenge);
	vlog(PROG, "QUERY key id %08x challenge %016llx\n", t->key_id,
	     (unsigned long long)challenge);
	rc = exchange(t, out, len, &w, in, &m, r);
	if (rc != ANSWERED)
		return no_answer(t, rc, "STATUS");
	*nonce = m.nonce;
	*last = get_be(m.rest, 8);
	vlog(PROG, "STATUS nonce %016llx last counter %llu\n",
	     (unsigned long long)*nonce, (unsigned long long)*last);
	return 0;
}

/* the COMMAND until its ACK: one result byte per key into results */
static int send_command(struct tool *t, uint64_t nonce, uint64_t counter,
			const char *keys, uint8_t *results, struct round *r)
{
	uint8_t out[MAX_DGRAM], in[MAX_DGRAM];
	struct want w = ack_wanted(nonce, counter, strlen(keys));
	size_t len = build_command(t, out, nonce, counter, keys);
	struct sysrq_msg m;
	int rc;

	vlog(PROG, "COMMAND nonce %016llx counter %llu keys \"%s\"\n",
	     (unsigned long long)nonce, (unsigned long long)counter, keys);
	rc = exchange(t, out, len, &w, in, &m, r);
	if (rc != ANSWERED)
		return no_answer(t, rc, "ACK");
	memcpy(results, m.rest, m.rest_len);
	return 0;
}

static uint64_t realtime_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* above the last accepted; the clock keeps it above earlier runs' with --nonce */
static uint64_t next_counter(uint64_t last)
{
	uint64_t us = realtime_us();

	return us > last ? us : last + 1;
}

static const char *result_name(uint8_t result)
{
	switch (result) {
	case RUN:
		return "run";
	case HELP:
		return "not a SysRq key (help)";
	case REFUSED:
		return "refused by kernel.sysrq";
	}
	return NULL;
}

/* one line per key; 0 if every key was run or answered with the help */
static int print_results(const char *keys, const uint8_t *results)
{
	int rc = 0;
	size_t i;

	for (i = 0; keys[i]; i++) {
		const char *what = result_name(results[i]);

		if (what)
			printf("%c: %s\n", keys[i], what);
		else
			printf("%c: unknown result %u\n", keys[i], results[i]);
		if (results[i] != RUN && results[i] != HELP)
			rc = 1;
	}
	return rc;
}

static void print_summary(FILE *f, const struct outcome *o)
{
	char status_ms[32] = "-";

	if (o->status.sends)
		snprintf(status_ms, sizeof(status_ms), "%.3f", o->status.ms);
	fprintf(f, PROG ": counter=%llu nonce=%016llx acked_ms=%.3f sends=%d status_ms=%s\n",
		(unsigned long long)o->counter, (unsigned long long)o->nonce,
		o->command.ms, o->command.sends, status_ms);
}

static void write_stats(const char *path, const struct outcome *o,
			const struct tool *t)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		fprintf(stderr, PROG ": %s: %s\n", path, strerror(errno));
		return;
	}
	print_summary(f, o);
	fprintf(f, PROG ": refused=%lu ignored=%lu query_sends=%d\n",
		t->refused, t->ignored, o->status.sends);
	fclose(f);
}

/* self-test: key 00 01 .. 1f, the vectors of the kernel's KUnit test */
#define TEST_NONCE	0x0123456789abcdefull
#define TEST_COUNTER	42
#define TEST_KEY_ID	0xc04aee55u

static const char test_command[] =
	"4e504131010300000123456789abcdef0000000000000000c04aee55"
	"000000000000002a68f29364152323c916c8e4220302aabfcf38d8d2"
	"84d4bf26a95f0036cec0464dc1";
static const char test_ack[] =
	"4e504131010400000123456789abcdef0000000000000000c04aee55"
	"000000000000002a005ce366a97317887fc9026f081aed218d338288"
	"4282b7d3f6f26cb3b95ac091b5";

static int same_as(const uint8_t *buf, size_t len, const char *hex)
{
	uint8_t want[MAX_DGRAM];

	unhex(hex, want);
	return len == strlen(hex) / 2 && !memcmp(buf, want, len);
}

static int test_key_id(struct tool *t)
{
	return t->key_id == TEST_KEY_ID;
}

static int test_command_vector(struct tool *t)
{
	uint8_t buf[MAX_DGRAM];
	size_t len = build_command(t, buf, TEST_NONCE, TEST_COUNTER, "h");

	return len == 69 && same_as(buf, len, test_command);
}

static int test_ack_vector(struct tool *t)
{
	static const uint8_t run[] = { RUN };
	struct sysrq_msg a = { .type = ACK, .nonce = TEST_NONCE,
			       .key_id = t->key_id, .counter = TEST_COUNTER,
			       .rest = run, .rest_len = 1 };
	uint8_t buf[MAX_DGRAM];
	size_t len = seal_sysrq(&t->key, buf, &a);

	return len == 69 && same_as(buf, len, test_ack);
}

static int test_ack_taken(struct tool *t)
{
	struct want w = ack_wanted(TEST_NONCE, TEST_COUNTER, 1);
	uint8_t buf[MAX_DGRAM];
	struct sysrq_msg m;

	unhex(test_ack, buf);
	return !take_reply(t, buf, 69, &w, &m) && m.rest_len == 1 &&
	       m.rest[0] == RUN;
}

/* a valid ACK for another nonce, counter, key count, or a STATUS: ignored */
static int test_ack_mismatch_ignored(struct tool *t)
{
	const struct want w[] = {
		ack_wanted(TEST_NONCE + 1, TEST_COUNTER, 1),
		ack_wanted(TEST_NONCE, TEST_COUNTER + 1, 1),
		ack_wanted(TEST_NONCE, TEST_COUNTER, 2),
		status_wanted(TEST_COUNTER),
	};
	unsigned long ignored = t->ignored;
	uint8_t buf[MAX_DGRAM];
	struct sysrq_msg m;
	size_t i;

	unhex(test_ack, buf);
	for (i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		if (!take_reply(t, buf, 69, &w[i], &m))
			return 0;
	return t->ignored == ignored + i;
}

/* one bit flipped in the header, the payload or the tag: refused */
static int test_ack_bit_flip_refused(struct tool *t)
{
	static const int at[] = { 0, 4, 5, 9, 23, 24, 31, 36, 37, 68 };
	struct want w = ack_wanted(TEST_NONCE, TEST_COUNTER, 1);
	uint8_t buf[MAX_DGRAM];
	struct sysrq_msg m;
	int i, pass = 1;

	for (i = 0; i < (int)(sizeof(at) / sizeof(at[0])); i++) {
		unsigned long refused = t->refused;

		unhex(test_ack, buf);
		buf[at[i]] ^= 1 << (i % 8);
		if (!take_reply(t, buf, 69, &w, &m) || t->refused != refused + 1) {
			printf("# byte %d bit %d flipped: not refused\n",
			       at[i], i % 8);
			pass = 0;
		}
	}
	return pass;
}

/* a STATUS through the tool's path: nonce and last counter come out */
static int test_status_taken(struct tool *t)
{
	uint8_t last[8], buf[MAX_DGRAM];
	struct sysrq_msg s = { .type = STATUS, .nonce = TEST_NONCE,
			       .key_id = t->key_id, .counter = 7,
			       .rest = last, .rest_len = sizeof(last) };
	struct want w = status_wanted(7);
	struct sysrq_msg m;
	size_t len;

	put_be(last, TEST_COUNTER, 8);
	len = seal_sysrq(&t->key, buf, &s);
	return !take_reply(t, buf, len, &w, &m) && m.nonce == TEST_NONCE &&
	       get_be(m.rest, 8) == TEST_COUNTER;
}

static const struct {
	const char *name;
	int (*pass)(struct tool *t);
} tests[] = {
	{ "netsysrq_key_id", test_key_id },
	{ "netsysrq_command_vector", test_command_vector },
	{ "netsysrq_ack_vector", test_ack_vector },
	{ "netsysrq_ack_taken", test_ack_taken },
	{ "netsysrq_ack_mismatch_ignored", test_ack_mismatch_ignored },
	{ "netsysrq_ack_bit_flip_refused", test_ack_bit_flip_refused },
	{ "netsysrq_status_taken", test_status_taken },
};

#define NTESTS	((int)(sizeof(tests) / sizeof(tests[0])))

/* KTAP: RFC 4231, then the netsysrq vectors */
static int self_test(void)
{
	static struct tool t = { .fd = -1 };
	uint8_t k[32];
	int i, failed;

	for (i = 0; i < (int)sizeof(k); i++)
		k[i] = (uint8_t)i;
	hmac_sha256_key(&t.key, k, sizeof(k));
	t.key_id = key_id_of(&t.key);

	printf("TAP version 13\n1..%d\n", NPA1_RFC4231_TESTS + NTESTS);
	failed = npa1_rfc4231_test(1);
	for (i = 0; i < NTESTS; i++)
		failed += ktap_result(NPA1_RFC4231_TESTS + 1 + i,
				      tests[i].pass(&t), tests[i].name);
	return failed ? 1 : 0;
}

const char cli_prog[] = PROG;
const char cli_version[] = TOOL_VERSION;
const char cli_help[] =
	"Usage: " PROG " [OPTION]... --key-file FILE HOST:PORT KEYS\n"
	"  or:  " PROG " --self-test\n"
	"Send 1 to " XSTR(MAX_KEYS) " SysRq KEYS (e.g. t or sh) to the\n"
	"kernel's netsysrq client at HOST:PORT (UDP), authenticated with\n"
	"the key in FILE; print one line per key, then a summary line.\n"
	"HOST is an IPv4 address or a name, an IPv6 address in brackets\n"
	"([fd00:2::2]:6667); PORT is 1 to 65535.\n"
	"\n"
	"Options (N of --rto-ms and --timeout-s may have a fraction):\n"
	"  --key-file FILE    the key in hex, as netsysrq's key parameter\n"
	"                     takes it (required, no default)\n"
	"  --nonce HEX        the target's boot nonce, 64 bits: no QUERY\n"
	"                     (default: a QUERY asks the target for it)\n"
	"  --counter N        the command's counter, 1 to 2^64-1 (default:\n"
	"                     the real-time clock in microseconds, or the\n"
	"                     target's last counter + 1 if that is larger)\n"
	"  --rto-ms N         send again after N ms without an answer\n"
	"                     (default " XSTR(RTO_MS) "; 0 < N <= "
	XSTR(MAX_MS) ")\n"
	"  --timeout-s N      wait N s at most for the STATUS, and again\n"
	"                     for the ACK (default " XSTR(TIMEOUT_S)
	"; 0 < N <= " XSTR(MAX_S) ")\n"
	"  --stats-file FILE  also write the summary and counters to FILE\n"
	"                     (default: none)\n"
	"  -v                 print each datagram sent or dropped on stderr\n"
	"                     (default: off)\n"
	"  --self-test        check the HMAC against RFC 4231 and the\n"
	"                     datagrams against the kernel's KUnit vectors,\n"
	"                     then exit\n"
	"  -h, --help         print this help, then exit\n"
	"  --version          print the version, then exit\n"
	"\n"
	"Exit status:\n"
	"  0  every key run or answered with the help (--self-test: every\n"
	"     case passed)\n"
	"  1  some key refused by kernel.sysrq, or an unknown result\n"
	"     (--self-test: a case failed)\n"
	"  2  usage error (a bad option, value or operand), a bad key file,\n"
	"     or a HOST:PORT that does not resolve\n"
	"  3  no answer within --timeout-s, interrupted, or a send failed\n";

/* all of arg, a number in base: 0, or -1 after the error */
static int parse_u64(const char *opt, const char *arg, int base,
		     uint64_t *v)
{
	const char *what = base == 16 ? "hexadecimal" : "decimal";
	char *end;

	errno = 0;
	*v = strtoull(arg, &end, base);
	/* strtoull() would take a sign or spaces first: we do not */
	if (!isxdigit((unsigned char)*arg) || *end)
		return cli_usage_error("bad value '%s' for %s: not a %s number",
				       arg, opt, what);
	if (errno == ERANGE)
		return cli_usage_error("bad value '%s' for %s: out of range, 64 bits at most",
				       arg, opt);
	return 0;
}

static int valid_keys(const char *keys)
{
	size_t i, n = strlen(keys);

	if (n < 1 || n > MAX_KEYS)
		return 0;
	for (i = 0; i < n; i++)
		if (!isgraph((unsigned char)keys[i]))
			return 0;
	return 1;
}

static int takes_arg(const char *opt)
{
	static const char *const with_arg[] = {
		"--key-file", "--stats-file", "--nonce", "--counter",
		"--rto-ms", "--timeout-s",
	};
	size_t i;

	for (i = 0; i < sizeof(with_arg) / sizeof(with_arg[0]); i++)
		if (!strcmp(opt, with_arg[i]))
			return 1;
	return 0;
}

/* opt, one that takes_arg(): 0, or -1 after the error */
static int parse_option(struct opts *o, const char *opt, const char *arg)
{
	if (!strcmp(opt, "--key-file")) {
		o->key_file = arg;
		return 0;
	}
	if (!strcmp(opt, "--stats-file")) {
		o->stats_file = arg;
		return 0;
	}
	if (!strcmp(opt, "--nonce")) {
		o->have_nonce = 1;
		return parse_u64(opt, arg, 16, &o->nonce);
	}
	if (!strcmp(opt, "--counter")) {
		o->have_counter = 1;
		if (parse_u64(opt, arg, 10, &o->counter))
			return -1;
		if (!o->counter)
			return cli_usage_error("bad value '%s' for %s: want 1 at least",
					       arg, opt);
		return 0;
	}
	if (!strcmp(opt, "--rto-ms")) {
		if (cli_parse_positive(opt, arg, MAX_MS, &o->rto))
			return -1;
		o->rto /= 1000;
		return 0;
	}
	return cli_parse_positive(opt, arg, MAX_S, &o->timeout);
}

/* HOST:PORT, then KEYS: 0, or -1 after the error */
static int operand(struct opts *o, const char *arg)
{
	if (!o->target)
		o->target = arg;
	else if (!o->keys)
		o->keys = arg;
	else
		return cli_usage_error("unexpected argument '%s'", arg);
	return 0;
}

/* what a command needs: 0, or -1 after the error */
static int check_args(const struct opts *o)
{
	if (!o->key_file)
		return cli_usage_error("missing --key-file FILE");
	if (!o->target)
		return cli_usage_error("missing HOST:PORT");
	if (!o->keys)
		return cli_usage_error("missing KEYS");
	if (!valid_keys(o->keys))
		return cli_usage_error("bad value '%s' for KEYS: want 1 to %d SysRq keys, printable, no spaces",
				       o->keys, MAX_KEYS);
	return cli_check_port(o->target);
}

/* 0, or -1 after a usage error; --help and --version exit */
static int parse_args(int argc, char **argv, struct opts *o)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		int err = 0;

		cli_help_or_version(a);
		if (!strcmp(a, "--self-test"))
			o->self_test = 1;
		else if (!strcmp(a, "-v"))
			verbose = 1;
		else if (a[0] != '-')
			err = operand(o, a);
		else if (!takes_arg(a))
			err = cli_usage_error("unknown option '%s'", a);
		else if (++i == argc)
			err = cli_usage_error("option '%s' needs a value", a);
		else
			err = parse_option(o, a, argv[i]);
		if (err)
			return -1;
	}
	return o->self_test ? 0 : check_args(o);
}

int main(int argc, char **argv)
{
	static struct tool t;
	struct opts o = { .rto = RTO_MS / 1000.0, .timeout = TIMEOUT_S };
	struct outcome out = { 0 };
	uint8_t results[MAX_KEYS];
	uint64_t last = 0;
	int rc;

	if (parse_args(argc, argv, &o))
		return 2;
	if (o.self_test)
		return self_test();
	if (npa1_read_key(PROG, o.key_file, &t.key))
		return 2;
	t.key_id = key_id_of(&t.key);
	t.target = o.target;
	t.rto = o.rto;
	t.timeout = o.timeout;
	catch_signals();
	t.fd = connect_udp(PROG, o.target);
	if (t.fd < 0)
		return 2;

	out.nonce = o.nonce;
	if (!o.have_nonce) {
		rc = query_status(&t, &out.nonce, &last, &out.status);
		if (rc)
			return rc;
	}
	out.counter = o.have_counter ? o.counter : next_counter(last);
	if (out.counter <= last)
		fprintf(stderr, PROG ": counter %llu is not above the target's last, %llu: only a copy of that command is answered\n",
			(unsigned long long)out.counter,
			(unsigned long long)last);
	rc = send_command(&t, out.nonce, out.counter, o.keys, results,
			  &out.command);
	if (rc)
		return rc;

	rc = print_results(o.keys, results);
	print_summary(stdout, &out);
	if (o.stats_file)
		write_stats(o.stats_file, &out, &t);
	vlog(PROG, "%lu datagrams refused, %lu ignored\n", t.refused, t.ignored);
	return rc;
}
