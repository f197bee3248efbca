/* SPDX-License-Identifier: MIT */
/* The key process, sluiced-keys: holder of the sandboxes' CA keys. */
#ifndef SLUICE_BROKER_KEYS_H
#define SLUICE_BROKER_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sl_err; /* common/err.h */

/* A CA's id: the SHA-256 of its certificate's DER. */
#define KEYS_ID_LEN 32
/* The key directory, in state_dir: the key process's, 0700. */
#define KEYS_DIR "keys"

/**
 * keys_start() - fork the key process
 * @state_dir: the broker's; the keys live in @state_dir/keys
 * @uid:       the key process's user (not 0, not the broker's)
 * @gid:       its group
 * @err:       on failure, why (common/err.h), or NULL
 *
 * Call as root, while the process has one thread, before the broker
 * switches user. The child takes over the CA keys an older broker left in
 * @state_dir/ca/NAME/ca.key (moved to @state_dir/keys, the certificates
 * stay), becomes @uid:@gid with no capability, sets its seccomp filter and
 * answers the broker's requests until the broker ends. keys_start()
 * returns once the child is ready (or has failed). From then on
 * tls/ca.c's CAs are held there (keys_active()).
 *
 * Return: 0 or a negative errno.
 */
int keys_start(const char *state_dir, uid_t uid, gid_t gid, struct sl_err *err);

/* The key process was started: the CAs are its. */
bool keys_active(void);
/* ... and has not been given up (it died, or stopped answering; a hang-up
 * on its socket is noticed here too, not only at the next request). */
bool keys_alive(void);
/* Its pid, or 0. */
pid_t keys_pid(void);

/*
 * The broker's side of the requests. Thread-safe (one socket, one lock:
 * see client.c). Each returns 0 or a negative errno; -EPIPE once the key
 * process is gone. Certificates come back in DER in *@der, which the
 * caller free()s.
 */
int keys_ca_create(const char *name, unsigned char **der, size_t *len);
int keys_ca_load(const unsigned char *der, size_t len);
int keys_ca_save(const unsigned char id[KEYS_ID_LEN]);
int keys_ca_forget(const unsigned char id[KEYS_ID_LEN]);
int keys_ca_drop(const unsigned char id[KEYS_ID_LEN]);
/* Deletes the key files of CAs not held (and temporaries): how many went,
 * or a negative errno. */
int keys_ca_sweep(void);
int keys_leaf_sign(const unsigned char id[KEYS_ID_LEN], const char *host, const unsigned char *pub,
		   size_t publen, unsigned char **der, size_t *len);

/*
 * JWT signing keys (creds/jwt.c). keys_jwt_load(): @fd is the key file as
 * the broker opened it (handed over, never read here; the caller still
 * closes it), or -1 for the key process to open @path itself; sets the
 * key's *@handle and its public half (DER SubjectPublicKeyInfo) in *@spki,
 * which the caller free()s. keys_jwt_sign(): the 64-byte JWS signature.
 */
int keys_jwt_load(const char *path, int fd, uint32_t *handle, unsigned char **spki, size_t *len);
int keys_jwt_sign(uint32_t handle, const unsigned char *tbs, size_t len, unsigned char sig[64]);
int keys_jwt_drop(uint32_t handle);

#endif
