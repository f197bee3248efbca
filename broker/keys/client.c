// SPDX-License-Identifier: MIT
/* The broker's side of the key process: one request, one answer. */

/*
 * One socket and one lock for every thread. What goes through it is rare:
 * CA_CREATE, CA_LOAD, CA_SAVE and CA_DROP on the control thread, LEAF_SIGN
 * on a leaf-cache miss (once per host and CA per TLS_LEAF_DAYS), CA_FORGET
 * when a sandbox's last reference goes. A socket per worker would save a
 * wait only when two workers miss at once, and would need as many
 * descriptors made before the fork; a lock costs nothing when uncontended.
 * Each answer is awaited SO_RCVTIMEO (5 s); one that does not come, or an
 * EOF, gives the key process up for good: a late answer would otherwise
 * answer the next request. It is not restarted: that would take root, which
 * the broker no longer is; what needs a key is refused from then on
 * (fail closed) and said once.
 */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker/keys/keys_internal.h"
#include "common/log.h"

static struct {
	pthread_mutex_t lock;
	int sock;
	pid_t pid;
	bool active;
	atomic_bool alive;
} K = { .lock = PTHREAD_MUTEX_INITIALIZER, .sock = -1 };

void keys_client_set(int sock, pid_t pid)
{
	K.sock = sock;
	K.pid = pid;
	K.active = true;
	atomic_store(&K.alive, true);
}

bool keys_active(void)
{
	return K.active;
}

bool keys_alive(void)
{
	return atomic_load(&K.alive);
}

pid_t keys_pid(void)
{
	return K.pid;
}

/* Caller holds K.lock. */
static void gone(const char *why)
{
	log_err("sluiced: the key process (pid %d) %s: from now on interception refuses every "
		"host whose leaf is not cached (reason tls-leaf-failed) and no sandbox can be "
		"created; restart the broker",
		(int)K.pid, why);
	close(K.sock);
	K.sock = -1;
	atomic_store(&K.alive, false);
}

/* Sends @q; with 0 back and @der, the answer's certificate in *@der. */
static int call(const struct keys_req *q, unsigned char **der, size_t *len)
{
	static unsigned char out[KEYS_MSG_MAX];
	unsigned char msg[KEYS_MSG_MAX];
	int32_t status;
	ssize_t n;
	int m, r;

	if (der) {
		*der = NULL;
		*len = 0;
	}
	m = keys_req_build(q, msg, sizeof(msg));
	if (m < 0)
		return m;
	pthread_mutex_lock(&K.lock);
	if (K.sock < 0) {
		r = -EPIPE;
		goto out;
	}
	if (send(K.sock, msg, (size_t)m, MSG_NOSIGNAL) != m) {
		gone(errno == EPIPE || errno == ECONNRESET ? "is gone" : "does not take requests");
		r = -EPIPE;
		goto out;
	}
	do
		n = recv(K.sock, out, sizeof(out), 0);
	while (n < 0 && errno == EINTR);
	if (n < (ssize_t)sizeof(status)) {
		gone(n == 0 ? "is gone" : "does not answer");
		r = -EPIPE;
		goto out;
	}
	memcpy(&status, out, sizeof(status));
	r = status > 0 ? -EIO : status;
	if (r == 0 && der) {
		*len = (size_t)n - sizeof(status);
		*der = *len ? malloc(*len) : NULL;
		if (!*der)
			r = *len ? -ENOMEM : -EIO;
		else
			memcpy(*der, out + sizeof(status), *len);
	}
out:
	pthread_mutex_unlock(&K.lock);
	return r;
}

int keys_ca_create(const char *name, unsigned char **der, size_t *len)
{
	struct keys_req q = { .op = KEYS_CA_CREATE };

	if (strlen(name) > KEYS_NAME_MAX)
		return -EINVAL;
	memcpy(q.name, name, strlen(name) + 1);
	return call(&q, der, len);
}

int keys_ca_load(const unsigned char *der, size_t len)
{
	struct keys_req q = { .op = KEYS_CA_LOAD, .data = der, .len = len };

	return call(&q, NULL, NULL);
}

static int by_id(enum keys_op op, const unsigned char id[KEYS_ID_LEN])
{
	struct keys_req q = { .op = op };

	memcpy(q.id, id, KEYS_ID_LEN);
	return call(&q, NULL, NULL);
}

int keys_ca_save(const unsigned char id[KEYS_ID_LEN])
{
	return by_id(KEYS_CA_SAVE, id);
}

int keys_ca_forget(const unsigned char id[KEYS_ID_LEN])
{
	return by_id(KEYS_CA_FORGET, id);
}

int keys_ca_drop(const unsigned char id[KEYS_ID_LEN])
{
	return by_id(KEYS_CA_DROP, id);
}

int keys_leaf_sign(const unsigned char id[KEYS_ID_LEN], const char *host,
		   const unsigned char *pub, size_t publen, unsigned char **der, size_t *len)
{
	struct keys_req q = { .op = KEYS_LEAF_SIGN, .data = pub, .len = publen };
	size_t hl = strlen(host);

	if (hl > KEYS_HOST_MAX)
		return -EINVAL;
	memcpy(q.id, id, KEYS_ID_LEN);
	memcpy(q.host, host, hl + 1);
	return call(&q, der, len);
}
