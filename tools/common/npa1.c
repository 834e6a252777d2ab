// SPDX-License-Identifier: GPL-2.0-only
/*
 * NPA1 datagrams on the host side, shared by kgdboe-bridge and netsysrq:
 * sealing and opening, the key file, the UDP socket, the clock, and the
 * RFC 4231 self-test of the HMAC.  libc only.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "npa1.h"

void put_be(uint8_t *p, uint64_t v, int n)
{
	while (n--) {
		p[n] = (uint8_t)v;
		v >>= 8;
	}
}

uint64_t get_be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | *p++;
	return v;
}

/* buf holds NPA1_OVERHEAD + m->len bytes; returns the datagram's length */
size_t npa1_seal(const struct hmac_sha256 *key, uint8_t *buf,
		 const struct npa1_msg *m)
{
	put_be(buf, NPA1_MAGIC, 4);
	buf[4] = NPA1_VERSION;
	buf[5] = m->type;
	put_be(buf + 6, 0, 2);
	put_be(buf + 8, m->nonce, 8);
	put_be(buf + 16, m->seq, 4);
	put_be(buf + 20, m->ack, 4);
	if (m->len)
		memcpy(buf + NPA1_HDR_LEN, m->data, m->len);
	hmac_sha256(key, buf, NPA1_HDR_LEN + m->len, buf + NPA1_HDR_LEN + m->len);
	return NPA1_OVERHEAD + m->len;
}

/* 0: a datagram with a valid tag (m->data points into buf), -1: anything else */
int npa1_open(const struct hmac_sha256 *key, const uint8_t *buf, size_t len,
	      struct npa1_msg *m)
{
	uint8_t tag[SHA256_LEN];

	if (len < NPA1_OVERHEAD || get_be(buf, 4) != NPA1_MAGIC ||
	    buf[4] != NPA1_VERSION || get_be(buf + 6, 2))
		return -1;
	hmac_sha256(key, buf, len - SHA256_LEN, tag);
	if (tag_differs(tag, buf + len - SHA256_LEN, SHA256_LEN))
		return -1;
	m->type = buf[5];
	m->nonce = get_be(buf + 8, 8);
	m->seq = (uint32_t)get_be(buf + 16, 4);
	m->ack = (uint32_t)get_be(buf + 20, 4);
	m->data = buf + NPA1_HDR_LEN;
	m->len = len - NPA1_OVERHEAD;
	return 0;
}

int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* h: an even number of hex digits, trusted (test vectors) */
void unhex(const char *h, uint8_t *out)
{
	for (; *h; h += 2)
		*out++ = (uint8_t)(hexval(h[0]) << 4 | hexval(h[1]));
}

/* the key file holds the key in hex, as the kernel's key parameters take it */
int npa1_read_key(const char *prog, const char *path, struct hmac_sha256 *key)
{
	uint8_t k[256];
	size_t n = 0;
	int c, hi = -1;
	FILE *f = fopen(path, "r");

	if (!f) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		return -1;
	}
	while ((c = fgetc(f)) != EOF) {
		if (c == ' ' || c == '\n' || c == '\t' || c == '\r')
			continue;
		if (hexval(c) < 0 || n == sizeof(k)) {
			fprintf(stderr, "%s: %s: want at most %zu bytes in hex\n",
				prog, path, sizeof(k));
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
		fprintf(stderr, "%s: %s: want an even number of hex digits, 16 bytes at least\n",
			prog, path);
		return -1;
	}
	hmac_sha256_key(key, k, n);
	memset(k, 0, sizeof(k));
	return 0;
}

/*
 * Split HOST:PORT, or [IPV6-ADDRESS]:PORT, into host and port; 0 or -1.
 * host must hold 256 bytes.
 */
static int split_target(const char *target, char *host, const char **port)
{
	const char *colon = strrchr(target, ':');
	const char *start = target, *end = colon;

	if (!colon || colon == target)
		return -1;
	if (target[0] == '[') {
		start = target + 1;
		end = colon - 1;
		if (end < start || *end != ']')
			return -1;
	} else if (memchr(target, ':', colon - target)) {
		return -1;	/* an IPv6 address wants brackets */
	}
	if (end == start || end - start >= 256)
		return -1;
	memcpy(host, start, end - start);
	host[end - start] = '\0';
	*port = colon + 1;
	return 0;
}

/* a UDP socket connected to HOST:PORT or [IPV6]:PORT, or -1 */
int connect_udp(const char *prog, const char *target)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_DGRAM };
	struct addrinfo *ai;
	const char *port;
	char host[256];
	int fd, err;

	if (split_target(target, host, &port)) {
		fprintf(stderr, "%s: want HOST:PORT or [IPV6]:PORT, not '%s'\n",
			prog, target);
		return -1;
	}
	err = getaddrinfo(host, port, &hints, &ai);
	if (err) {
		fprintf(stderr, "%s: %s: %s\n", prog, target, gai_strerror(err));
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		fprintf(stderr, "%s: socket: %s\n", prog, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	return fd;
}

/* CLOCK_MONOTONIC in seconds */
double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 1: fd is readable (or has an error to report) before until, else 0 */
int wait_readable(int fd, double until)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	double left = until - now();

	if (left <= 0)
		return 0;
	return poll(&p, 1, (int)(left * 1000) + 1) > 0;
}

/* one KTAP result line; 1 when it failed */
int ktap_result(int n, int pass, const char *name)
{
	printf("%sok %d %s\n", pass ? "" : "not ", n, name);
	return !pass;
}

struct vector {
	const char *name;
	const char *key;	/* hex, or a repeated byte */
	size_t key_len;
	int key_byte;
	const char *data;
	const char *tag;
};

/* RFC 4231 test cases 1, 2, 6 and 7, numbered from first; the failures */
int npa1_rfc4231_test(int first)
{
	static const struct vector v[NPA1_RFC4231_TESTS] = {
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
	int i, failed = 0;

	for (i = 0; i < NPA1_RFC4231_TESTS; i++) {
		uint8_t k[256], want[SHA256_LEN], got[SHA256_LEN];
		struct hmac_sha256 key;

		if (v[i].key)
			unhex(v[i].key, k);
		else
			memset(k, v[i].key_byte, v[i].key_len);
		unhex(v[i].tag, want);
		hmac_sha256_key(&key, k, v[i].key_len);
		hmac_sha256(&key, v[i].data, strlen(v[i].data), got);
		failed += ktap_result(first + i, !memcmp(got, want, sizeof(got)),
				      v[i].name);
	}
	return failed;
}

/* KTAP of the RFC 4231 cases alone; 0 when all pass, else 1 */
int npa1_self_test(void)
{
	printf("TAP version 13\n1..%d\n", NPA1_RFC4231_TESTS);
	return npa1_rfc4231_test(1) ? 1 : 0;
}

int verbose;
volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/* sig sets stopping, and the tool's loops end */
void stop_on(int sig)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(sig, &sa, NULL);
}

void vlog(const char *prog, const char *fmt, ...)
{
	va_list ap;

	if (!verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}
