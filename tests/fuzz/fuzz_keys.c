// SPDX-License-Identifier: MIT
/* libFuzzer target: the key process's requests (broker/keys/proto.c) and
 * its answers (keyproc.c keys_serve_one()), as a compromised broker would
 * send them. */

/*
 * Input: one flag byte, then a request as it would come off the socket.
 *   flags & 1: the request's id field (bytes 4..35, where the message is
 *              that long) is replaced by the id of a CA the key process
 *              holds, so that LEAF_SIGN, CA_SAVE and the rest reach past
 *              the lookup (a fuzzer does not guess a SHA-256).
 * No key directory: file operations answer -EBADF. A JWT key is held
 * under handle 1; JWT_LOAD is parsed but not served (it would open the
 * fuzzer's paths).
 *
 * Invariants: a request that parses builds back to the same bytes (the
 * format has one spelling); names and hosts are NUL-terminated within
 * their bounds; every answer is a status of 0 or a negative errno, with a
 * certificate only after 0 and only for CA_CREATE and LEAF_SIGN (a
 * 64-byte signature for JWT_SIGN, a count for CA_SWEEP); a leaf is never
 * a CA and names exactly one host. CA_CREATE holds the key only (no
 * directory to write it in).
 */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "broker/keys/keys_internal.h"

#define CHECK(c)                          \
	do {                              \
		if (!(c))                 \
			__builtin_trap(); \
	} while (0)

static unsigned char held_id[KEYS_ID_LEN];
static unsigned runs;

/* A JWT key held (handle 1 after each reset, what a fuzzer finds), given
 * by descriptor: JWT_LOAD by path is never served here (the fuzzer's
 * paths would be opened). */
static void jwt_setup(void)
{
	static unsigned char req[4 + 32], out[KEYS_MSG_MAX];
	EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	FILE *f = tmpfile();
	int32_t st;

	CHECK(k && f && PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) == 1);
	CHECK(fflush(f) == 0 && fseek(f, 0, SEEK_SET) == 0);
	memcpy(req, &(uint32_t){ KEYS_JWT_LOAD }, 4);
	memcpy(req + 4, "/fuzz.pem", 9);
	keys_serve_one(req, 4 + 9, fileno(f), out, sizeof(out));
	memcpy(&st, out, sizeof(st));
	CHECK(st == 0);
	fclose(f);
	EVP_PKEY_free(k);
}

static void setup(void)
{
	static const unsigned char req[] = { KEYS_CA_CREATE, 0, 0, 0, 'f', 'u', 'z', 'z' };
	static unsigned char out[KEYS_MSG_MAX];
	const unsigned char *p = out + 4;
	size_t n;
	int32_t st;
	X509 *x;
	unsigned int len = 0;

	keys_server_reset();
	keys_server_init(-1);
	n = keys_serve_one(req, sizeof(req), -1, out, sizeof(out));
	memcpy(&st, out, sizeof(st));
	CHECK(n > 4 && st == 0);
	x = d2i_X509(NULL, &p, (long)(n - 4));
	CHECK(x && X509_digest(x, EVP_sha256(), held_id, &len) == 1 && len == KEYS_ID_LEN);
	X509_free(x);
	jwt_setup();
}

static void check_parse(const uint8_t *buf, size_t len)
{
	static unsigned char again[KEYS_MSG_MAX];
	struct keys_req q;
	int r = keys_req_parse(buf, len, &q);

	CHECK(r == 0 || r == -EINVAL || r == -EMSGSIZE || r == -EOPNOTSUPP);
	if (r < 0)
		return;
	CHECK(q.op > 0 && q.op < KEYS_OP_END);
	CHECK(strlen(q.name) <= KEYS_NAME_MAX && strlen(q.host) <= KEYS_HOST_MAX);
	if (q.op == KEYS_CA_CREATE)
		CHECK(keys_name_ok(q.name, strlen(q.name)));
	r = keys_req_build(&q, again, sizeof(again));
	CHECK(r >= 0 && (size_t)r == len && memcmp(again, buf, len) == 0);
}

static void check_answer(const uint8_t *buf, size_t len)
{
	static unsigned char out[KEYS_MSG_MAX];
	struct keys_req q;
	const unsigned char *p = out + 4;
	size_t n = keys_serve_one(buf, len, -1, out, sizeof(out));
	int32_t st;
	X509 *x;

	CHECK(n >= 4 && n <= sizeof(out));
	memcpy(&st, out, sizeof(st));
	CHECK(st <= 0);
	if (st < 0 || n == 4)
		return;
	CHECK(keys_req_parse(buf, len, &q) == 0);
	CHECK(q.op == KEYS_CA_CREATE || q.op == KEYS_LEAF_SIGN || q.op == KEYS_JWT_SIGN ||
	      q.op == KEYS_CA_SWEEP);
	if (q.op == KEYS_JWT_SIGN) {
		CHECK(n == 4 + 64);
		return;
	}
	if (q.op == KEYS_CA_SWEEP) { /* a count (never here: no directory) */
		CHECK(n == 4 + sizeof(uint32_t));
		return;
	}
	x = d2i_X509(NULL, &p, (long)(n - 4));
	CHECK(x && p == out + n);
	if (q.op == KEYS_LEAF_SIGN) {
		GENERAL_NAMES *san = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);

		CHECK(X509_check_ca(x) == 0);
		CHECK(san && sk_GENERAL_NAME_num(san) == 1);
		GENERAL_NAMES_free(san);
	}
	X509_free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[KEYS_MSG_MAX + 16];
	size_t len;

	/* The held CAs are bounded, but a fresh start now and then keeps
	 * each run's memory small. */
	if (runs++ % 4096 == 0)
		setup();
	if (size < 1)
		return 0;
	len = size - 1 < sizeof(buf) ? size - 1 : sizeof(buf);
	memcpy(buf, data + 1, len);
	if ((data[0] & 1) && len >= 4 + KEYS_ID_LEN)
		memcpy(buf + 4, held_id, KEYS_ID_LEN);
	/* Longer than a message may be: the parser is given it all (it must
	 * say -EMSGSIZE), as the key process's recv() of KEYS_MSG_MAX + 1. */
	check_parse(buf, len);
	if (len < 4 || *(const uint32_t *)buf != KEYS_JWT_LOAD)
		check_answer(buf, len);
	return 0;
}
