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
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

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

/* Caller holds K.lock. */
static void gone(const char *why);

bool keys_alive(void)
{
	struct pollfd p = { .events = POLLIN };

	/* A death is seen at the next request; `sluice status` should not
	 * wait for one: a hang-up on the socket says it now. */
	pthread_mutex_lock(&K.lock);
	p.fd = K.sock;
	if (K.sock >= 0 && poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)))
		gone("is gone");
	pthread_mutex_unlock(&K.lock);
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

/* Sends @q (with the descriptor @fd, when not -1); with 0 back and @der,
 * what follows the status in *@der (malloc()ed). */
static int call(const struct keys_req *q, int fd, unsigned char **der, size_t *len)
{
	/* Under K.lock: a signing input is up to KEYS_TBS_MAX, too much for
	 * a worker's stack. */
	static unsigned char out[KEYS_MSG_MAX], msg[KEYS_MSG_MAX];
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} c;
	struct iovec iov = { .iov_base = msg };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	int32_t status;
	ssize_t n;
	int m, r;

	if (der) {
		*der = NULL;
		*len = 0;
	}
	pthread_mutex_lock(&K.lock);
	m = keys_req_build(q, msg, sizeof(msg));
	if (m < 0) {
		r = m;
		goto out;
	}
	if (K.sock < 0) {
		r = -EPIPE;
		goto out;
	}
	iov.iov_len = (size_t)m;
	if (fd >= 0) {
		memset(&c, 0, sizeof(c));
		mh.msg_control = c.buf;
		mh.msg_controllen = sizeof(c.buf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	if (sendmsg(K.sock, &mh, MSG_NOSIGNAL) != m) {
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
	/* A JWS signature is half of a bearer token. */
	OPENSSL_cleanse(out, (size_t)n);
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
	return call(&q, -1, der, len);
}

int keys_ca_load(const unsigned char *der, size_t len)
{
	struct keys_req q = { .op = KEYS_CA_LOAD, .data = der, .len = len };

	return call(&q, -1, NULL, NULL);
}

static int by_id(enum keys_op op, const unsigned char id[KEYS_ID_LEN])
{
	struct keys_req q = { .op = op };

	memcpy(q.id, id, KEYS_ID_LEN);
	return call(&q, -1, NULL, NULL);
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

int keys_leaf_sign(const unsigned char id[KEYS_ID_LEN], const char *host, const unsigned char *pub,
		   size_t publen, unsigned char **der, size_t *len)
{
	struct keys_req q = { .op = KEYS_LEAF_SIGN, .data = pub, .len = publen };
	size_t hl = strlen(host);

	if (hl > KEYS_HOST_MAX)
		return -EINVAL;
	memcpy(q.id, id, KEYS_ID_LEN);
	memcpy(q.host, host, hl + 1);
	return call(&q, -1, der, len);
}

int keys_jwt_load(const char *path, int fd, uint32_t *handle, unsigned char **spki, size_t *len)
{
	/* On the heap: struct keys_req holds a path buffer (4 KiB). */
	struct keys_req *q = calloc(1, sizeof(*q));
	unsigned char *ans = NULL;
	size_t n = 0, pl = strlen(path);
	int r;

	*spki = NULL;
	*len = 0;
	if (!q)
		return -ENOMEM;
	if (pl > KEYS_PATH_MAX) {
		free(q);
		return -ENAMETOOLONG;
	}
	q->op = KEYS_JWT_LOAD;
	memcpy(q->path, path, pl + 1);
	r = call(q, fd, &ans, &n);
	free(q);
	if (r < 0)
		return r;
	if (n <= sizeof(*handle)) {
		free(ans);
		return -EIO;
	}
	memcpy(handle, ans, sizeof(*handle));
	memmove(ans, ans + sizeof(*handle), n - sizeof(*handle));
	*spki = ans;
	*len = n - sizeof(*handle);
	return 0;
}

int keys_jwt_sign(uint32_t handle, const unsigned char *tbs, size_t len, unsigned char sig[64])
{
	struct keys_req q = { .op = KEYS_JWT_SIGN, .handle = handle, .data = tbs, .len = len };
	unsigned char *ans = NULL;
	size_t n = 0;
	int r = call(&q, -1, &ans, &n);

	if (r == 0 && n != 64)
		r = -EIO;
	if (r == 0)
		memcpy(sig, ans, 64);
	if (ans)
		OPENSSL_clear_free(ans, n);
	return r;
}

int keys_jwt_drop(uint32_t handle)
{
	struct keys_req q = { .op = KEYS_JWT_DROP, .handle = handle };

	return call(&q, -1, NULL, NULL);
}

int keys_ca_sweep(void)
{
	struct keys_req q = { .op = KEYS_CA_SWEEP };
	unsigned char *ans = NULL;
	uint32_t n = 0;
	size_t len = 0;
	int r = call(&q, -1, &ans, &len);

	if (r == 0 && len != sizeof(n))
		r = -EIO;
	if (r == 0)
		memcpy(&n, ans, sizeof(n));
	free(ans);
	return r < 0 ? r : n > INT_MAX ? INT_MAX : (int)n;
}
