// SPDX-License-Identifier: GPL-2.0-only
/*
 * kgdboe-bridge: gdb's remote protocol on stdio, kgdboe's authenticated
 * and reliable UDP protocol on the network.
 *
 *	(gdb) target remote | kgdboe-bridge --key-file K 192.0.2.2:6443
 *
 * Every datagram is sealed as netpoll's authenticated datagrams are
 * (include/linux/netpoll.h): magic "NPA1", version, type, flags, nonce,
 * seq, ack, payload, HMAC-SHA256 tag.  The session starts with HELLO
 * (our random nonce) and the target's WELCOME (our nonce, and the
 * session nonce that every later datagram carries).  Payload datagrams
 * are numbered from 1 in each direction and acknowledged cumulatively;
 * one is in flight at a time and is sent again until acknowledged, so
 * gdb sees an in-order byte stream whatever the network loses,
 * duplicates or reorders.  An empty DATA every --keepalive-ms lets the
 * target send again what we did not acknowledge.
 *
 * On exit it prints its counters on stderr.  --self-test checks the
 * HMAC against RFC 4231 and exits.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sha256.h"

#define MAGIC		0x4e504131u	/* "NPA1" */
#define VERSION		1
#define HDR_LEN		24
#define OVERHEAD	(HDR_LEN + SHA256_LEN)
#define MAX_PAYLOAD	1024		/* the target's rx ring takes 8 KiB */
#define MAX_DGRAM	1600
#define PENDING_MAX	65536

enum { HELLO = 1, WELCOME = 2, DATA = 3, REPLY = 4 };

struct msg {
	uint8_t type;
	uint64_t nonce;
	uint32_t seq, ack;
	const uint8_t *data;
	size_t len;
};

static struct {
	unsigned long sent, resent, received, dups, gaps, refused, stale;
	unsigned long to_gdb, from_gdb;
} cnt;

static struct hmac_sha256 key;
static int verbose;
/* gdb ends its pipe child with SIGTERM: the counters still get printed */
static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* Ctrl-C is gdb's to turn into an interrupt packet */
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
}

static void vlog(const char *fmt, ...)
{
	va_list ap;

	if (!verbose)
		return;
	va_start(ap, fmt);
	fputs("kgdboe-bridge: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
	while (n--) {
		p[n] = (uint8_t)v;
		v >>= 8;
	}
}

static uint64_t get_be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | *p++;
	return v;
}

static size_t seal(uint8_t *buf, const struct msg *m)
{
	put_be(buf, MAGIC, 4);
	buf[4] = VERSION;
	buf[5] = m->type;
	put_be(buf + 6, 0, 2);
	put_be(buf + 8, m->nonce, 8);
	put_be(buf + 16, m->seq, 4);
	put_be(buf + 20, m->ack, 4);
	memcpy(buf + HDR_LEN, m->data, m->len);
	hmac_sha256(&key, buf, HDR_LEN + m->len, buf + HDR_LEN + m->len);
	return OVERHEAD + m->len;
}

/* 0: a datagram with a valid tag, -1: anything else */
static int open_msg(const uint8_t *buf, size_t len, struct msg *m)
{
	uint8_t tag[SHA256_LEN];

	if (len < OVERHEAD || get_be(buf, 4) != MAGIC || buf[4] != VERSION ||
	    get_be(buf + 6, 2))
		return -1;
	hmac_sha256(&key, buf, len - SHA256_LEN, tag);
	if (tag_differs(tag, buf + len - SHA256_LEN, SHA256_LEN))
		return -1;
	m->type = buf[5];
	m->nonce = get_be(buf + 8, 8);
	m->seq = (uint32_t)get_be(buf + 16, 4);
	m->ack = (uint32_t)get_be(buf + 20, 4);
	m->data = buf + HDR_LEN;
	m->len = len - OVERHEAD;
	return 0;
}

static int send_msg(int fd, const struct msg *m)
{
	uint8_t buf[MAX_DGRAM];
	size_t n = seal(buf, m);

	cnt.sent++;
	if (send(fd, buf, n, 0) < 0 && errno != ECONNREFUSED) {
		perror("kgdboe-bridge: send");
		return -1;
	}
	return 0;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* the key file holds the key in hex, as kgdboe's key parameter takes it */
static int read_key(const char *path)
{
	uint8_t k[256];
	size_t n = 0;
	int c, hi = -1;
	FILE *f = fopen(path, "r");

	if (!f) {
		fprintf(stderr, "kgdboe-bridge: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((c = fgetc(f)) != EOF) {
		if (c == ' ' || c == '\n' || c == '\t' || c == '\r')
			continue;
		if (hexval(c) < 0 || n == sizeof(k)) {
			fprintf(stderr, "kgdboe-bridge: %s: want at most %zu bytes in hex\n",
				path, sizeof(k));
			fclose(f);
			return -1;
		}
		if (hi < 0) {
			hi = hexval(c);
		} else {
			k[n++] = (uint8_t)(hi << 4 | hexval(c));
			hi = -1;
		}
	}
	fclose(f);
	if (hi >= 0 || n < 16) {
		fprintf(stderr, "kgdboe-bridge: %s: want an even number of hex digits, 16 bytes at least\n",
			path);
		return -1;
	}
	hmac_sha256_key(&key, k, n);
	memset(k, 0, sizeof(k));
	return 0;
}

static int connect_udp(const char *target)
{
	char host[256];
	const char *colon = strrchr(target, ':');
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_DGRAM };
	struct addrinfo *ai;
	int fd, err;

	if (!colon || colon == target || (size_t)(colon - target) >= sizeof(host)) {
		fprintf(stderr, "kgdboe-bridge: want HOST:PORT, not '%s'\n", target);
		return -1;
	}
	memcpy(host, target, colon - target);
	host[colon - target] = '\0';
	err = getaddrinfo(host, colon + 1, &hints, &ai);
	if (err) {
		fprintf(stderr, "kgdboe-bridge: %s: %s\n", target, gai_strerror(err));
		return -1;
	}
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		perror("kgdboe-bridge: socket");
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	return fd;
}

static int wait_readable(int fd, double until)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	double left = until - now();

	if (left <= 0)
		return 0;
	return poll(&p, 1, (int)(left * 1000) + 1) > 0;
}

/* HELLO until a WELCOME that answers our nonce; the session nonce */
static int handshake(int fd, double rto, double limit, uint64_t *session)
{
	uint8_t buf[MAX_DGRAM];
	uint64_t nonce;
	double end = now() + limit, next = 0;
	struct msg m;
	ssize_t n;

	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce)) {
		perror("kgdboe-bridge: getrandom");
		return -1;
	}
	while (now() < end && !stopping) {
		if (now() >= next) {
			struct msg hello = { .type = HELLO, .nonce = nonce };

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
		if (open_msg(buf, n, &m)) {
			cnt.refused++;
			continue;
		}
		if (m.type != WELCOME || m.nonce != nonce || m.len != 8) {
			cnt.stale++;
			continue;
		}
		*session = get_be(m.data, 8);
		vlog("session %016llx\n", (unsigned long long)*session);
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
	int gdb_eof;
};

static int send_data(struct session *s, const uint8_t *data, size_t len)
{
	struct msg m = { .type = DATA, .nonce = s->nonce, .seq = s->tx_seq,
			 .ack = s->rx_next - 1, .data = data, .len = len };

	s->last_send = now();
	return send_msg(s->fd, &m);
}

/* the next chunk from gdb goes out when nothing is in flight */
static int send_next(struct session *s)
{
	size_t n = s->pending_len < MAX_PAYLOAD ? s->pending_len : MAX_PAYLOAD;

	if (s->tx_acked != s->tx_seq || !n)
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
	struct msg m;

	if (n < 0)
		return 0;
	cnt.received++;
	if (open_msg(buf, n, &m)) {
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
	} else if (m.seq < s->rx_next) {
		cnt.dups++;
	} else {
		cnt.gaps++;
	}
	/* acknowledge every payload datagram, copies included */
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
	if (t >= s->last_send + keepalive)
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
		if (poll(p, nfds, (int)(rto * 250)) < 0 && errno != EINTR)
			return -1;
		if ((p[0].revents & POLLIN) && from_target(s))
			return -1;
		if (nfds == 2 && (p[1].revents & (POLLIN | POLLHUP)) &&
		    from_gdb(s))
			return -1;
	}
}

struct vector {
	const char *name;
	const char *key;	/* hex, or a repeated byte */
	size_t key_len;
	int key_byte;
	const char *data;
	const char *tag;
};

static void unhex(const char *h, uint8_t *out)
{
	for (; *h; h += 2)
		*out++ = (uint8_t)(hexval(h[0]) << 4 | hexval(h[1]));
}

/* RFC 4231 test cases 1, 2, 6 and 7; prints KTAP */
static int self_test(void)
{
	static const struct vector v[] = {
		{ "rfc4231_1", NULL, 20, 0x0b, "Hi There",
		  "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7" },
		{ "rfc4231_2", "4a656665", 4, 0, "what do ya want for nothing?",
		  "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843" },
		{ "rfc4231_6", NULL, 131, 0xaa,
		  "Test Using Larger Than Block-Size Key - Hash Key First",
		  "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54" },
		{ "rfc4231_7", NULL, 131, 0xaa,
		  "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.",
		  "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2" },
	};
	int i, failed = 0, n = sizeof(v) / sizeof(v[0]);

	printf("TAP version 13\n1..%d\n", n);
	for (i = 0; i < n; i++) {
		uint8_t k[256], want[SHA256_LEN], got[SHA256_LEN];

		if (v[i].key)
			unhex(v[i].key, k);
		else
			memset(k, v[i].key_byte, v[i].key_len);
		unhex(v[i].tag, want);
		hmac_sha256_key(&key, k, v[i].key_len);
		hmac_sha256(&key, v[i].data, strlen(v[i].data), got);
		if (memcmp(got, want, sizeof(got)))
			failed++;
		printf("%sok %d %s\n", memcmp(got, want, sizeof(got)) ? "not " : "",
		       i + 1, v[i].name);
	}
	return failed ? 1 : 0;
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

static void usage(void)
{
	fprintf(stderr,
		"usage: kgdboe-bridge --key-file FILE [--rto-ms N] [--keepalive-ms N]\n"
		"                     [--connect-s N] [--stats-file FILE] [-v] HOST:PORT\n"
		"       kgdboe-bridge --self-test\n"
		"In gdb: target remote | kgdboe-bridge --key-file FILE HOST:PORT\n");
}

int main(int argc, char **argv)
{
	static struct session s = { .rx_next = 1 };
	double rto = 0.1, keepalive = 0.5, connect_s = 20;
	const char *key_file = NULL, *target = NULL, *stats_file = NULL;
	int i, rc;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--self-test"))
			return self_test();
		else if (!strcmp(argv[i], "-v"))
			verbose = 1;
		else if (!strcmp(argv[i], "--key-file") && i + 1 < argc)
			key_file = argv[++i];
		else if (!strcmp(argv[i], "--rto-ms") && i + 1 < argc)
			rto = atof(argv[++i]) / 1000;
		else if (!strcmp(argv[i], "--keepalive-ms") && i + 1 < argc)
			keepalive = atof(argv[++i]) / 1000;
		else if (!strcmp(argv[i], "--connect-s") && i + 1 < argc)
			connect_s = atof(argv[++i]);
		else if (!strcmp(argv[i], "--stats-file") && i + 1 < argc)
			stats_file = argv[++i];
		else if (argv[i][0] != '-' && !target)
			target = argv[i];
		else {
			usage();
			return 2;
		}
	}
	if (!key_file || !target || rto <= 0 || keepalive <= 0) {
		usage();
		return 2;
	}
	if (read_key(key_file))
		return 2;
	catch_signals();
	s.fd = connect_udp(target);
	if (s.fd < 0 || handshake(s.fd, rto, connect_s, &s.nonce))
		return 1;
	s.last_send = now();
	rc = relay(&s, rto, keepalive);
	print_counters(stderr);
	if (stats_file) {
		FILE *f = fopen(stats_file, "w");

		if (f) {
			print_counters(f);
			fclose(f);
		}
	}
	return rc ? 1 : 0;
}
