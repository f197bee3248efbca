// SPDX-License-Identifier: MIT
/* Unit tests for broker/creds/tokens.c without a network: the refresh schedule,
 * the chunked-body decoder, and the token cache and its fetcher threads
 * with a fetch function of the test's own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "broker/creds/creds_internal.h"
#include "common/err.h"
#include "policy/policy.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the schedule ---------------------------------------------------------- */

static void test_schedule(void **state)
{
	static const uint64_t lives[] = { 1,
					  2,
					  3,
					  10,
					  60,
					  299,
					  300,
					  3600,
					  86400,
					  CREDS_OAUTH2_EXPIRES_MAX,
					  CREDS_OAUTH2_EXPIRES_MAX + 1 };
	static const uint32_t jitters[] = { 0, 1, 500, 1000, 1001, UINT32_MAX };
	size_t i, j;

	(void)state;
	/* 2 s: handed out 1.8 s, refreshed between 1.6 and 1.7 s. */
	assert_int_equal(creds_tokens_usable_ms(2), 1800);
	assert_int_equal(creds_tokens_refresh_ms(2, 0), 1600);
	assert_int_equal(creds_tokens_refresh_ms(2, 1000), 1700);
	/* No expires_in: five minutes. */
	assert_int_equal(creds_tokens_usable_ms(0),
			 creds_tokens_usable_ms(CREDS_TOKENS_DEFAULT_EXPIRES_SEC));
	assert_int_equal(creds_tokens_usable_ms(0), 270000);
	assert_int_equal(creds_tokens_refresh_ms(0, 0), 240000);
	/* An hour: handed out until 30 s before the end. */
	assert_int_equal(creds_tokens_usable_ms(3600), 3570000);
	assert_int_equal(creds_tokens_refresh_ms(3600, 0), 2880000);
	assert_int_equal(creds_tokens_refresh_ms(3600, 1000), 3060000);
	for (i = 0; i < ARRAY_SIZE(lives); i++) {
		uint64_t life =
			lives[i] > CREDS_OAUTH2_EXPIRES_MAX ? CREDS_OAUTH2_EXPIRES_MAX : lives[i];

		assert_true(creds_tokens_usable_ms(lives[i]) <= life * 1000);
		assert_true(creds_tokens_usable_ms(lives[i]) >= life * 900);
		for (j = 0; j < ARRAY_SIZE(jitters); j++) {
			uint64_t r = creds_tokens_refresh_ms(lives[i], jitters[j]);

			/* Refreshed before it stops being handed out, never at once. */
			assert_true(r > 0);
			assert_true(r < creds_tokens_usable_ms(lives[i]));
			/* At 80-85% of the life, or 10 s before handing out
			 * stops when that comes first. */
			assert_true(r <= life * 850);
			assert_true(r >= life * 800 ||
				    r == creds_tokens_usable_ms(lives[i]) - 10000);
		}
	}

	assert_int_equal(creds_tokens_backoff_ms(0), 1000);
	assert_int_equal(creds_tokens_backoff_ms(1), 1000);
	assert_int_equal(creds_tokens_backoff_ms(2), 2000);
	assert_int_equal(creds_tokens_backoff_ms(3), 4000);
	assert_int_equal(creds_tokens_backoff_ms(6), 32000);
	assert_int_equal(creds_tokens_backoff_ms(7), CREDS_TOKENS_BACKOFF_MAX_MS);
	assert_int_equal(creds_tokens_backoff_ms(1000000), CREDS_TOKENS_BACKOFF_MAX_MS);
}

/* ---- chunked bodies ----------------------------------------------------------- */

static void test_dechunk(void **state)
{
	static const struct {
		const char *in;
		long want; /* length, or -EAGAIN / -EBADMSG */
		const char *out;
	} rows[] = {
		{ "5\r\nhello\r\n0\r\n\r\n", 5, "hello" },
		{ "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", 11, "hello world" },
		{ "A\r\n0123456789\r\n0\r\n\r\n", 10, "0123456789" },
		{ "a;name=value\r\n0123456789\r\n0\r\n\r\n", 10, "0123456789" },
		{ "5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n", 5, "hello" },
		{ "0\r\n\r\n", 0, "" },
		{ "", -EAGAIN, NULL },
		{ "5", -EAGAIN, NULL },
		{ "5\r\n", -EAGAIN, NULL },
		{ "5\r\nhel", -EAGAIN, NULL },
		{ "5\r\nhello\r", -EAGAIN, NULL },
		{ "5\r\nhello\r\n", -EAGAIN, NULL },
		{ "5\r\nhello\r\n0\r\n", -EAGAIN, NULL },
		{ "5\r\nhello\r\n0\r\nX: 1\r\n", -EAGAIN, NULL },
		{ "g\r\nhello\r\n0\r\n\r\n", -EBADMSG, NULL },
		{ "\r\nhello\r\n0\r\n\r\n", -EBADMSG, NULL },
		{ "5\nhello\r\n0\r\n\r\n", -EBADMSG, NULL },
		{ "5\r\nhelloXX0\r\n\r\n", -EBADMSG, NULL },
		{ "5\r\nhello\r\n0\r\n\n", -EBADMSG, NULL },
		{ "123456789\r\n", -EBADMSG, NULL },
		{ "-5\r\nhello\r\n0\r\n\r\n", -EBADMSG, NULL },
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(rows); i++) {
		char buf[128];
		size_t len = strlen(rows[i].in);
		long r;

		memcpy(buf, rows[i].in, len);
		r = creds_tokens_dechunk(buf, len);
		if (r != rows[i].want)
			print_error("row %zu: want %ld, got %ld\n", i, rows[i].want, r);
		assert_int_equal(r, rows[i].want);
		if (r >= 0)
			assert_memory_equal(buf, rows[i].out, (size_t)r);
	}
}

/* ---- the cache, with a fetch of the test's own ------------------------------- */

/*
 * A fetch for a host whose name starts with "hang" blocks, as for an
 * endpoint that accepts and never answers: until the test releases it
 * (a 1 written to release_fd, a semaphore: one blocked fetch each), until
 * the fetch is cancelled (rq->cancel_fd readable: creds_tokens_stop()), or for
 * FAKE_BLOCK_MAX_MS at the most. It then answers as any other.
 */
#define FAKE_BLOCK_MAX_MS 10000

struct fake {
	pthread_mutex_t lock;
	unsigned calls;
	int fail;	     /* the answer: 0, or a negative errno */
	bool empty;	     /* answer an empty token */
	uint64_t expires_in; /* in the answer */
	char last_secret[64];
	char last_host[64];
	char last_scopes[64];
	int release_fd;	      /* eventfd (semaphore) */
	unsigned blocked;     /* fetches blocked now */
	unsigned block_calls; /* fetches that blocked, in all */
	unsigned cancelled;   /* blocked fetches ended by rq->cancel_fd */
	unsigned timed_out;   /* blocked fetches ended by FAKE_BLOCK_MAX_MS */
};

static struct fake fake = { .lock = PTHREAD_MUTEX_INITIALIZER, .release_fd = -1 };

static uint64_t now_ms(void);

/* 0 when released; -ECANCELED or -ETIMEDOUT. */
static int fake_block(struct fake *f, int cancel_fd)
{
	uint64_t end = now_ms() + FAKE_BLOCK_MAX_MS;
	int r = -ETIMEDOUT;

	pthread_mutex_lock(&f->lock);
	f->blocked++;
	f->block_calls++;
	pthread_mutex_unlock(&f->lock);
	for (;;) {
		struct pollfd p[2] = { { .fd = f->release_fd, .events = POLLIN },
				       { .fd = cancel_fd, .events = POLLIN } };
		uint64_t now = now_ms();
		uint64_t one;

		if (now >= end)
			break;
		if (poll(p, 2, (int)(end - now)) < 0 && errno != EINTR)
			break;
		/* Like fetch_https: the cancel fd is polled, never read. */
		if (p[1].revents) {
			r = -ECANCELED;
			break;
		}
		/* Another blocked fetch may have taken the release: poll on. */
		if (p[0].revents && read(f->release_fd, &one, sizeof(one)) == sizeof(one)) {
			r = 0;
			break;
		}
	}
	pthread_mutex_lock(&f->lock);
	f->blocked--;
	if (r == -ECANCELED)
		f->cancelled++;
	else if (r == -ETIMEDOUT)
		f->timed_out++;
	pthread_mutex_unlock(&f->lock);
	return r;
}

static int fake_fetch(void *ctx, const struct creds_tokens_request *rq, struct creds_secret *token,
		      uint64_t *expires_in, struct sl_err *err)
{
	struct fake *f = ctx;
	char tok[64];
	size_t i;
	int r;

	if (strncmp(rq->host, "hang", 4) == 0) {
		r = fake_block(f, rq->cancel_fd);
		if (r < 0) {
			sl_err_set(err, r, "fake: %s", r == -ECANCELED ? "cancelled" : "timed out");
			return r;
		}
	}
	pthread_mutex_lock(&f->lock);
	f->calls++;
	snprintf(f->last_secret, sizeof(f->last_secret), "%.*s", (int)rq->client_secret->len,
		 (const char *)rq->client_secret->buf);
	snprintf(f->last_host, sizeof(f->last_host), "%s:%u%s", rq->host, rq->port, rq->path);
	f->last_scopes[0] = '\0';
	for (i = 0; i < rq->n_scopes; i++)
		snprintf(f->last_scopes + strlen(f->last_scopes),
			 sizeof(f->last_scopes) - strlen(f->last_scopes), "%s%s", i ? " " : "",
			 rq->scopes[i]);
	snprintf(tok, sizeof(tok), "token-%u", f->calls);
	r = f->fail;
	*expires_in = f->expires_in;
	if (r == 0 && f->empty) {
		pthread_mutex_unlock(&f->lock);
		return 0; /* token left empty */
	}
	pthread_mutex_unlock(&f->lock);
	if (r < 0) {
		sl_err_set(err, r, "fake failure");
		return r;
	}
	return creds_secret_set(token, tok, strlen(tok));
}

static unsigned calls(void)
{
	unsigned n;

	pthread_mutex_lock(&fake.lock);
	n = fake.calls;
	pthread_mutex_unlock(&fake.lock);
	return n;
}

/* A field of the fake, read under its lock. */
static unsigned fake_get(const unsigned *field)
{
	unsigned n;

	pthread_mutex_lock(&fake.lock);
	n = *field;
	pthread_mutex_unlock(&fake.lock);
	return n;
}

struct fake_counts {
	unsigned calls, blocked, cancelled, timed_out;
};

/* The counters, copied under the lock: assert on the copy (a failed
 * assertion jumps out, and must not leave the lock held). */
static struct fake_counts fake_snapshot(void)
{
	struct fake_counts c;

	pthread_mutex_lock(&fake.lock);
	c = (struct fake_counts){ .calls = fake.calls,
				  .blocked = fake.blocked,
				  .cancelled = fake.cancelled,
				  .timed_out = fake.timed_out };
	pthread_mutex_unlock(&fake.lock);
	return c;
}

static void fake_release(unsigned n)
{
	uint64_t v = n;

	assert_int_equal(write(fake.release_fd, &v, sizeof(v)), sizeof(v));
}

static void fake_set(int fail, uint64_t expires_in)
{
	pthread_mutex_lock(&fake.lock);
	fake.fail = fail;
	fake.expires_in = expires_in;
	pthread_mutex_unlock(&fake.lock);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static char *scopes_rw[] = { "read", "write" };
static char *scopes_r[] = { "read" };

/* Waits (5 s at most) until @n fetches are blocked; the number then. */
static unsigned wait_blocked(unsigned n)
{
	uint64_t end = now_ms() + 5000;

	while (fake_get(&fake.blocked) < n && now_ms() < end)
		sleep_ms(1);
	return fake_get(&fake.blocked);
}

static struct policy_credential cred(const char *name, char **scopes, size_t n)
{
	return (struct policy_credential){
		.name = (char *)name,
		.source_kind = POLICY_SOURCE_OAUTH2,
		.source = "/unused",
		.oauth2 = { .token_url = "https://auth.example/token",
			    .token_host = "auth.example",
			    .token_port = 443,
			    .token_path = "/token",
			    .client_id = "id",
			    .scopes = scopes,
			    .n_scopes = n },
	};
}

/* Another endpoint: another entry (the fake blocks for "hang..." hosts). */
static struct policy_credential cred_at(const char *name, const char *host, char *url,
					size_t urlsize)
{
	struct policy_credential c = cred(name, scopes_r, 1);

	snprintf(url, urlsize, "https://%s/token", host);
	c.oauth2.token_url = url;
	c.oauth2.token_host = (char *)host;
	return c;
}

static int setup(void **state)
{
	static const struct creds_tokens_config cfg = { .resolvers = "" };
	struct sl_err err = { 0 };
	uint64_t v;

	(void)state;
	if (fake.release_fd < 0)
		fake.release_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
	if (fake.release_fd < 0)
		return -1;
	while (read(fake.release_fd, &v, sizeof(v)) == sizeof(v))
		; /* releases left by an earlier test */
	pthread_mutex_lock(&fake.lock);
	fake.calls = 0;
	fake.fail = 0;
	fake.empty = false;
	fake.expires_in = 3600;
	fake.block_calls = 0;
	fake.cancelled = 0;
	fake.timed_out = 0;
	pthread_mutex_unlock(&fake.lock);
	creds_tokens_set_fetch(fake_fetch, &fake);
	if (creds_tokens_start(&cfg, &err) < 0) {
		print_error("creds_tokens_start: %s\n", sl_err_msg(&err));
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	creds_tokens_stop();
	return 0;
}

static struct creds_secret secret(const char *s)
{
	struct creds_secret cs = { 0 };

	assert_int_equal(creds_secret_set(&cs, s, strlen(s)), 0);
	return cs;
}

/* Many requests, one fetch; the same key is one entry, another is another. */
static void test_fetched_once(void **state)
{
	struct policy_credential c = cred("a", scopes_rw, 2), c2 = cred("b", scopes_rw, 2),
				 c3 = cred("c", scopes_r, 1);
	struct creds_secret cs = secret("client-secret"), other = secret("another-secret"),
			    t = { 0 };
	struct creds_tokens_entry *e, *e2, *e3, *e4;
	struct creds_tokens_stats st;
	int i;

	(void)state;
	e = creds_tokens_get(&c, &cs);
	assert_non_null(e);
	assert_true(creds_tokens_wait_first(e, 2000));
	for (i = 0; i < 1000; i++) {
		assert_int_equal(creds_tokens_copy(e, &t), 0);
		assert_int_equal(t.len, 7);
		assert_memory_equal(t.buf, "token-1", 7);
		creds_secret_free(&t);
	}
	assert_int_equal(calls(), 1);
	pthread_mutex_lock(&fake.lock);
	assert_string_equal(fake.last_secret, "client-secret");
	assert_string_equal(fake.last_host, "auth.example:443/token");
	assert_string_equal(fake.last_scopes, "read write");
	pthread_mutex_unlock(&fake.lock);

	/* Another credential (another sandbox, a reload) with the same
	 * endpoint, client and scopes shares the entry and its token. */
	e2 = creds_tokens_get(&c2, &cs);
	assert_ptr_equal(e2, e);
	assert_true(creds_tokens_wait_first(e2, 10));
	assert_int_equal(creds_tokens_copy(e2, &t), 0);
	assert_memory_equal(t.buf, "token-1", 7);
	creds_secret_free(&t);
	assert_int_equal(calls(), 1);

	/* Other scopes: another token. */
	e3 = creds_tokens_get(&c3, &cs);
	assert_ptr_not_equal(e3, e);
	assert_true(creds_tokens_wait_first(e3, 2000));
	assert_int_equal(calls(), 2);
	creds_tokens_stats(&st);
	assert_int_equal(st.entries, 2);
	assert_true(st.fetch_ok >= 2);

	/* The same endpoint, client and scopes with another client secret
	 * (another tenant's policy, or a reload that read a rotated one): an
	 * entry and a fetch of its own, with its own secret; never the
	 * other's token, and the other's secret stays. */
	e4 = creds_tokens_get(&c2, &other);
	assert_ptr_not_equal(e4, e);
	assert_true(creds_tokens_wait_first(e4, 2000));
	assert_int_equal(calls(), 3);
	pthread_mutex_lock(&fake.lock);
	assert_string_equal(fake.last_secret, "another-secret");
	pthread_mutex_unlock(&fake.lock);
	assert_int_equal(creds_tokens_copy(e4, &t), 0);
	assert_false(t.len == 7 && memcmp(t.buf, "token-1", 7) == 0);
	creds_secret_free(&t);
	assert_int_equal(creds_tokens_copy(e, &t), 0);
	assert_memory_equal(t.buf, "token-1", 7);
	creds_secret_free(&t);
	creds_tokens_stats(&st);
	assert_int_equal(st.entries, 3);
	creds_tokens_put(e4);

	creds_tokens_put(e2);
	creds_tokens_stats(&st);
	assert_int_equal(st.entries, 2); /* e still holds it */
	creds_tokens_put(e);
	creds_tokens_put(e3);
	creds_tokens_stats(&st);
	assert_int_equal(st.entries, 0);
	creds_tokens_put(NULL);
	creds_secret_free(&cs);
	creds_secret_free(&other);
}

/* Short-lived tokens are refreshed before they stop being handed out. */
static void test_refreshed(void **state)
{
	struct policy_credential c = cred("a", scopes_rw, 2);
	struct creds_secret cs = secret("s1"), t = { 0 };
	struct creds_tokens_entry *e;
	uint64_t end;
	unsigned copies = 0, misses = 0;
	char first[16] = "", last[16] = "";

	(void)state;
	fake_set(0, 2);
	e = creds_tokens_get(&c, &cs);
	assert_non_null(e);
	assert_true(creds_tokens_wait_first(e, 2000));
	end = now_ms() + 2600;
	while (now_ms() < end) {
		if (creds_tokens_copy(e, &t) == 0) {
			snprintf(first[0] ? last : first, sizeof(first), "%.*s", (int)t.len,
				 (const char *)t.buf);
			copies++;
		} else {
			misses++;
		}
		creds_secret_free(&t);
		sleep_ms(5);
	}
	/* Fetched at 0 and refreshed at 1.6-1.7 s (and maybe a little later
	 * again if the machine is slow): never without a token. */
	assert_int_equal(misses, 0);
	assert_true(copies > 100);
	assert_true(calls() >= 2 && calls() <= 3);
	assert_string_equal(first, "token-1");
	assert_string_not_equal(last, "token-1");
	pthread_mutex_lock(&fake.lock);
	assert_string_equal(fake.last_secret, "s1");
	pthread_mutex_unlock(&fake.lock);
	creds_tokens_put(e);
	creds_secret_free(&cs);
}

/* A failing endpoint: no token, and requests do not make it hammered. */
static void test_failing_backs_off(void **state)
{
	struct policy_credential c = cred("a", scopes_rw, 2);
	struct creds_secret cs = secret("s"), t = { 0 };
	struct creds_tokens_entry *e;
	struct creds_tokens_stats st0, st;
	uint64_t end;

	(void)state;
	creds_tokens_stats(&st0); /* counters run since the first start */
	fake_set(-EIO, 3600);
	e = creds_tokens_get(&c, &cs);
	assert_non_null(e);
	assert_false(creds_tokens_wait_first(e, 2000));
	assert_int_equal(calls(), 1);
	/* 1.5 s of requests: attempts at 0 and 1 s only (the next at 3 s). */
	end = now_ms() + 1500;
	while (now_ms() < end) {
		assert_int_equal(creds_tokens_copy(e, &t), -EAGAIN);
		assert_null(t.buf);
		sleep_ms(1);
	}
	assert_true(calls() >= 1 && calls() <= 2);
	creds_tokens_stats(&st);
	assert_int_equal(st.fetch_ok - st0.fetch_ok, 0);
	assert_int_equal(st.fetch_failed - st0.fetch_failed, calls());

	/* An answer without a token is a failure too. */
	pthread_mutex_lock(&fake.lock);
	fake.fail = 0;
	fake.empty = true;
	pthread_mutex_unlock(&fake.lock);
	end = now_ms() + 2500;
	while (calls() < 3 && now_ms() < end)
		sleep_ms(10);
	assert_int_equal(creds_tokens_copy(e, &t), -EAGAIN);
	creds_tokens_put(e);
	creds_secret_free(&cs);
}

/* creds_tokens_stop() wipes every token; a restart fetches them again. */
static void test_stop_wipes(void **state)
{
	struct policy_credential c = cred("a", scopes_rw, 2);
	struct creds_secret cs = secret("s"), t = { 0 };
	struct creds_tokens_entry *e;
	uint64_t end;

	(void)state;
	fake_set(0, 3600);
	e = creds_tokens_get(&c, &cs);
	assert_true(creds_tokens_wait_first(e, 2000));
	assert_int_equal(creds_tokens_copy(e, &t), 0);
	creds_secret_free(&t);
	creds_tokens_stop();
	/* Stopped: every token wiped at once. */
	assert_int_equal(creds_tokens_copy(e, &t), -EAGAIN);
	assert_int_equal(setup(state), 0);
	/* Restarted: the entry is due again and fetched. */
	end = now_ms() + 2000;
	while (creds_tokens_copy(e, &t) != 0 && now_ms() < end)
		sleep_ms(5);
	assert_non_null(t.buf);
	assert_memory_equal(t.buf, "token-1", 7);
	creds_secret_free(&t);
	creds_tokens_put(e);
	creds_secret_free(&cs);
}

/*
 * An endpoint that hangs holds up one fetcher thread, not the others:
 * while its fetch is blocked, other entries are fetched and their tokens
 * handed out; the hanging entry is never fetched twice at once.
 */
static void test_hang_does_not_block_others(void **state)
{
	char u0[64], u1[64], u2[64];
	struct policy_credential ch = cred_at("hang", "hang.example", u0, sizeof(u0)),
				 c1 = cred_at("ok1", "auth1.example", u1, sizeof(u1)),
				 c2 = cred_at("ok2", "auth2.example", u2, sizeof(u2));
	struct creds_secret cs = secret("s"), t = { 0 };
	struct creds_tokens_entry *eh, *e1, *e2;
	struct fake_counts snap;
	int i;

	(void)state;
	eh = creds_tokens_get(&ch, &cs);
	assert_non_null(eh);
	assert_int_equal(wait_blocked(1), 1);
	e1 = creds_tokens_get(&c1, &cs);
	e2 = creds_tokens_get(&c2, &cs);
	assert_non_null(e1);
	assert_non_null(e2);
	assert_true(creds_tokens_wait_first(e1, 5000));
	assert_true(creds_tokens_wait_first(e2, 5000));
	assert_int_equal(creds_tokens_copy(e1, &t), 0);
	assert_non_null(t.buf);
	assert_memory_equal(t.buf, "token-", 6);
	creds_secret_free(&t);
	assert_int_equal(creds_tokens_copy(e2, &t), 0);
	creds_secret_free(&t);
	/* ... while the hanging fetch was still blocked, and still is. */
	snap = fake_snapshot();
	assert_int_equal(snap.blocked, 1);
	assert_int_equal(snap.cancelled + snap.timed_out, 0);
	assert_int_equal(snap.calls, 2); /* ok1 and ok2, once each */

	/* Requests for the hanging one get none, and do not make a second
	 * thread fetch it while the first still is. */
	for (i = 0; i < 100; i++) {
		assert_int_equal(creds_tokens_copy(eh, &t), -EAGAIN);
		sleep_ms(1);
	}
	assert_int_equal(fake_get(&fake.block_calls), 1);

	/* Once it answers, its token is there too. */
	fake_release(1);
	assert_true(creds_tokens_wait_first(eh, 5000));
	assert_int_equal(creds_tokens_copy(eh, &t), 0);
	creds_secret_free(&t);
	assert_int_equal(fake_get(&fake.blocked), 0);
	assert_int_equal(fake_get(&fake.block_calls), 1);
	creds_tokens_put(eh);
	creds_tokens_put(e1);
	creds_tokens_put(e2);
	creds_secret_free(&cs);
}

/*
 * The pool is bounded: with every thread held by a hanging endpoint, a
 * further entry waits for a free thread (and gets one as soon as one is
 * free). creds_tokens_stop() ends every blocked fetch at once: it returns while
 * they are blocked, and each was ended by its cancellation, not its cap.
 */
static void test_pool_and_stop(void **state)
{
	char urls[CREDS_TOKENS_FETCHERS + 1][64], hosts[CREDS_TOKENS_FETCHERS][32];
	struct policy_credential c;
	struct creds_secret cs = secret("s"), t = { 0 };
	struct creds_tokens_entry *eh[CREDS_TOKENS_FETCHERS], *e;
	struct fake_counts snap;
	unsigned i;

	(void)state;
	for (i = 0; i < CREDS_TOKENS_FETCHERS; i++) {
		snprintf(hosts[i], sizeof(hosts[i]), "hang%u.example", i);
		c = cred_at("hang", hosts[i], urls[i], sizeof(urls[i]));
		eh[i] = creds_tokens_get(&c, &cs);
		assert_non_null(eh[i]);
	}
	assert_int_equal(wait_blocked(CREDS_TOKENS_FETCHERS), CREDS_TOKENS_FETCHERS);
	c = cred_at("ok", "auth.example", urls[CREDS_TOKENS_FETCHERS], sizeof(urls[0]));
	e = creds_tokens_get(&c, &cs);
	assert_non_null(e);
	/* Every thread is held: no fetch for it (a bounded look). */
	assert_false(creds_tokens_wait_first(e, 300));
	assert_int_equal(calls(), 0);
	/* One released: its thread fetches the waiting entry next. */
	fake_release(1);
	assert_true(creds_tokens_wait_first(e, 5000));
	assert_int_equal(creds_tokens_copy(e, &t), 0);
	creds_secret_free(&t);

	/* The rest are blocked when creds_tokens_stop() is called ... */
	assert_int_equal(wait_blocked(CREDS_TOKENS_FETCHERS - 1), CREDS_TOKENS_FETCHERS - 1);
	creds_tokens_stop();
	/* ... and it returned once every one of them was cancelled. */
	snap = fake_snapshot();
	assert_int_equal(snap.blocked, 0);
	assert_int_equal(snap.cancelled, CREDS_TOKENS_FETCHERS - 1);
	assert_int_equal(snap.timed_out, 0);
	assert_int_equal(creds_tokens_copy(e, &t), -EAGAIN);
	for (i = 0; i < CREDS_TOKENS_FETCHERS; i++)
		creds_tokens_put(eh[i]);
	creds_tokens_put(e);
	creds_secret_free(&cs);
}

static void test_bad_arguments(void **state)
{
	struct policy_credential c = cred("a", scopes_rw, 2);
	struct creds_secret cs = { 0 };

	(void)state;
	assert_null(creds_tokens_get(&c, &cs)); /* an empty client secret */
	assert_int_equal(errno, EINVAL);
	c.source_kind = POLICY_SOURCE_JWT;
	cs = secret("s");
	assert_null(creds_tokens_get(&c, &cs));
	assert_null(creds_tokens_get(NULL, &cs));
	creds_secret_free(&cs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_schedule),
		cmocka_unit_test(test_dechunk),
		cmocka_unit_test_setup_teardown(test_fetched_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refreshed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failing_backs_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop_wipes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hang_does_not_block_others, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_and_stop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
