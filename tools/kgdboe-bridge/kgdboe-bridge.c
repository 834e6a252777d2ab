// SPDX-License-Identifier: GPL-2.0-only
/*
 * kgdboe-bridge: gdb's remote protocol on stdio, kgdboe's authenticated
 * and reliable UDP protocol on the network.
 *
 *	(gdb) target remote | kgdboe-bridge --key-file K 192.0.2.2:6443
 *
 * Every datagram is sealed as netpoll's authenticated datagrams are
 * (include/linux/netpoll.h; here tools/common/npa1.c): magic "NPA1",
 * version, type, flags, nonce, seq, ack, payload, HMAC-SHA256 tag.  The
 * session starts with HELLO (our random nonce) and the target's WELCOME
 * (our nonce, and the session nonce that every later datagram carries).
 * Payload datagrams are numbered from 1 in each direction and
 * acknowledged cumulatively; one is in flight at a time and is sent
 * again until acknowledged, so gdb sees an in-order byte stream whatever
 * the network loses, duplicates or reorders.  An empty DATA every
 * --keepalive-ms lets the target send again what we did not acknowledge.
 *
 * gdb answers each reply with its "+", then sends its next packet.  Sent
 * apart, the two cost the target two round trips per packet, since one
 * datagram is in flight at a time.  So a reply is acknowledged with what
 * gdb sends next, and a lone "+" waits for the packet that follows it,
 * both for COALESCE_MS at most.
 *
 * On exit it prints its counters on stderr.  --self-test checks the
 * HMAC against RFC 4231 and exits.  --help lists the options, their
 * defaults and the exit status (cli_help below; man/kgdboe-bridge.1).
 */
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"
#include "npa1.h"

#ifndef TOOL_VERSION
#define TOOL_VERSION	"1.0"
#endif
#define PROG		"kgdboe-bridge"

#define MAX_PAYLOAD	1024		/* the target's rx ring takes 8 KiB */
#define MAX_DGRAM	1600
#define PENDING_MAX	65536

/* the options' defaults and largest values */
#define RTO_MS		100
#define KEEPALIVE_MS	500
#define CONNECT_S	20
#define MAX_MS		60000
#define MAX_S		86400
/* how long a lone "+", or the ack of a reply, waits for gdb's next bytes */
#define COALESCE_MS	1

#define STR(x)		#x
#define XSTR(x)		STR(x)

enum { HELLO = 1, WELCOME = 2, DATA = 3, REPLY = 4 };

static struct {
	unsigned long sent, resent, received, dups, gaps, refused, stale;
	unsigned long to_gdb, from_gdb;
} cnt;

static struct hmac_sha256 key;

static void catch_signals(void)
{
	/* gdb ends its pipe child with SIGTERM: the counters still get printed */
	stop_on(SIGTERM);
	stop_on(SIGHUP);
	/* Ctrl-C is gdb's to turn into an interrupt packet */
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
}

static int send_msg(int fd, const struct npa1_msg *m)
{
	uint8_t buf[MAX_DGRAM];
	size_t n = npa1_seal(&key, buf, m);

	cnt.sent++;
	if (send(fd, buf, n, 0) < 0 && errno != ECONNREFUSED) {
		perror("kgdboe-bridge: send");
		return -1;
	}
	return 0;
}

/* HELLO until a WELCOME that answers our nonce; the session nonce */
static int handshake(int fd, double rto, double limit, uint64_t *session)
{
	uint8_t buf[MAX_DGRAM];
	uint64_t nonce;
	double end = now() + limit, next = 0;
	struct npa1_msg m;
	ssize_t n;

	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce)) {
		perror("kgdboe-bridge: getrandom");
		return -1;
	}
	while (now() < end && !stopping) {
		if (now() >= next) {
			struct npa1_msg hello = { .type = HELLO, .nonce = nonce };

			if (send_msg(fd, &hello))
				return -1;
			next = now() + rto;
		}
		if (!wait_readable(fd, next < end ? next : end))
			continue;
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0)
			continue;
		cnt.received++;
		if (npa1_open(&key, buf, n, &m)) {
			cnt.refused++;
			continue;
		}
		if (m.type != WELCOME || m.nonce != nonce || m.len != 8) {
			cnt.stale++;
			continue;
		}
		*session = get_be(m.data, 8);
		vlog("kgdboe-bridge", "session %016llx\n", (unsigned long long)*session);
		return 0;
	}
	fprintf(stderr, "kgdboe-bridge: no WELCOME within %.0f s: is kgdboe keyed with this key, and the address right?\n",
		limit);
	return -1;
}

struct session {
	int fd;
	uint64_t nonce;
	uint32_t tx_seq, tx_acked, rx_next;
	uint8_t out[MAX_PAYLOAD];
	size_t out_len;
	double out_at, last_send;
	uint8_t pending[PENDING_MAX];
	size_t pending_len;
	double hold_until;	/* an ack owed, or a lone "+", waits till then */
	int ack_owed;
	int gdb_eof;
};

static int send_data(struct session *s, const uint8_t *data, size_t len)
{
	struct npa1_msg m = { .type = DATA, .nonce = s->nonce, .seq = s->tx_seq,
			 .ack = s->rx_next - 1, .data = data, .len = len };

	s->last_send = now();
	s->ack_owed = 0;
	return send_msg(s->fd, &m);
}

/* gdb's "+" alone, while its next packet may be on the way */
static int lone_ack(const struct session *s)
{
	return s->pending_len == 1 && s->pending[0] == '+' &&
	       now() < s->hold_until;
}

/* the next chunk from gdb goes out when nothing is in flight */
static int send_next(struct session *s)
{
	size_t n = s->pending_len < MAX_PAYLOAD ? s->pending_len : MAX_PAYLOAD;

	if (s->tx_acked != s->tx_seq || !n || lone_ack(s))
		return 0;
	memcpy(s->out, s->pending, n);
	memmove(s->pending, s->pending + n, s->pending_len - n);
	s->pending_len -= n;
	s->out_len = n;
	s->tx_seq++;
	s->out_at = now();
	return send_data(s, s->out, n);
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= w;
	}
	return 0;
}

static int from_target(struct session *s)
{
	uint8_t buf[MAX_DGRAM];
	ssize_t n = recv(s->fd, buf, sizeof(buf), 0);
	struct npa1_msg m;

	if (n < 0)
		return 0;
	cnt.received++;
	if (npa1_open(&key, buf, n, &m)) {
		cnt.refused++;
		return 0;
	}
	if (m.type != REPLY || m.nonce != s->nonce) {
		cnt.stale++;
		return 0;
	}
	if (m.ack == s->tx_seq)
		s->tx_acked = m.ack;
	if (!m.len)
		return 0;
	if (m.seq == s->rx_next) {
		if (write_all(1, m.data, m.len))
			return -1;
		cnt.to_gdb += m.len;
		s->rx_next++;
		/* acknowledged with gdb's answer, or alone after COALESCE_MS */
		s->ack_owed = 1;
		s->hold_until = now() + COALESCE_MS / 1000.0;
		return 0;
	}
	if (m.seq < s->rx_next)
		cnt.dups++;
	else
		cnt.gaps++;
	/* a copy: our ack was lost, acknowledge it at once */
	return send_data(s, NULL, 0);
}

static int from_gdb(struct session *s)
{
	ssize_t n = read(0, s->pending + s->pending_len,
			 PENDING_MAX - s->pending_len);

	if (n <= 0) {
		s->gdb_eof = 1;
		return 0;
	}
	if (!s->pending_len)
		s->hold_until = now() + COALESCE_MS / 1000.0;
	s->pending_len += n;
	cnt.from_gdb += n;
	return 0;
}

static int timers(struct session *s, double rto, double keepalive)
{
	double t = now();

	if (s->tx_acked != s->tx_seq && t >= s->out_at + rto) {
		cnt.resent++;
		s->out_at = t;
		return send_data(s, s->out, s->out_len);
	}
	if ((s->ack_owed && t >= s->hold_until) ||
	    t >= s->last_send + keepalive)
		return send_data(s, NULL, 0);
	return 0;
}

static int relay(struct session *s, double rto, double keepalive)
{
	double drain_until = 0;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = s->fd, .events = POLLIN },
			{ .fd = 0, .events = POLLIN },
		};
		int nfds = s->gdb_eof || s->pending_len == PENDING_MAX ? 1 : 2;

		if (stopping)
			return 0;
		if (send_next(s) || timers(s, rto, keepalive))
			return -1;
		if (s->gdb_eof) {
			/* gdb is gone: deliver what it wrote, 2 s at most */
			if (!drain_until)
				drain_until = now() + 2;
			if ((s->tx_acked == s->tx_seq && !s->pending_len) ||
			    now() > drain_until || stopping)
				return 0;
		}
		if (poll(p, nfds, s->ack_owed || lone_ack(s) ? COALESCE_MS :
			 (int)(rto * 250)) < 0 && errno != EINTR)
			return -1;
		if ((p[0].revents & POLLIN) && from_target(s))
			return -1;
		if (nfds == 2 && (p[1].revents & (POLLIN | POLLHUP)) &&
		    from_gdb(s))
			return -1;
	}
}

/*
 * gdb reads its pipe child's stderr only while the connection lasts:
 * --stats-file keeps the counters of the end of a session.
 */
static void print_counters(FILE *f)
{
	fprintf(f,
		"kgdboe-bridge: %lu datagrams sent (%lu retransmitted), %lu received (%lu duplicates, %lu out of order, %lu refused, %lu stale); %lu bytes from gdb, %lu to gdb\n",
		cnt.sent, cnt.resent, cnt.received, cnt.dups, cnt.gaps,
		cnt.refused, cnt.stale, cnt.from_gdb, cnt.to_gdb);
}

const char cli_prog[] = PROG;
const char cli_version[] = TOOL_VERSION;
const char cli_help[] =
	"Usage: " PROG " [OPTION]... --key-file FILE HOST:PORT\n"
	"  or:  " PROG " --self-test\n"
	"Relay gdb's remote protocol on stdin and stdout to kgdboe's\n"
	"authenticated mode at HOST:PORT (UDP).  In gdb:\n"
	"  target remote | " PROG " --key-file FILE HOST:PORT\n"
	"HOST is an IPv4 address or a name, an IPv6 address in brackets\n"
	"([fd00:2::2]:6443); PORT is 1 to 65535.\n"
	"\n"
	"Options (N may have a fraction):\n"
	"  --key-file FILE    the key in hex, as kgdboe's key parameter\n"
	"                     takes it (required, no default)\n"
	"  --rto-ms N         send an unacknowledged datagram again after\n"
	"                     N ms (default " XSTR(RTO_MS) "; 0 < N <= "
	XSTR(MAX_MS) ")\n"
	"  --keepalive-ms N   send an empty DATA after N ms without a send\n"
	"                     (default " XSTR(KEEPALIVE_MS) "; 0 < N <= "
	XSTR(MAX_MS) ")\n"
	"  --connect-s N      give up without a WELCOME after N s\n"
	"                     (default " XSTR(CONNECT_S) "; 0 < N <= "
	XSTR(MAX_S) ")\n"
	"  --stats-file FILE  also write the counters to FILE at the end\n"
	"                     (default: none, stderr only)\n"
	"  -v                 print the session nonce on stderr\n"
	"                     (default: off)\n"
	"  --self-test        check the HMAC against RFC 4231, then exit\n"
	"  -h, --help         print this help, then exit\n"
	"  --version          print the version, then exit\n"
	"\n"
	"Exit status:\n"
	"  0  the session ended: gdb closed the pipe, or sent SIGTERM or\n"
	"     SIGHUP (--self-test: every case passed)\n"
	"  1  no WELCOME within --connect-s, HOST:PORT not usable, or a\n"
	"     network error (--self-test: a case failed)\n"
	"  2  usage error (a bad option, value or operand), or a bad key\n"
	"     file\n";

struct opts {
	const char *key_file, *target, *stats_file;
	double rto, keepalive, connect_s;	/* in s */
};

/* milliseconds into v in seconds */
static int parse_ms(const char *opt, const char *arg, double *v)
{
	if (cli_parse_positive(opt, arg, MAX_MS, v))
		return -1;
	*v /= 1000;
	return 0;
}

static int takes_arg(const char *opt)
{
	static const char *const with_arg[] = {
		"--key-file", "--rto-ms", "--keepalive-ms", "--connect-s",
		"--stats-file",
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
	if (!strcmp(opt, "--rto-ms"))
		return parse_ms(opt, arg, &o->rto);
	if (!strcmp(opt, "--keepalive-ms"))
		return parse_ms(opt, arg, &o->keepalive);
	if (!strcmp(opt, "--connect-s"))
		return cli_parse_positive(opt, arg, MAX_S, &o->connect_s);
	if (!strcmp(opt, "--key-file"))
		o->key_file = arg;
	else
		o->stats_file = arg;
	return 0;
}

/* 0, or -1 after a usage error; --self-test, --help, --version exit */
static int parse_args(int argc, char **argv, struct opts *o)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		int err = 0;

		cli_help_or_version(a);
		if (!strcmp(a, "--self-test"))
			exit(npa1_self_test());
		else if (!strcmp(a, "-v"))
			verbose = 1;
		else if (a[0] != '-' && !o->target)
			o->target = a;
		else if (a[0] != '-')
			err = cli_usage_error("unexpected argument '%s'", a);
		else if (!takes_arg(a))
			err = cli_usage_error("unknown option '%s'", a);
		else if (++i == argc)
			err = cli_usage_error("option '%s' needs a value", a);
		else
			err = parse_option(o, a, argv[i]);
		if (err)
			return -1;
	}
	if (!o->key_file)
		return cli_usage_error("missing --key-file FILE");
	if (!o->target)
		return cli_usage_error("missing HOST:PORT");
	return cli_check_port(o->target);
}

int main(int argc, char **argv)
{
	static struct session s = { .rx_next = 1 };
	struct opts o = { .rto = RTO_MS / 1000.0,
			  .keepalive = KEEPALIVE_MS / 1000.0,
			  .connect_s = CONNECT_S };
	int rc;

	if (parse_args(argc, argv, &o))
		return 2;
	if (npa1_read_key(PROG, o.key_file, &key))
		return 2;
	catch_signals();
	s.fd = connect_udp(PROG, o.target);
	if (s.fd < 0 || handshake(s.fd, o.rto, o.connect_s, &s.nonce))
		return 1;
	s.last_send = now();
	rc = relay(&s, o.rto, o.keepalive);
	print_counters(stderr);
	if (o.stats_file) {
		FILE *f = fopen(o.stats_file, "w");

		if (f) {
			print_counters(f);
			fclose(f);
		}
	}
	return rc ? 1 : 0;
}
