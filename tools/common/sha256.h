/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef NPNG_SHA256_H
#define NPNG_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32

struct sha256 {
	uint32_t h[8];
	uint64_t len;
	uint8_t buf[64];
};

struct hmac_sha256 {
	struct sha256 inner, outer;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t n);
void sha256_final(struct sha256 *s, uint8_t out[SHA256_LEN]);
void hmac_sha256_key(struct hmac_sha256 *m, const void *key, size_t n);
void hmac_sha256(const struct hmac_sha256 *m, const void *data, size_t n,
		 uint8_t tag[SHA256_LEN]);
int tag_differs(const uint8_t *a, const uint8_t *b, size_t n);

#endif
