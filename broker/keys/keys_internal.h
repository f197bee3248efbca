/* SPDX-License-Identifier: MIT */
/* The key process's wire format (proto.c), shared by its two sides. */
#ifndef SLUICE_BROKER_KEYS_INTERNAL_H
#define SLUICE_BROKER_KEYS_INTERNAL_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "broker/keys/keys.h"

/*
 * One request, one answer, each one SOCK_SEQPACKET message (so its length
 * is the message's: no length field to trust). A request is a uint32 op in
 * host order (both ends are one binary on one machine), then:
 *
 *   CA_CREATE  the sandbox's name, 1..KEYS_NAME_MAX bytes, no NUL
 *   CA_LOAD    the CA certificate, DER, 1..KEYS_DER_MAX bytes
 *   CA_SAVE, CA_FORGET, CA_DROP
 *              the CA's id: KEYS_ID_LEN bytes exactly
 *   LEAF_SIGN  the id, a uint16 host length, the host (1..KEYS_HOST_MAX
 *              bytes, no NUL), then the leaf's public key, DER
 *              SubjectPublicKeyInfo, 1..KEYS_PUB_MAX bytes
 *   PING       nothing
 *   JWT_LOAD   the key file's absolute path, 1..KEYS_PATH_MAX bytes, no
 *              NUL; with or without a descriptor of it (SCM_RIGHTS), opened
 *              by the broker (or its opener) and never read there
 *   JWT_SIGN   a uint32 handle, then the JWS signing input,
 *              1..KEYS_TBS_MAX bytes
 *   JWT_DROP   a uint32 handle
 *   CA_SWEEP   nothing: every CA key file (ID.key) of its directory that
 *              holds no CA it holds, and every temporary (ID.tmp), goes
 *
 * CA_LOAD answers -ENOENT when no key file is there for the certificate,
 * -EKEYREJECTED when the file holds no key, or not the certificate's, or
 * the certificate is not a CA in date, and tls_read_small_at()'s errno
 * when the file cannot be used (-EINVAL: not a regular file; -ELOOP, a
 * symlink; -EPERM, others may read it; -EFBIG).
 *
 * JWT_LOAD answers -EKEYREJECTED for a file that holds no key it takes,
 * -EINVAL for one that is not a regular file, -EFBIG for an empty or too
 * large one.
 *
 * CA_CREATE also writes the new key's file, when it has a directory (a
 * CA_SAVE after it writes the file again).
 *
 * An answer is an int32 (0 or a negative errno), then with 0: for
 * CA_CREATE and LEAF_SIGN a certificate in DER; for JWT_LOAD the handle
 * (uint32) and the key's public half (DER SubjectPublicKeyInfo); for
 * JWT_SIGN the 64-byte JWS signature (ES256 R||S, or Ed25519); for
 * CA_SWEEP how many files went (uint32).
 */
#define KEYS_NAME_MAX 63  /* SANDBOX_NAME_MAX */
#define KEYS_HOST_MAX 255 /* 253, or an IPv6 literal in brackets */
#define KEYS_PUB_MAX 512
#define KEYS_DER_MAX 4096
#define KEYS_PATH_MAX 4095
/* creds.c's JWT_MAX_LEN: a token is never longer. */
#define KEYS_TBS_MAX 16384
#define KEYS_MSG_MAX (KEYS_TBS_MAX + 64)

enum keys_op {
	KEYS_CA_CREATE = 1,
	KEYS_CA_LOAD,
	KEYS_CA_SAVE,
	KEYS_CA_FORGET,
	KEYS_CA_DROP,
	KEYS_LEAF_SIGN,
	KEYS_PING,
	KEYS_JWT_LOAD,
	KEYS_JWT_SIGN,
	KEYS_JWT_DROP,
	KEYS_CA_SWEEP,
	KEYS_OP_END,
};

/**
 * struct keys_req - a request, parsed (keys_req_parse()) or to be built
 * @op:   what is asked
 * @id:   CA_SAVE, CA_FORGET, CA_DROP, LEAF_SIGN: the CA's id
 * @name: CA_CREATE: the sandbox's name, NUL-terminated, checked as the
 *        broker checks sandbox names
 * @host: LEAF_SIGN: the host as sent, NUL-terminated (the key process
 *        checks it is a DNS name or an address literal before signing)
 * @path: JWT_LOAD: the key file, absolute, NUL-terminated
 * @handle: JWT_SIGN, JWT_DROP: the key, as JWT_LOAD answered
 * @data: CA_LOAD: the certificate; LEAF_SIGN: the public key; JWT_SIGN:
 *        the signing input. Points into
 *        the buffer parsed, which must outlive the request
 * @len:  @data's length
 */
struct keys_req {
	enum keys_op op;
	unsigned char id[KEYS_ID_LEN];
	char name[KEYS_NAME_MAX + 1];
	char host[KEYS_HOST_MAX + 1];
	char path[KEYS_PATH_MAX + 1];
	uint32_t handle;
	const unsigned char *data;
	size_t len;
};

/**
 * keys_req_parse() - check and parse one request as it came off the socket
 * @buf: the message; hostile (the broker may be the compromised one)
 * @len: its length
 * @req: filled in on success
 *
 * Return: 0; -EOPNOTSUPP for an unknown op; -EMSGSIZE for a message or a
 * field longer than its bound; -EINVAL for anything else malformed (a
 * short message, a bad sandbox name, a NUL in the host, trailing bytes).
 */
int keys_req_parse(const unsigned char *buf, size_t len, struct keys_req *req);

/**
 * keys_req_build() - the message for @req
 * @req: as keys_req_parse() would return it
 * @buf: where (KEYS_MSG_MAX is always enough)
 * @cap: its size
 *
 * Return: the message's length, or -EINVAL, -EMSGSIZE as keys_req_parse()
 * would refuse it.
 */
int keys_req_build(const struct keys_req *req, unsigned char *buf, size_t cap);

/* true when @s is a sandbox name the broker accepts (sandbox.c's rule). */
bool keys_name_ok(const char *s, size_t len);

/**
 * keys_serve_one() - the key process's answer to one request (keyproc.c)
 * @buf: the request as received; hostile
 * @len: its length
 * @fd:  JWT_LOAD: the key file, opened by the broker (not closed here), or
 *       -1 for the key process to open the path itself
 * @out: the answer: an int32 status, then what keys_internal.h says
 * @cap: its size (KEYS_MSG_MAX)
 *
 * Its main loop calls it for each message; so do the fuzz target and the
 * unit tests, after keys_server_init().
 *
 * Return: the answer's length (0 only when @cap cannot hold a status).
 */
size_t keys_serve_one(const unsigned char *buf, size_t len, int fd, unsigned char *out, size_t cap);

/* keyproc.c: the directory keys are saved in and loaded from (-1: none,
 * file operations answer -EBADF), and dropping every key held (tests). */
void keys_server_init(int dirfd);
void keys_server_reset(void);

/* client.c: the broker's end of the socket, once the key process is ready. */
void keys_client_set(int sock, pid_t pid);

#endif
