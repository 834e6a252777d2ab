/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * NPA1, netpoll's authenticated datagrams (include/linux/netpoll.h), on
 * the host side: the framing and what the host tools share around it.
 *
 * A datagram is a 24-byte big-endian header (magic "NPA1", version,
 * type, flags 0, nonce, seq, ack), the payload, and an HMAC-SHA256 tag
 * over both.
 */
#ifndef NPNG_NPA1_H
#define NPNG_NPA1_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "sha256.h"

#define NPA1_MAGIC	0x4e504131u	/* "NPA1" */
#define NPA1_VERSION	1
#define NPA1_HDR_LEN	24
#define NPA1_OVERHEAD	(NPA1_HDR_LEN + SHA256_LEN)

/* the RFC 4231 cases npa1_rfc4231_test() prints */
#define NPA1_RFC4231_TESTS	4

struct npa1_msg {
	uint8_t type;
	uint64_t nonce;
	uint32_t seq, ack;
	const uint8_t *data;
	size_t len;
};

size_t npa1_seal(const struct hmac_sha256 *key, uint8_t *buf,
		 const struct npa1_msg *m);
int npa1_open(const struct hmac_sha256 *key, const uint8_t *buf, size_t len,
	      struct npa1_msg *m);

void put_be(uint8_t *p, uint64_t v, int n);
uint64_t get_be(const uint8_t *p, int n);
int hexval(int c);
void unhex(const char *h, uint8_t *out);

int npa1_read_key(const char *prog, const char *path, struct hmac_sha256 *key);
int connect_udp(const char *prog, const char *target);
double now(void);
int wait_readable(int fd, double until);

/* set by a tool's -v; vlog() prints only then, prefixed with prog */
extern int verbose;
/* set by the handler stop_on() installs */
extern volatile sig_atomic_t stopping;
void stop_on(int sig);
void vlog(const char *prog, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

int ktap_result(int n, int pass, const char *name);
int npa1_rfc4231_test(int first);
int npa1_self_test(void);

#endif
