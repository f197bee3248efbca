// SPDX-License-Identifier: MIT
/* OAuth2 client-credentials tokens: the broker's cache and its fetcher threads.
 *
 * Theory of operation: an oauth2 credential of a loaded policy holds a
 * reference on one cache entry, keyed by (token_url, client_id, scopes)
 * and the client secret, so that sandboxes and reloads with the same
 * credential share one token, and only they.
 * A fixed pool of CREDS_TOKENS_FETCHERS threads, started together with the first
 * oauth2 credential, does the fetches, each thread one at a time: an idle
 * thread sleeps on the cache's condition variable until the earliest entry
 * that no thread is fetching is due, marks it as being fetched (so no
 * other thread takes it) and holds a reference on it while it posts the
 * client-credentials grant over TLS (verified against upstream_ca or the
 * system store) to an address it resolved itself with the broker's
 * upstream resolvers (c-ares on a loop and resolver of its own; never
 * NSS), with a deadline on the whole exchange. So fetches of different
 * entries run at once: an endpoint that hangs holds one thread until its
 * deadline, never another credential's fetch; with more entries due than
 * threads, the others wait for the next free thread. A token is refreshed
 * at about 80-85% of its life and handed out until 90%; a failure is
 * retried after 1, 2, 4 ... 60 s while the old token, if any, is still
 * handed out. Workers only ever copy the current token under the cache's
 * mutex: a request that finds none is refused (502 credential-unavailable)
 * and asks the fetchers to hurry, unless it is backing off.
 *
 * Stopping: creds_tokens_stop() marks the cache stopping, makes the shared stop
 * eventfd readable (it is polled by every fetch, never read, so that every
 * thread sees it) and stops each thread's loop, so that every fetch in
 * flight ends at once; then it joins every thread.
 *
 * Tokens and client secrets live in creds_secret memory and are wiped when
 * replaced or dropped; neither is ever logged: log lines name the
 * credential, the endpoint's host and what went wrong. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "broker/creds/creds_internal.h"
#include "broker/http.h"
#include "common/loop.h"
#include "broker/resolve.h"
#include "broker/tls/tls.h"
#include "common/addr.h"
#include "common/err.h"
#include "common/log.h"
#include "policy/policy.h"

/* Addresses of a name tried in turn, at most. */
#define CREDS_TOKENS_MAX_TRIES 4
/* The response head, at most. */
#define CREDS_TOKENS_HEAD_MAX (16 * 1024)

struct creds_tokens_entry {
	struct creds_tokens_entry *next, *prev;
	unsigned refs;			    /* policies holding it, and a fetcher during a fetch */
	char *key;			    /* "token_url\nclient_id\nscope scope..." */
	char cred_name[CREDS_NAME_MAX + 1]; /* the credential that made it, for logs */
	char *host, *path, *client_id;
	char **scopes;
	size_t n_scopes;
	uint16_t port;
	struct creds_secret client_secret;
	struct creds_secret token; /* empty: none */
	uint64_t usable_until;	   /* monotonic ms */
	uint64_t due;		   /* next fetch, monotonic ms */
	unsigned failures;	   /* in a row */
	bool fetching;		   /* by one fetcher thread; no other takes it */
	bool tried;		   /* a fetch has ended (creds_tokens_wait_first) */
};

static int fetch_https(void *ctx, const struct creds_tokens_request *rq, struct creds_secret *token,
		       uint64_t *expires_in, struct sl_err *err);

/* One fetcher thread; the HTTPS fetch's context. */
struct fetcher {
	pthread_t thread;
	unsigned id;
	struct loop *loop;    /* its own, for its resolver (loop_stop()s it) */
	struct resolver *res; /* made and freed on the thread; NULL: none */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake; /* the fetchers': an entry may be due sooner */
	pthread_cond_t done; /* creds_tokens_wait_first()'s: a fetch ended */
	struct creds_tokens_entry *head;
	size_t n;
	bool started, stopping;
	struct fetcher fetchers[CREDS_TOKENS_FETCHERS];
	unsigned n_fetchers; /* threads running (to join) */
	/* Set by creds_tokens_start() before the threads start; then read only. */
	char ca[512];
	char resolvers[512];
	uint32_t connect_ms, fetch_ms, resolve_ms;
	SSL_CTX *ctx;		      /* shared: SSL_new() is thread-safe on it */
	int stop_fd;		      /* eventfd: readable once stopping; polled, never read */
	creds_tokens_fetch_fn *fetch; /* both read under the lock, per fetch */
	void *fetch_ctx;
	uint64_t ok, failed;
} T = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.stop_fd = -1,
	.fetch = fetch_https,
};

static pthread_once_t conds_once = PTHREAD_ONCE_INIT;

/* The condition variables wait on CLOCK_MONOTONIC: a wall clock step must
 * neither hold a refresh back nor fire it early. */
static void conds_init(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&T.wake, &a);
	pthread_cond_init(&T.done, &a);
	pthread_condattr_destroy(&a);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void deadline_ts(uint64_t ms, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ms / 1000);
	ts->tv_nsec = (long)(ms % 1000) * 1000000;
}

/* ---- the schedule --------------------------------------------------------- */

static uint64_t life_sec(uint64_t expires_in_sec)
{
	if (expires_in_sec == 0)
		return CREDS_TOKENS_DEFAULT_EXPIRES_SEC;
	return expires_in_sec > CREDS_OAUTH2_EXPIRES_MAX ? CREDS_OAUTH2_EXPIRES_MAX
							 : expires_in_sec;
}

uint64_t creds_tokens_usable_ms(uint64_t expires_in_sec)
{
	uint64_t life = life_sec(expires_in_sec) * 1000, early = life / 10;

	if (early > 30000)
		early = 30000;
	return life - early;
}

uint64_t creds_tokens_refresh_ms(uint64_t expires_in_sec, uint32_t jitter)
{
	uint64_t life = life_sec(expires_in_sec) * 1000;
	uint64_t at = life * 80 / 100 + (life * 5 / 100) * (jitter % 1001) / 1000;
	uint64_t usable = creds_tokens_usable_ms(expires_in_sec);

	/* A long life hands out until 30 s before its end: refresh well
	 * before that too (at least 10 s before, when the life allows). */
	if (usable > 20000 && at > usable - 10000)
		at = usable - 10000;
	return at ? at : 1;
}

uint64_t creds_tokens_backoff_ms(unsigned failures)
{
	uint64_t ms = 1000;

	while (failures > 1 && ms < CREDS_TOKENS_BACKOFF_MAX_MS) {
		ms *= 2;
		failures--;
	}
	return ms > CREDS_TOKENS_BACKOFF_MAX_MS ? CREDS_TOKENS_BACKOFF_MAX_MS : ms;
}

/* ---- entries -------------------------------------------------------------- */

/* Frees @e and all it holds, wiping its secrets; it is in no list. */
static void entry_free(struct creds_tokens_entry *e)
{
	size_t i;

	creds_secret_free(&e->token);
	creds_secret_free(&e->client_secret);
	free(e->key);
	free(e->host);
	free(e->path);
	free(e->client_id);
	for (i = 0; i < e->n_scopes; i++)
		free(e->scopes[i]);
	free(e->scopes);
	free(e);
}

/* With the lock held; the entry is gone when this returns true. */
static bool entry_put_locked(struct creds_tokens_entry *e)
{
	if (--e->refs > 0)
		return false;
	if (e->prev)
		e->prev->next = e->next;
	else
		T.head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	T.n--;
	entry_free(e);
	return true;
}

void creds_tokens_put(struct creds_tokens_entry *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&T.lock);
	entry_put_locked(e);
	pthread_mutex_unlock(&T.lock);
}

static char *entry_key(const struct policy_oauth2 *o)
{
	size_t i, off, len = strlen(o->token_url) + strlen(o->client_id) + 3;
	char *k;

	for (i = 0; i < o->n_scopes; i++)
		len += strlen(o->scopes[i]) + 1;
	k = malloc(len);
	if (!k)
		return NULL;
	off = (size_t)snprintf(k, len, "%s\n%s\n", o->token_url, o->client_id);
	for (i = 0; i < o->n_scopes; i++)
		off += (size_t)snprintf(k + off, len - off, "%s%s", o->scopes[i],
					i + 1 < o->n_scopes ? " " : "");
	return k;
}

static struct creds_tokens_entry *entry_new(const struct policy_credential *c, char *key)
{
	const struct policy_oauth2 *o = &c->oauth2;
	struct creds_tokens_entry *e = calloc(1, sizeof(*e));
	size_t i;

	if (!e)
		return NULL;
	e->refs = 1;
	e->key = key;
	snprintf(e->cred_name, sizeof(e->cred_name), "%s", c->name);
	e->host = strdup(o->token_host);
	e->path = strdup(o->token_path);
	e->client_id = strdup(o->client_id);
	e->port = o->token_port;
	e->scopes = o->n_scopes ? calloc(o->n_scopes, sizeof(*e->scopes)) : NULL;
	if (!e->host || !e->path || !e->client_id || (o->n_scopes && !e->scopes))
		goto fail;
	for (i = 0; i < o->n_scopes; i++) {
		e->scopes[i] = strdup(o->scopes[i]);
		if (!e->scopes[i])
			goto fail;
		e->n_scopes = i + 1;
	}
	return e;
fail:
	e->key = NULL; /* still the caller's */
	entry_free(e);
	return NULL;
}

struct creds_tokens_entry *creds_tokens_get(const struct policy_credential *c,
					    const struct creds_secret *client_secret)
{
	struct creds_tokens_entry *e, *fresh;
	struct creds_secret cs = { 0 };
	char *key;

	if (!c || c->source_kind != POLICY_SOURCE_OAUTH2 || !c->oauth2.token_url ||
	    !client_secret || !client_secret->len) {
		errno = EINVAL;
		return NULL;
	}
	key = entry_key(&c->oauth2);
	if (!key || creds_secret_set(&cs, client_secret->buf, client_secret->len) < 0) {
		free(key);
		errno = ENOMEM;
		return NULL;
	}
	pthread_once(&conds_once, conds_init);
	pthread_mutex_lock(&T.lock);
	/* Shared only with the same client secret: a token fetched with
	 * one secret is never handed to a policy that holds another (which
	 * could name another client's endpoint, id and scopes, and a secret
	 * of its own, to be injected the other's token), and no policy's
	 * secret replaces another's. A reload that read a rotated secret
	 * makes a new entry; the old one goes with the old policy. */
	for (e = T.head; e; e = e->next) {
		if (strcmp(e->key, key) == 0 && e->client_secret.len == cs.len &&
		    CRYPTO_memcmp(e->client_secret.buf, cs.buf, cs.len) == 0)
			break;
	}
	if (e) {
		/* Log lines name the credential loaded last. */
		e->refs++;
		snprintf(e->cred_name, sizeof(e->cred_name), "%s", c->name);
		pthread_mutex_unlock(&T.lock);
		creds_secret_free(&cs);
		free(key);
		return e;
	}
	pthread_mutex_unlock(&T.lock);

	/* Only the control thread makes entries, so nobody else can have made
	 * this one meanwhile; allocating outside the lock keeps workers going. */
	fresh = entry_new(c, key);
	if (!fresh) {
		free(key);
		creds_secret_free(&cs);
		errno = ENOMEM;
		return NULL;
	}
	fresh->client_secret = cs;
	fresh->due = mono_ms();
	pthread_mutex_lock(&T.lock);
	fresh->next = T.head;
	if (T.head)
		T.head->prev = fresh;
	T.head = fresh;
	T.n++;
	pthread_cond_signal(&T.wake);
	pthread_mutex_unlock(&T.lock);
	return fresh;
}

int creds_tokens_copy(struct creds_tokens_entry *e, struct creds_secret *out)
{
	uint64_t now = mono_ms();
	int r = -EAGAIN;

	out->buf = NULL;
	out->len = 0;
	pthread_mutex_lock(&T.lock);
	if (e->token.len && now < e->usable_until) {
		r = creds_secret_set(out, e->token.buf, e->token.len);
	} else if (T.started && !T.stopping && !e->fetching && e->failures == 0 && e->due > now) {
		/* None usable and none on the way: ask for one now. After a
		 * failure the backoff stands, whatever the requests. */
		e->due = now;
		pthread_cond_signal(&T.wake);
	}
	pthread_mutex_unlock(&T.lock);
	return r;
}

bool creds_tokens_wait_first(struct creds_tokens_entry *e, unsigned ms)
{
	uint64_t end = mono_ms() + ms;
	struct timespec ts;
	bool got;

	deadline_ts(end, &ts);
	pthread_mutex_lock(&T.lock);
	while (!e->tried && T.started && !T.stopping && mono_ms() < end) {
		if (pthread_cond_timedwait(&T.done, &T.lock, &ts) == ETIMEDOUT)
			break;
	}
	got = e->token.len > 0;
	pthread_mutex_unlock(&T.lock);
	return got;
}

void creds_tokens_stats(struct creds_tokens_stats *st)
{
	pthread_mutex_lock(&T.lock);
	st->fetch_ok = T.ok;
	st->fetch_failed = T.failed;
	st->entries = T.n;
	pthread_mutex_unlock(&T.lock);
}

void creds_tokens_set_fetch(creds_tokens_fetch_fn *fn, void *ctx)
{
	pthread_mutex_lock(&T.lock);
	T.fetch = fn ? fn : fetch_https;
	T.fetch_ctx = fn ? ctx : NULL;
	pthread_mutex_unlock(&T.lock);
}

/* ---- the HTTPS fetch ------------------------------------------------------ */

/* Waits for @events on @fd until @deadline; -ECANCELED once @cancel_fd
 * is readable (stopping). */
static int wait_io(int fd, short events, uint64_t deadline, int cancel_fd)
{
	struct pollfd p[2] = { { .fd = fd, .events = events },
			       { .fd = cancel_fd, .events = POLLIN } };

	for (;;) {
		uint64_t now = mono_ms();
		int n;

		if (now >= deadline)
			return -ETIMEDOUT;
		n = poll(p, 2, (int)(deadline - now > INT_MAX ? INT_MAX : deadline - now));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (p[1].revents)
			return -ECANCELED;
		if (p[0].revents)
			return 0;
	}
}

struct lookup {
	struct loop *loop; /* the fetcher's */
	struct timer tick;
	bool done;
	int status;
	struct sl_addr addrs[RESOLVE_MAX_ADDRS];
	size_t n;
};

static void on_resolved(struct resolve_req *req, int status, const struct sl_addr *addrs, size_t n,
			void *arg)
{
	struct lookup *lk = arg;

	(void)req;
	lk->done = true;
	lk->status = status;
	lk->n = status == 0 ? (n > RESOLVE_MAX_ADDRS ? RESOLVE_MAX_ADDRS : n) : 0;
	if (lk->n)
		memcpy(lk->addrs, addrs, lk->n * sizeof(*addrs));
	loop_stop(lk->loop);
}

static void on_tick(struct timer *t)
{
	loop_stop(container_of(t, struct lookup, tick)->loop);
}

/* A blocking lookup on fetcher @f's own loop, bounded by @deadline. */
static int resolve_host(struct fetcher *f, const char *host, struct lookup *lk, uint64_t deadline)
{
	struct resolve_req req;
	int r;

	memset(lk, 0, sizeof(*lk));
	lk->loop = f->loop;
	lk->tick.cb = on_tick;
	if (!f->res)
		return -ENOSYS;
	resolve_req_init(&req);
	r = resolver_lookup(f->res, host, &req, on_resolved, lk);
	if (r < 0)
		return r;
	while (!lk->done) {
		uint64_t now = mono_ms();
		bool stopping;

		pthread_mutex_lock(&T.lock);
		stopping = T.stopping;
		pthread_mutex_unlock(&T.lock);
		if (now >= deadline || stopping) {
			resolver_cancel(f->res, &req);
			loop_timer_cancel(f->loop, &lk->tick);
			return stopping ? -ECANCELED : -ETIMEDOUT;
		}
		/* Ticks, so that the deadline and a stop are seen. */
		loop_timer_arm(f->loop, &lk->tick, deadline - now < 200 ? deadline - now : 200);
		loop_run(f->loop);
	}
	loop_timer_cancel(f->loop, &lk->tick);
	return lk->status < 0 ? lk->status : 0;
}

static int tcp_connect(const struct sl_addr *a, uint16_t port, uint64_t deadline, int cancel_fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = (socklen_t)addr_to_sockaddr(a, port, &ss);
	int fd, r, soerr = 0;
	socklen_t el = sizeof(soerr);

	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, sl) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		r = -errno;
		goto fail;
	}
	r = wait_io(fd, POLLOUT, deadline, cancel_fd);
	if (r < 0)
		goto fail;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el) < 0) {
		r = -errno;
		goto fail;
	}
	if (soerr) {
		r = -soerr;
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return r;
}

/* After an SSL call returned @ret <= 0: waits as it asks; 0 to try again. */
static int ssl_wait(SSL *ssl, int ret, int fd, uint64_t deadline, int cancel_fd)
{
	switch (SSL_get_error(ssl, ret)) {
	case SSL_ERROR_WANT_READ:
		return wait_io(fd, POLLIN, deadline, cancel_fd);
	case SSL_ERROR_WANT_WRITE:
		return wait_io(fd, POLLOUT, deadline, cancel_fd);
	case SSL_ERROR_ZERO_RETURN:
		return -ENODATA;
	case SSL_ERROR_SYSCALL:
		/* An EOF without close_notify (OpenSSL 1.1), or a socket error. */
		if (ERR_peek_error())
			return -EPROTO;
		return errno ? -errno : -ENODATA;
	default:
		/* OpenSSL 3 reports an EOF without close_notify here. */
		if (ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
			return -ENODATA;
		return -EPROTO;
	}
}

long creds_tokens_dechunk(char *buf, size_t len)
{
	size_t i = 0, o = 0;

	for (;;) {
		size_t size = 0, digits = 0;
		const char *eol;

		while (i < len) {
			char ch = buf[i];
			int v = ch >= '0' && ch <= '9'	 ? ch - '0'
				: ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
				: ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
							 : -1;

			if (v < 0)
				break;
			if (++digits > 8)
				return -EBADMSG;
			size = size * 16 + (size_t)v;
			i++;
		}
		if (i == len)
			return -EAGAIN;
		if (digits == 0)
			return -EBADMSG;
		/* Extensions (";name=value") run to the end of the line. */
		if (buf[i] != '\r' && buf[i] != ';' && buf[i] != ' ' && buf[i] != '\t')
			return -EBADMSG;
		eol = memchr(buf + i, '\n', len - i);
		if (!eol)
			return -EAGAIN;
		if (eol == buf + i || eol[-1] != '\r')
			return -EBADMSG;
		i = (size_t)(eol - buf) + 1;
		if (size == 0) {
			/* Trailer lines, then an empty line. */
			for (;;) {
				eol = memchr(buf + i, '\n', len - i);
				if (!eol)
					return -EAGAIN;
				if (eol == buf + i || eol[-1] != '\r')
					return -EBADMSG;
				if (eol == buf + i + 1)
					return o > LONG_MAX ? -EBADMSG : (long)o;
				i = (size_t)(eol - buf) + 1;
			}
		}
		if (len - i < size + 2)
			return -EAGAIN;
		if (buf[i + size] != '\r' || buf[i + size + 1] != '\n')
			return -EBADMSG;
		memmove(buf + o, buf + i, size);
		o += size;
		i += size + 2;
	}
}

static const char *parse_error(int r)
{
	switch (r) {
	case -EACCES:
		return "the endpoint answered an OAuth2 error";
	case -ERANGE:
		return "expires_in out of range";
	case -EPROTO:
		return "token_type is not bearer";
	case -ENOMEM:
		return "out of memory";
	default:
		return "malformed token response";
	}
}

/* Reads the whole answer into @buf (CREDS_TOKENS_RESPONSE_MAX); sets the head. */
static int read_answer(SSL *ssl, int fd, uint64_t deadline, int cancel_fd, char *buf, size_t *got,
		       struct http_response *resp, size_t *head_len, struct sl_err *err)
{
	int r;

	*got = 0;
	*head_len = 0;
	for (;;) {
		int k;

		if (*got == CREDS_TOKENS_RESPONSE_MAX) {
			sl_err_set(err, 0, "answer larger than %d bytes",
				   CREDS_TOKENS_RESPONSE_MAX);
			return -EFBIG;
		}
		errno = 0; /* ssl_wait() tells an EOF from a socket error by it */
		k = SSL_read(ssl, buf + *got, (int)(CREDS_TOKENS_RESPONSE_MAX - *got));
		if (k > 0) {
			*got += (size_t)k;
		} else {
			r = ssl_wait(ssl, k, fd, deadline, cancel_fd);
			if (r == -ENODATA)
				break; /* the server closed (Connection: close) */
			if (r == -ETIMEDOUT)
				return sl_err_set(err, r, "reading the answer: timed out");
			if (r < 0)
				return sl_err_sys(err, r, "reading the answer");
			continue;
		}
		if (!*head_len) {
			r = http_parse_response(buf, *got, CREDS_TOKENS_HEAD_MAX, false, resp);
			if (r < 0) {
				sl_err_set(err, 0, "bad HTTP answer (%s)",
					   resp->error ? resp->error : "malformed");
				return -EBADMSG;
			}
			*head_len = (size_t)r;
		}
		/* A sized body ends without waiting for the close. */
		if (*head_len && resp->has_content_length && !resp->chunked &&
		    *got - *head_len >= resp->content_length)
			break;
	}
	if (!*head_len) {
		sl_err_set(err, 0, "the connection closed before an answer");
		return -EBADMSG;
	}
	return 0;
}

/* @ctx: the struct fetcher of the thread it runs on. */
static int fetch_https(void *ctx, const struct creds_tokens_request *rq, struct creds_secret *token,
		       uint64_t *expires_in, struct sl_err *err)
{
	struct fetcher *f = ctx;
	uint64_t deadline = mono_ms() + T.fetch_ms;
	struct http_response *resp = NULL;
	struct lookup lk;
	char *req = NULL, *ans = NULL, *form = NULL;
	const char *body;
	size_t bcap, rcap = 0, got = 0, hl = 0, blen;
	int fd = -1, r, i, n, k, len;
	SSL *ssl = NULL;
	char hostport[300];

	/* Where: an address literal as is, a name through the broker's
	 * upstream resolvers. */
	memset(&lk, 0, sizeof(lk));
	if (addr_parse(rq->host, &lk.addrs[0]) == 0) {
		lk.n = 1;
	} else {
		r = resolve_host(f, rq->host, &lk, deadline);
		/* -ENOENT is the name's absence, no failed call: errno 0. */
		if (r == -ENOENT)
			sl_err_set(err, 0, "cannot resolve %s: no such name", rq->host);
		else if (r == -ETIMEDOUT)
			sl_err_set(err, r, "cannot resolve %s: timed out", rq->host);
		else if (r < 0)
			sl_err_sys(err, r, "cannot resolve %s", rq->host);
		if (r < 0)
			return r;
	}

	/* What: the form body after the head, in one buffer to wipe. */
	bcap = 3 * (rq->client_secret->len + strlen(rq->client_id)) + 256;
	for (i = 0; (size_t)i < rq->n_scopes; i++)
		bcap += 3 * strlen(rq->scopes[i]) + 3;
	rcap = bcap + strlen(rq->path) + 1024;
	req = malloc(rcap);
	form = malloc(bcap);
	resp = calloc(1, sizeof(*resp));
	ans = malloc(CREDS_TOKENS_RESPONSE_MAX);
	if (!req || !form || !resp || !ans) {
		r = sl_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	n = creds_oauth2_request_body(rq->client_id, rq->client_secret, rq->scopes, rq->n_scopes,
				      form, bcap);
	if (n < 0) {
		char why[64];

		/* Its own limits (the sizes), no failed call: errno 0. */
		sl_err_set(err, 0, "cannot form the request (%s)",
			   strerror_r(-n, why, sizeof(why)));
		r = n;
		goto out;
	}
	if (strchr(rq->host, ':'))
		snprintf(hostport, sizeof(hostport), "[%s]", rq->host);
	else
		snprintf(hostport, sizeof(hostport), "%s", rq->host);
	if (rq->port != 443)
		snprintf(hostport + strlen(hostport), sizeof(hostport) - strlen(hostport), ":%u",
			 rq->port);
	len = snprintf(req, rcap,
		       "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sluiced\r\n"
		       "Accept: application/json\r\n"
		       "Content-Type: application/x-www-form-urlencoded\r\n"
		       "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
		       rq->path, hostport, n, form);
	OPENSSL_cleanse(form, bcap);
	if (len < 0 || (size_t)len >= rcap) {
		sl_err_set(err, 0, "request too large");
		r = -ENOSPC;
		goto out;
	}

	/* Connect: each address in turn, each within connect_timeout. */
	r = -EHOSTUNREACH;
	for (i = 0; (size_t)i < lk.n && i < CREDS_TOKENS_MAX_TRIES && fd < 0; i++) {
		uint64_t cd = mono_ms() + T.connect_ms;

		fd = tcp_connect(&lk.addrs[i], rq->port, cd < deadline ? cd : deadline,
				 rq->cancel_fd);
		if (fd < 0)
			r = fd;
		if (r == -ECANCELED)
			break;
	}
	if (fd < 0) {
		char a[ADDR_STRLEN];

		addr_format(&lk.addrs[0], a, sizeof(a));
		if (r == -ETIMEDOUT)
			sl_err_set(err, r, "cannot connect to %s port %u: timed out", a, rq->port);
		else
			sl_err_sys(err, r, "cannot connect to %s port %u", a, rq->port);
		goto out;
	}

	/* TLS, verified: the chain against upstream_ca or the system store,
	 * the name (or address) against the certificate. */
	ssl = SSL_new(T.ctx);
	if (!ssl || tls_upstream_prepare(ssl, rq->host) < 0 || SSL_set_fd(ssl, fd) != 1) {
		r = sl_err_set(err, ENOMEM, "cannot set up TLS");
		goto out;
	}
	while ((k = SSL_connect(ssl)) != 1) {
		r = ssl_wait(ssl, k, fd, deadline, rq->cancel_fd);
		if (r < 0) {
			long v = SSL_get_verify_result(ssl);

			if (v != X509_V_OK)
				sl_err_set(err, 0, "TLS: certificate not trusted: %s",
					   X509_verify_cert_error_string(v));
			else
				sl_err_set(err, r == -ETIMEDOUT ? ETIMEDOUT : 0,
					   "TLS handshake failed%s",
					   r == -ETIMEDOUT ? ": timed out" : "");
			r = -EPROTO;
			goto out;
		}
	}
	for (i = 0; i < len;) {
		k = SSL_write(ssl, req + i, len - i);
		if (k > 0) {
			i += k;
			continue;
		}
		r = ssl_wait(ssl, k, fd, deadline, rq->cancel_fd);
		if (r < 0) {
			sl_err_set(err, r, "sending the request: %s",
				   r == -ETIMEDOUT ? "timed out" : "connection lost");
			goto out;
		}
	}
	OPENSSL_cleanse(req, rcap);

	r = read_answer(ssl, fd, deadline, rq->cancel_fd, ans, &got, resp, &hl, err);
	if (r < 0)
		goto out;
	body = ans + hl;
	blen = got - hl;
	if (resp->chunked) {
		long d = creds_tokens_dechunk(ans + hl, blen);

		if (d < 0) {
			sl_err_set(err, 0, "bad chunked answer");
			r = -EBADMSG;
			goto out;
		}
		blen = (size_t)d;
	} else if (resp->has_content_length) {
		if (blen < resp->content_length) {
			sl_err_set(err, 0, "answer cut short");
			r = -EBADMSG;
			goto out;
		}
		blen = (size_t)resp->content_length;
	}
	if (resp->status != 200) {
		sl_err_set(err, 0, "HTTP %u", resp->status);
		r = -EPROTO;
		goto out;
	}
	r = creds_oauth2_parse_response(body, blen, token, expires_in);
	if (r < 0)
		sl_err_set(err, r == -ENOMEM ? ENOMEM : 0, "%s", parse_error(r));
out:
	if (ssl)
		SSL_free(ssl);
	if (fd >= 0)
		close(fd);
	ERR_clear_error();
	if (req) {
		OPENSSL_cleanse(req, rcap);
		free(req);
	}
	if (ans) {
		OPENSSL_cleanse(ans, CREDS_TOKENS_RESPONSE_MAX);
		free(ans);
	}
	if (form) {
		OPENSSL_cleanse(form, bcap);
		free(form);
	}
	free(resp);
	return r;
}

/* ---- the fetcher threads ------------------------------------------------- */

/*
 * The fetchers may start while the broker still holds its start-up
 * capabilities (a restore at start-up), and capabilities are per thread:
 * each drops them all itself, as the main thread does before the workers
 * start. None needs any: they connect out and read nothing but their
 * sockets.
 */
static void drop_own_caps(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { { 0 } };
	int cap;

	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	for (cap = 0; cap <= 63; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL && errno != EPERM)
			break;
	}
	if (syscall(SYS_capset, &hdr, data) < 0)
		log_warn("tokens: cannot drop capabilities: %s", strerror(errno));
}

/* With the lock held: the earliest entry no thread is fetching. */
static struct creds_tokens_entry *next_due(void)
{
	struct creds_tokens_entry *e, *best = NULL;

	for (e = T.head; e; e = e->next) {
		if (!e->fetching && (!best || e->due < best->due))
			best = e;
	}
	return best;
}

/* One thread of the pool: one fetch at a time, the earliest due first. */
static void *fetcher(void *arg)
{
	struct fetcher *f = arg;
	struct sl_err rerr = { 0 }, err;
	bool https;

	drop_own_caps();
	pthread_mutex_lock(&T.lock);
	https = T.fetch == fetch_https;
	pthread_mutex_unlock(&T.lock);
	if (https) {
		f->res = resolver_new(f->loop, T.resolvers, 16, &rerr);
		resolver_set_deadline(f->res, T.resolve_ms);
		/* The same configuration for every thread: said once. */
		if (!f->res && f->id == 0)
			log_err("tokens: no resolver (%s): token_url names cannot be resolved",
				sl_err_msg(&rerr));
	}
	pthread_mutex_lock(&T.lock);
	while (!T.stopping) {
		struct creds_tokens_entry *e = next_due();
		struct creds_secret cs = { 0 }, tok = { 0 };
		struct creds_tokens_request rq;
		uint64_t now = mono_ms(), exp = 0, wait_s;
		char msg[600], host[256], name[CREDS_NAME_MAX + 1];
		creds_tokens_fetch_fn *fn;
		void *fn_ctx;
		uint32_t jitter = 0;
		bool ok;
		int r;

		if (!e || e->due > now) {
			struct timespec ts;

			if (!e) {
				pthread_cond_wait(&T.wake, &T.lock);
			} else {
				deadline_ts(e->due, &ts);
				pthread_cond_timedwait(&T.wake, &T.lock, &ts);
			}
			continue;
		}
		/* Ours: no other thread takes it, nor frees it, until we are done. */
		e->fetching = true;
		e->refs++;
		r = creds_secret_set(&cs, e->client_secret.buf, e->client_secret.len);
		snprintf(host, sizeof(host), "%s", e->host);
		/* A copy: creds_tokens_get() renames the entry under the lock. */
		snprintf(name, sizeof(name), "%s", e->cred_name);
		rq = (struct creds_tokens_request){
			.cred_name = name,
			.host = e->host,
			.port = e->port,
			.path = e->path,
			.client_id = e->client_id,
			.scopes = (const char *const *)e->scopes,
			.n_scopes = e->n_scopes,
			.client_secret = &cs,
			.cancel_fd = T.stop_fd,
		};
		/* The function and its argument as one pair (creds_tokens_set_fetch()). */
		fn = T.fetch;
		fn_ctx = fn == fetch_https ? f : T.fetch_ctx;
		pthread_mutex_unlock(&T.lock);

		sl_err_clear(&err);
		if (r == 0)
			r = fn(fn_ctx, &rq, &tok, &exp, &err);
		else
			sl_err_set(&err, ENOMEM, "out of memory");
		creds_secret_free(&cs);
		RAND_bytes((unsigned char *)&jitter, sizeof(jitter));

		pthread_mutex_lock(&T.lock);
		now = mono_ms();
		ok = r == 0 && tok.len > 0;
		if (ok) {
			creds_secret_free(&e->token);
			e->token = tok;
			tok = (struct creds_secret){ 0 };
			e->usable_until = now + creds_tokens_usable_ms(exp);
			e->due = now + creds_tokens_refresh_ms(exp, jitter);
			e->failures = 0;
			T.ok++;
			wait_s = (e->due - now + 999) / 1000;
			snprintf(
				msg, sizeof(msg),
				"tokens: credential `%s`: token from %s (expires in %llu s; refresh in %llu s)",
				name, host,
				(unsigned long long)(exp ? exp : CREDS_TOKENS_DEFAULT_EXPIRES_SEC),
				(unsigned long long)wait_s);
		} else {
			if (r == 0)
				sl_err_set(&err, 0, "empty token");
			e->failures++;
			e->due = now + creds_tokens_backoff_ms(e->failures);
			T.failed++;
			wait_s = (e->due - now + 999) / 1000;
			snprintf(
				msg, sizeof(msg),
				"tokens: credential `%s`: token from %s failed: %s; retry in %llu s%s",
				name, host, sl_err_msg(&err), (unsigned long long)wait_s,
				e->token.len && now < e->usable_until ? " (the current token stays)"
								      : "");
		}
		creds_secret_free(&tok);
		e->fetching = false;
		e->tried = true;
		pthread_cond_broadcast(&T.done);
		entry_put_locked(e);
		if (r == -ECANCELED && T.stopping)
			continue; /* not a failure of the endpoint's */
		pthread_mutex_unlock(&T.lock);
		if (ok)
			log_info("%s", msg);
		else
			log_warn("%s", msg);
		pthread_mutex_lock(&T.lock);
	}
	pthread_mutex_unlock(&T.lock);
	resolver_free(f->res);
	f->res = NULL;
	return NULL;
}

/*
 * Without the lock, T.stopping set: ends every fetch in flight at once
 * (the stop eventfd, polled by every fetch; each thread's loop, for a
 * lookup in flight) and joins every thread.
 */
static void fetchers_end(void)
{
	uint64_t one = 1;
	unsigned i;

	if (write(T.stop_fd, &one, sizeof(one)) < 0)
		log_warn("tokens: cannot signal the fetchers: %s", strerror(errno));
	for (i = 0; i < T.n_fetchers; i++)
		loop_stop(T.fetchers[i].loop);
	for (i = 0; i < T.n_fetchers; i++)
		pthread_join(T.fetchers[i].thread, NULL);
	T.n_fetchers = 0;
}

/* With the lock held, the threads joined: frees what creds_tokens_start() made. */
static void fetchers_free(void)
{
	unsigned i;

	SSL_CTX_free(T.ctx);
	T.ctx = NULL;
	if (T.stop_fd >= 0)
		close(T.stop_fd);
	T.stop_fd = -1;
	for (i = 0; i < CREDS_TOKENS_FETCHERS; i++) {
		loop_free(T.fetchers[i].loop);
		T.fetchers[i].loop = NULL;
	}
}

int creds_tokens_start(const struct creds_tokens_config *cfg, struct sl_err *err)
{
	sigset_t all, old;
	unsigned i;
	int r = 0;

	pthread_once(&conds_once, conds_init);
	pthread_mutex_lock(&T.lock);
	if (T.started) {
		pthread_mutex_unlock(&T.lock);
		return 0;
	}
	snprintf(T.ca, sizeof(T.ca), "%s", cfg->upstream_ca ? cfg->upstream_ca : "");
	snprintf(T.resolvers, sizeof(T.resolvers), "%s", cfg->resolvers ? cfg->resolvers : "");
	T.connect_ms = cfg->connect_timeout_ms ? cfg->connect_timeout_ms : 10000;
	T.resolve_ms = cfg->resolve_timeout_ms;
	T.fetch_ms = cfg->fetch_timeout_ms && cfg->fetch_timeout_ms < CREDS_TOKENS_FETCH_MAX_MS
			     ? cfg->fetch_timeout_ms
			     : CREDS_TOKENS_FETCH_MAX_MS;
	if (T.connect_ms > T.fetch_ms)
		T.connect_ms = T.fetch_ms;
	T.ctx = tls_upstream_ctx(T.ca, err);
	if (!T.ctx) {
		r = -EINVAL;
		goto fail;
	}
	T.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (T.stop_fd < 0) {
		r = sl_err_sys(err, errno, "token fetcher");
		goto fail;
	}
	for (i = 0; i < CREDS_TOKENS_FETCHERS; i++) {
		T.fetchers[i].id = i;
		T.fetchers[i].res = NULL;
		T.fetchers[i].loop = loop_new();
		if (!T.fetchers[i].loop) {
			r = sl_err_sys(err, ENOMEM, "token fetcher");
			goto fail;
		}
	}
	T.stopping = false;
	/* No signal for these threads: the main thread takes them by signalfd.
	 * They wait for the lock, held until all have started. SIGSYS stays
	 * open: it is how a call outside the seccomp allowlist is refused
	 * (isolation.c), and a thread that blocks it is killed instead. */
	sigfillset(&all);
	sigdelset(&all, SIGSYS);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < CREDS_TOKENS_FETCHERS && r == 0; i++) {
		r = -pthread_create(&T.fetchers[i].thread, NULL, fetcher, &T.fetchers[i]);
		if (r == 0)
			T.n_fetchers++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		sl_err_sys(err, r, "cannot start the token fetchers");
		/* All or none: end those that started. */
		T.stopping = true;
		pthread_mutex_unlock(&T.lock);
		fetchers_end();
		pthread_mutex_lock(&T.lock);
		T.stopping = false;
		goto fail;
	}
	T.started = true;
	pthread_mutex_unlock(&T.lock);
	return 0;
fail:
	fetchers_free();
	pthread_mutex_unlock(&T.lock);
	return r;
}

void creds_tokens_stop(void)
{
	struct creds_tokens_entry *e;

	pthread_mutex_lock(&T.lock);
	if (!T.started || T.stopping) {
		pthread_mutex_unlock(&T.lock);
		return;
	}
	T.stopping = true;
	pthread_cond_broadcast(&T.wake);
	pthread_cond_broadcast(&T.done);
	pthread_mutex_unlock(&T.lock);
	fetchers_end();

	pthread_mutex_lock(&T.lock);
	for (e = T.head; e; e = e->next) {
		creds_secret_free(&e->token);
		e->usable_until = 0;
		e->failures = 0;
		e->due = 0;
		e->tried = false;
	}
	fetchers_free();
	T.started = false;
	T.stopping = false;
	pthread_mutex_unlock(&T.lock);
}
