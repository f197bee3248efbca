// SPDX-License-Identifier: MIT
/* Unit tests for broker/tokens.c without a network: the refresh schedule,
 * the chunked-body decoder, and the token cache and its fetcher thread
 * with a fetch function of the test's own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "broker/cred.h"
#include "broker/tokens.h"
#include "policy/policy.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the schedule ---------------------------------------------------------- */

static void test_schedule(void **state)
{
	static const uint64_t lives[] = { 1, 2, 3, 10, 60, 299, 300, 3600, 86400,
					  CRED_OAUTH2_EXPIRES_MAX, CRED_OAUTH2_EXPIRES_MAX + 1 };
	static const uint32_t jitters[] = { 0, 1, 500, 1000, 1001, UINT32_MAX };
	size_t i, j;

	(void)state;
	/* 2 s: handed out 1.8 s, refreshed between 1.6 and 1.7 s. */
	assert_int_equal(tokens_usable_ms(2), 1800);
	assert_int_equal(tokens_refresh_ms(2, 0), 1600);
	assert_int_equal(tokens_refresh_ms(2, 1000), 1700);
	/* No expires_in: five minutes. */
	assert_int_equal(tokens_usable_ms(0), tokens_usable_ms(TOKENS_DEFAULT_EXPIRES_SEC));
	assert_int_equal(tokens_usable_ms(0), 270000);
	assert_int_equal(tokens_refresh_ms(0, 0), 240000);
	/* An hour: handed out until 30 s before the end. */
	assert_int_equal(tokens_usable_ms(3600), 3570000);
	assert_int_equal(tokens_refresh_ms(3600, 0), 2880000);
	assert_int_equal(tokens_refresh_ms(3600, 1000), 3060000);
	for (i = 0; i < ARRAY_SIZE(lives); i++) {
		uint64_t life = lives[i] > CRED_OAUTH2_EXPIRES_MAX ? CRED_OAUTH2_EXPIRES_MAX : lives[i];

		assert_true(tokens_usable_ms(lives[i]) <= life * 1000);
		assert_true(tokens_usable_ms(lives[i]) >= life * 900);
		for (j = 0; j < ARRAY_SIZE(jitters); j++) {
			uint64_t r = tokens_refresh_ms(lives[i], jitters[j]);

			/* Refreshed before it stops being handed out, never at once. */
			assert_true(r > 0);
			assert_true(r < tokens_usable_ms(lives[i]));
			/* At 80-85% of the life, or 10 s before handing out
			 * stops when that comes first. */
			assert_true(r <= life * 850);
			assert_true(r >= life * 800 || r == tokens_usable_ms(lives[i]) - 10000);
		}
	}

	assert_int_equal(tokens_backoff_ms(0), 1000);
	assert_int_equal(tokens_backoff_ms(1), 1000);
	assert_int_equal(tokens_backoff_ms(2), 2000);
	assert_int_equal(tokens_backoff_ms(3), 4000);
	assert_int_equal(tokens_backoff_ms(6), 32000);
	assert_int_equal(tokens_backoff_ms(7), TOKENS_BACKOFF_MAX_MS);
	assert_int_equal(tokens_backoff_ms(1000000), TOKENS_BACKOFF_MAX_MS);
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
		r = tokens_dechunk(buf, len);
		if (r != rows[i].want)
			print_error("row %zu: want %ld, got %ld\n", i, rows[i].want, r);
		assert_int_equal(r, rows[i].want);
		if (r >= 0)
			assert_memory_equal(buf, rows[i].out, (size_t)r);
	}
}

/* ---- the cache, with a fetch of the test's own ------------------------------- */

struct fake {
	pthread_mutex_t lock;
	unsigned calls;
	int fail;	     /* the answer: 0, or a negative errno */
	bool empty;	     /* answer an empty token */
	uint64_t expires_in; /* in the answer */
	char last_secret[64];
	char last_host[64];
	char last_scopes[64];
};

static struct fake fake = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int fake_fetch(void *ctx, const struct tokens_request *rq, struct cred_secret *token,
		      uint64_t *expires_in, char *err, size_t errlen)
{
	struct fake *f = ctx;
	char tok[64];
	size_t i;
	int r;

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
		snprintf(err, errlen, "fake failure");
		return r;
	}
	return cred_secret_set(token, tok, strlen(tok));
}

static unsigned calls(void)
{
	unsigned n;

	pthread_mutex_lock(&fake.lock);
	n = fake.calls;
	pthread_mutex_unlock(&fake.lock);
	return n;
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

static int setup(void **state)
{
	static const struct tokens_config cfg = { .resolvers = "" };
	char err[300];

	(void)state;
	pthread_mutex_lock(&fake.lock);
	fake.calls = 0;
	fake.fail = 0;
	fake.empty = false;
	fake.expires_in = 3600;
	pthread_mutex_unlock(&fake.lock);
	tokens_set_fetch(fake_fetch, &fake);
	if (tokens_start(&cfg, err, sizeof(err)) < 0) {
		print_error("tokens_start: %s\n", err);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tokens_stop();
	return 0;
}

static struct cred_secret secret(const char *s)
{
	struct cred_secret cs = { 0 };

	assert_int_equal(cred_secret_set(&cs, s, strlen(s)), 0);
	return cs;
}

/* Many requests, one fetch; the same key is one entry, another is another. */
static void test_fetched_once(void **state)
{
	struct policy_credential c = cred("a", scopes_rw, 2), c2 = cred("b", scopes_rw, 2),
				 c3 = cred("c", scopes_r, 1);
	struct cred_secret cs = secret("client-secret"), t = { 0 };
	struct tokens_entry *e, *e2, *e3;
	struct tokens_stats st;
	int i;

	(void)state;
	e = tokens_get(&c, &cs);
	assert_non_null(e);
	assert_true(tokens_wait_first(e, 2000));
	for (i = 0; i < 1000; i++) {
		assert_int_equal(tokens_copy(e, &t), 0);
		assert_int_equal(t.len, 7);
		assert_memory_equal(t.buf, "token-1", 7);
		cred_secret_free(&t);
	}
	assert_int_equal(calls(), 1);
	pthread_mutex_lock(&fake.lock);
	assert_string_equal(fake.last_secret, "client-secret");
	assert_string_equal(fake.last_host, "auth.example:443/token");
	assert_string_equal(fake.last_scopes, "read write");
	pthread_mutex_unlock(&fake.lock);

	/* Another credential (another sandbox, a reload) with the same
	 * endpoint, client and scopes shares the entry and its token. */
	e2 = tokens_get(&c2, &cs);
	assert_ptr_equal(e2, e);
	assert_true(tokens_wait_first(e2, 10));
	assert_int_equal(tokens_copy(e2, &t), 0);
	assert_memory_equal(t.buf, "token-1", 7);
	cred_secret_free(&t);
	assert_int_equal(calls(), 1);

	/* Other scopes: another token. */
	e3 = tokens_get(&c3, &cs);
	assert_ptr_not_equal(e3, e);
	assert_true(tokens_wait_first(e3, 2000));
	assert_int_equal(calls(), 2);
	tokens_stats(&st);
	assert_int_equal(st.entries, 2);
	assert_true(st.fetch_ok >= 2);

	tokens_put(e2);
	tokens_stats(&st);
	assert_int_equal(st.entries, 2); /* e still holds it */
	tokens_put(e);
	tokens_put(e3);
	tokens_stats(&st);
	assert_int_equal(st.entries, 0);
	tokens_put(NULL);
	cred_secret_free(&cs);
}

/* Short-lived tokens are refreshed before they stop being handed out. */
static void test_refreshed(void **state)
{
	struct policy_credential c = cred("a", scopes_rw, 2);
	struct cred_secret cs = secret("s1"), cs2 = secret("s2-rotated"), t = { 0 };
	struct tokens_entry *e, *again;
	uint64_t end;
	unsigned copies = 0, misses = 0;
	char first[16] = "", last[16] = "";

	(void)state;
	fake_set(0, 2);
	e = tokens_get(&c, &cs);
	assert_non_null(e);
	assert_true(tokens_wait_first(e, 2000));
	/* A reload reads a rotated client secret: the next fetch uses it. */
	again = tokens_get(&c, &cs2);
	assert_ptr_equal(again, e);
	tokens_put(again);
	end = now_ms() + 2600;
	while (now_ms() < end) {
		if (tokens_copy(e, &t) == 0) {
			snprintf(first[0] ? last : first, sizeof(first), "%.*s", (int)t.len,
				 (const char *)t.buf);
			copies++;
		} else {
			misses++;
		}
		cred_secret_free(&t);
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
	assert_string_equal(fake.last_secret, "s2-rotated");
	pthread_mutex_unlock(&fake.lock);
	tokens_put(e);
	cred_secret_free(&cs);
	cred_secret_free(&cs2);
}

/* A failing endpoint: no token, and requests do not make it hammered. */
static void test_failing_backs_off(void **state)
{
	struct policy_credential c = cred("a", scopes_rw, 2);
	struct cred_secret cs = secret("s"), t = { 0 };
	struct tokens_entry *e;
	struct tokens_stats st0, st;
	uint64_t end;

	(void)state;
	tokens_stats(&st0); /* counters run since the first start */
	fake_set(-EIO, 3600);
	e = tokens_get(&c, &cs);
	assert_non_null(e);
	assert_false(tokens_wait_first(e, 2000));
	assert_int_equal(calls(), 1);
	/* 1.5 s of requests: attempts at 0 and 1 s only (the next at 3 s). */
	end = now_ms() + 1500;
	while (now_ms() < end) {
		assert_int_equal(tokens_copy(e, &t), -EAGAIN);
		assert_null(t.buf);
		sleep_ms(1);
	}
	assert_true(calls() >= 1 && calls() <= 2);
	tokens_stats(&st);
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
	assert_int_equal(tokens_copy(e, &t), -EAGAIN);
	tokens_put(e);
	cred_secret_free(&cs);
}

/* tokens_stop() wipes every token; a restart fetches them again. */
static void test_stop_wipes(void **state)
{
	struct policy_credential c = cred("a", scopes_rw, 2);
	struct cred_secret cs = secret("s"), t = { 0 };
	struct tokens_entry *e;
	uint64_t end;

	(void)state;
	fake_set(0, 3600);
	e = tokens_get(&c, &cs);
	assert_true(tokens_wait_first(e, 2000));
	assert_int_equal(tokens_copy(e, &t), 0);
	cred_secret_free(&t);
	tokens_stop();
	/* Stopped: every token wiped at once. */
	assert_int_equal(tokens_copy(e, &t), -EAGAIN);
	assert_int_equal(setup(state), 0);
	/* Restarted: the entry is due again and fetched. */
	end = now_ms() + 2000;
	while (tokens_copy(e, &t) != 0 && now_ms() < end)
		sleep_ms(5);
	assert_non_null(t.buf);
	assert_memory_equal(t.buf, "token-1", 7);
	cred_secret_free(&t);
	tokens_put(e);
	cred_secret_free(&cs);
}

static void test_bad_arguments(void **state)
{
	struct policy_credential c = cred("a", scopes_rw, 2);
	struct cred_secret cs = { 0 };

	(void)state;
	assert_null(tokens_get(&c, &cs)); /* an empty client secret */
	assert_int_equal(errno, EINVAL);
	c.source_kind = POLICY_SOURCE_JWT;
	cs = secret("s");
	assert_null(tokens_get(&c, &cs));
	assert_null(tokens_get(NULL, &cs));
	cred_secret_free(&cs);
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
		cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
