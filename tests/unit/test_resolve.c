// SPDX-License-Identifier: MIT
/* Unit tests for the broker resolver against a fake DNS server on 127.0.0.1 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/loop.h"
#include "broker/resolve.h"
#include "common/addr.h"
#include "common/err.h"

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* --- the fake DNS server
 * -------------------------------------------------------
 *
 * A UDP socket on 127.0.0.1 (ephemeral port) served by its own thread. It
 * answers from a table of names; a name not in the table gets NXDOMAIN (or
 * no answer at all in drop_unknown mode). It counts what it receives.
 */

#define FAKE_NAMES 32

struct fake_name {
	char name[256];
	int rcode;
	uint32_t ttl;
	bool drop;		 /* never answer */
	unsigned int a_delay_ms; /* hold A answers back (AAAA then arrives first) */
	int n4;
	uint32_t v4[16];
	int n6;
	struct in6_addr v6[16];
	unsigned int q_a;
	unsigned int q_aaaa;
};

struct fake_delayed {
	uint64_t due_ms;
	size_t len;
	struct sockaddr_storage to;
	socklen_t tolen;
	unsigned char buf[512];
};

#define FAKE_DELAYED 8

struct fake_dns {
	int fd;
	uint16_t port;
	pthread_t th;
	atomic_bool stop;
	pthread_mutex_t lock;
	struct fake_name names[FAKE_NAMES];
	int nnames;
	bool drop_unknown; /* under lock: tests set it while the server runs */
	unsigned int total;
	unsigned int unknown;
	unsigned int malformed;
	struct fake_delayed delayed[FAKE_DELAYED]; /* server thread only */
};

static void put16(unsigned char *p, unsigned int v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static void put32(unsigned char *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v & 0xffff);
}

/* Builds the reply to query @q into @out; 0 means "do not answer". */
static size_t fake_answer(struct fake_dns *d, const unsigned char *q, size_t len,
			  unsigned char *out, size_t outsz, unsigned int *delay_ms)
{
	char name[256];
	size_t off = 12, nl = 0, o;
	unsigned int qtype, an = 0;
	struct fake_name rec = { .rcode = 3 };
	bool found = false, drop_unknown;

	if (len < 12 || ((q[4] << 8) | q[5]) != 1 || (q[2] & 0x80)) {
		pthread_mutex_lock(&d->lock);
		d->malformed++;
		pthread_mutex_unlock(&d->lock);
		return 0;
	}
	for (;;) {
		unsigned int lab;

		if (off >= len)
			return 0;
		lab = q[off++];
		if (lab == 0)
			break;
		if (lab > 63 || off + lab > len || nl + lab + 2 > sizeof(name))
			return 0;
		if (nl)
			name[nl++] = '.';
		for (unsigned int i = 0; i < lab; i++) {
			unsigned char c = q[off + i];

			name[nl++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
		}
		off += lab;
	}
	name[nl] = '\0';
	if (off + 4 > len)
		return 0;
	qtype = (q[off] << 8) | q[off + 1];
	off += 4;

	pthread_mutex_lock(&d->lock);
	d->total++;
	for (int i = 0; i < d->nnames; i++) {
		if (!strcasecmp(d->names[i].name, name)) {
			if (qtype == 1)
				d->names[i].q_a++;
			else if (qtype == 28)
				d->names[i].q_aaaa++;
			rec = d->names[i];
			found = true;
			break;
		}
	}
	if (!found)
		d->unknown++;
	drop_unknown = d->drop_unknown;
	pthread_mutex_unlock(&d->lock);

	if (rec.drop || (!found && drop_unknown))
		return 0;
	if (off > outsz)
		return 0;
	memcpy(out, q, off);		    /* header and question, as asked */
	out[2] = 0x80 | (q[2] & 0x01);	    /* QR, RD echoed */
	out[3] = 0x80 | (rec.rcode & 0x0f); /* RA, rcode */
	put16(out + 6, 0);
	put16(out + 8, 0);
	put16(out + 10, 0);
	o = off;
	if (rec.rcode == 0 && qtype == 1) {
		for (int i = 0; i < rec.n4 && o + 16 <= outsz; i++, an++) {
			put16(out + o, 0xc00c);
			put16(out + o + 2, 1);
			put16(out + o + 4, 1);
			put32(out + o + 6, rec.ttl);
			put16(out + o + 10, 4);
			put32(out + o + 12, rec.v4[i]);
			o += 16;
		}
	} else if (rec.rcode == 0 && qtype == 28) {
		for (int i = 0; i < rec.n6 && o + 28 <= outsz; i++, an++) {
			put16(out + o, 0xc00c);
			put16(out + o + 2, 28);
			put16(out + o + 4, 1);
			put32(out + o + 6, rec.ttl);
			put16(out + o + 10, 16);
			memcpy(out + o + 12, &rec.v6[i], 16);
			o += 28;
		}
	}
	put16(out + 6, an);
	*delay_ms = qtype == 1 ? rec.a_delay_ms : 0;
	return o;
}

/* Sends held-back answers that are due; returns ms until the next one. */
static int fake_flush(struct fake_dns *d)
{
	uint64_t now = mono_ms();
	int wait = 20;

	for (int i = 0; i < FAKE_DELAYED; i++) {
		struct fake_delayed *h = &d->delayed[i];

		if (!h->len)
			continue;
		if (h->due_ms <= now) {
			sendto(d->fd, h->buf, h->len, 0, (struct sockaddr *)&h->to, h->tolen);
			h->len = 0;
		} else if (h->due_ms - now < (uint64_t)wait) {
			wait = (int)(h->due_ms - now);
		}
	}
	return wait;
}

static void fake_hold(struct fake_dns *d, const unsigned char *buf, size_t len,
		      const struct sockaddr_storage *to, socklen_t tolen, unsigned int ms)
{
	for (int i = 0; i < FAKE_DELAYED; i++) {
		struct fake_delayed *h = &d->delayed[i];

		if (h->len)
			continue;
		h->due_ms = mono_ms() + ms;
		memcpy(h->buf, buf, len);
		h->len = len;
		h->to = *to;
		h->tolen = tolen;
		return;
	}
	/* Queue full: dropped, like a lossy network. */
}

static void *fake_main(void *arg)
{
	struct fake_dns *d = arg;
	unsigned char q[1500], resp[512];

	/* Bounded by the stop flag, checked at least every 20 ms. */
	while (!atomic_load(&d->stop)) {
		struct pollfd p = { .fd = d->fd, .events = POLLIN };
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		unsigned int delay = 0;
		ssize_t len;
		size_t rlen;

		if (poll(&p, 1, fake_flush(d)) <= 0)
			continue;
		len = recvfrom(d->fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
		if (len < 0)
			continue;
		rlen = fake_answer(d, q, (size_t)len, resp, sizeof(resp), &delay);
		if (rlen && delay)
			fake_hold(d, resp, rlen, &from, fl, delay);
		else if (rlen)
			sendto(d->fd, resp, rlen, 0, (struct sockaddr *)&from, fl);
	}
	return NULL;
}

static void fake_start(struct fake_dns *d)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);

	memset(d, 0, sizeof(*d));
	pthread_mutex_init(&d->lock, NULL);
	atomic_init(&d->stop, false);
	d->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(d->fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(d->fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(getsockname(d->fd, (struct sockaddr *)&sin, &sl), 0);
	d->port = ntohs(sin.sin_port);
	assert_int_equal(pthread_create(&d->th, NULL, fake_main, d), 0);
}

static void fake_stop(struct fake_dns *d)
{
	atomic_store(&d->stop, true);
	pthread_join(d->th, NULL);
	close(d->fd);
	pthread_mutex_destroy(&d->lock);
}

static void fake_drop_unknown(struct fake_dns *d)
{
	pthread_mutex_lock(&d->lock);
	d->drop_unknown = true;
	pthread_mutex_unlock(&d->lock);
}

/* Adds (or replaces) a name. @v6 holds @n6 text addresses. */
static void fake_set(struct fake_dns *d, const char *name, int rcode, uint32_t ttl, int n4,
		     const uint32_t *v4, int n6, const char *const *v6)
{
	struct fake_name *f = NULL;

	pthread_mutex_lock(&d->lock);
	for (int i = 0; i < d->nnames; i++)
		if (!strcasecmp(d->names[i].name, name))
			f = &d->names[i];
	if (!f) {
		assert_true(d->nnames < FAKE_NAMES);
		f = &d->names[d->nnames++];
	}
	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->rcode = rcode;
	f->ttl = ttl;
	f->n4 = n4;
	for (int i = 0; i < n4; i++)
		f->v4[i] = v4[i];
	f->n6 = n6;
	for (int i = 0; i < n6; i++)
		assert_int_equal(inet_pton(AF_INET6, v6[i], &f->v6[i]), 1);
	pthread_mutex_unlock(&d->lock);
}

static void fake_delay_a(struct fake_dns *d, const char *name, unsigned int ms)
{
	pthread_mutex_lock(&d->lock);
	for (int i = 0; i < d->nnames; i++)
		if (!strcasecmp(d->names[i].name, name))
			d->names[i].a_delay_ms = ms;
	pthread_mutex_unlock(&d->lock);
}

static void fake_drop(struct fake_dns *d, const char *name)
{
	fake_set(d, name, 0, 0, 0, NULL, 0, NULL);
	pthread_mutex_lock(&d->lock);
	for (int i = 0; i < d->nnames; i++)
		if (!strcasecmp(d->names[i].name, name))
			d->names[i].drop = true;
	pthread_mutex_unlock(&d->lock);
}

/* Queries received for @name: A in *a, AAAA in *aaaa; returns the sum. */
static unsigned int fake_count(struct fake_dns *d, const char *name, unsigned int *a,
			       unsigned int *aaaa)
{
	unsigned int na = 0, naaaa = 0;

	pthread_mutex_lock(&d->lock);
	for (int i = 0; i < d->nnames; i++) {
		if (!strcasecmp(d->names[i].name, name)) {
			na = d->names[i].q_a;
			naaaa = d->names[i].q_aaaa;
		}
	}
	pthread_mutex_unlock(&d->lock);
	if (a)
		*a = na;
	if (aaaa)
		*aaaa = naaaa;
	return na + naaaa;
}

static unsigned int fake_unknown(struct fake_dns *d)
{
	unsigned int n;

	pthread_mutex_lock(&d->lock);
	n = d->unknown;
	pthread_mutex_unlock(&d->lock);
	return n;
}

/* --- the world of one test: fake server, loop, resolver ------------------- */

static struct {
	struct fake_dns dns;
	struct fake_dns second; /* started by tests that need two servers */
	bool have_second;
	struct loop *l;
	struct resolver *r;
	int done;
	int target;
} W;

struct res {
	struct resolve_req req;
	int called;
	int status;
	size_t n;
	struct sl_addr a[RESOLVE_MAX_ADDRS];
	bool wrong_req;
	uint64_t at_ms;
};

static void on_res(struct resolve_req *req, int status, const struct sl_addr *addrs, size_t n,
		   void *arg)
{
	struct res *x = arg;

	x->called++;
	x->status = status;
	x->n = n;
	x->wrong_req |= req != &x->req;
	if (n > RESOLVE_MAX_ADDRS)
		n = RESOLVE_MAX_ADDRS;
	if (n)
		memcpy(x->a, addrs, n * sizeof(*addrs));
	x->at_ms = mono_ms();
	if (++W.done == W.target)
		loop_stop(W.l);
}

struct watchdog {
	struct timer t;
	bool fired;
};

static void watchdog_cb(struct timer *t)
{
	container_of(t, struct watchdog, t)->fired = true;
	loop_stop(W.l);
}

/* Runs the loop until @target callbacks have run; false on timeout. */
static bool run_until(int target, uint64_t max_ms)
{
	struct watchdog w = { .t.cb = watchdog_cb };

	W.done = 0;
	W.target = target;
	assert_int_equal(loop_timer_arm(W.l, &w.t, max_ms), 0);
	assert_int_equal(loop_run(W.l), 0);
	loop_timer_cancel(W.l, &w.t);
	W.target = 0;
	return !w.fired;
}

/* Runs the loop for @ms, whatever happens. */
static void run_for(uint64_t ms)
{
	assert_false(run_until(-1, ms));
}

static int world_up(size_t cache_max)
{
	struct sl_err err = { 0 };
	char servers[64];

	memset(&W, 0, sizeof(W));
	fake_start(&W.dns);
	W.l = loop_new();
	assert_non_null(W.l);
	snprintf(servers, sizeof(servers), "127.0.0.1:%u", W.dns.port);
	W.r = resolver_new(W.l, servers, cache_max, &err);
	if (!W.r)
		fail_msg("resolver_new: %s", sl_err_msg(&err));
	return 0;
}

static int setup(void **state)
{
	(void)state;
	return world_up(64);
}

static int setup_cache3(void **state)
{
	(void)state;
	return world_up(3);
}

static int teardown(void **state)
{
	(void)state;
	resolver_free(W.r);
	loop_free(W.l);
	fake_stop(&W.dns);
	if (W.have_second)
		fake_stop(&W.second);
	return 0;
}

static struct sl_addr A4(uint32_t v4) {
	struct sl_addr a;

	addr_from_v4(&a, v4);
	return a;
}

static struct sl_addr
A6(const char *s) {
	struct sl_addr a;

	assert_int_equal(addr_parse(s, &a), 0);
	return a;
}

static struct resolver_stats
stats(void)
{
	struct resolver_stats st;

	resolver_stats(W.r, &st);
	return st;
}

/* --- tests ---------------------------------------------------------------- */

static void test_a_and_aaaa(void **state)
{
	static const uint32_t v4[] = { 0xc0000201, 0xc0000202 }; /* 192.0.2.1, .2 */
	static const char *const v6[] = { "2001:db8::1" };
	struct sl_addr want[3] = { A4(v4[0]), A4(v4[1]), A6(v6[0]) };
	struct res x = { 0 }, y = { 0 };
	unsigned int qa, qaaaa;
	struct resolver_stats st;

	(void)state;
	fake_set(&W.dns, "www.example.test", 0, 300, 2, v4, 1, v6);
	fake_delay_a(&W.dns, "www.example.test", 100); /* AAAA answers first */

	assert_int_equal(resolver_lookup(W.r, "WWW.Example.TEST.", &x.req, on_res, &x), 0);
	assert_int_equal(x.called, 0); /* never from within resolver_lookup() */
	assert_true(run_until(1, 3000));
	assert_int_equal(x.called, 1);
	assert_false(x.wrong_req);
	assert_int_equal(x.status, 0);
	assert_int_equal(x.n, 3);
	assert_memory_equal(x.a, want, sizeof(want));
	assert_true(addr_is_v4(&x.a[0]) && addr_is_v4(&x.a[1]) && !addr_is_v4(&x.a[2]));
	assert_int_equal(fake_count(&W.dns, "www.example.test", &qa, &qaaaa), 2);
	assert_int_equal(qa, 1);
	assert_int_equal(qaaaa, 1);

	/* Cached: same answer, no new query, still not synchronous. */
	assert_int_equal(resolver_lookup(W.r, "www.example.test", &y.req, on_res, &y), 0);
	assert_int_equal(y.called, 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(y.called, 1);
	assert_int_equal(y.status, 0);
	assert_int_equal(y.n, 3);
	assert_memory_equal(y.a, want, sizeof(want));
	assert_int_equal(fake_count(&W.dns, "www.example.test", NULL, NULL), 2);

	st = stats();
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.entries, 1);
}

/* More than RESOLVE_MAX_ADDRS: all v4 first (in answer order), then v6. */
static void test_at_most_16_v4_first(void **state)
{
	uint32_t v4[12];
	const char *v6[8] = { "2001:db8::a", "2001:db8::b", "2001:db8::c",  "2001:db8::d",
			      "2001:db8::e", "2001:db8::f", "2001:db8::10", "2001:db8::11" };
	struct res x = { 0 };
	int seen6 = 0;

	(void)state;
	for (int i = 0; i < 12; i++)
		v4[i] = 0xc6336400u + 1 + i; /* 198.51.100.1.. */
	fake_set(&W.dns, "many.test", 0, 60, 12, v4, 8, v6);
	fake_delay_a(&W.dns, "many.test", 100); /* AAAA answers first */
	assert_int_equal(resolver_lookup(W.r, "many.test", &x.req, on_res, &x), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(x.status, 0);
	assert_int_equal(x.n, RESOLVE_MAX_ADDRS);
	for (int i = 0; i < 12; i++) {
		struct sl_addr w = A4(v4[i]);

		assert_memory_equal(&x.a[i], &w, sizeof(w));
	}
	for (int i = 12; i < RESOLVE_MAX_ADDRS; i++) {
		assert_false(addr_is_v4(&x.a[i]));
		for (int j = 0; j < 8; j++) {
			struct sl_addr w = A6(v6[j]);

			seen6 += !memcmp(&x.a[i], &w, sizeof(w));
		}
	}
	assert_int_equal(seen6, 4);
}

static void test_ttl_honoured(void **state)
{
	static const uint32_t v4[] = { 0xcb007107 }; /* 203.0.113.7 */
	struct res x = { 0 }, y = { 0 }, z = { 0 }, t0a = { 0 }, t0b = { 0 };
	struct resolver_stats st;

	(void)state;
	fake_set(&W.dns, "short.test", 0, 1, 1, v4, 0, NULL);
	fake_set(&W.dns, "zero.test", 0, 0, 1, v4, 0, NULL);

	assert_int_equal(resolver_lookup(W.r, "short.test", &x.req, on_res, &x), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(x.status, 0);
	assert_int_equal(x.n, 1); /* AAAA: no data; the A answer stands */
	assert_int_equal(fake_count(&W.dns, "short.test", NULL, NULL), 2);

	/* Within the TTL: a hit. */
	assert_int_equal(resolver_lookup(W.r, "short.test", &y.req, on_res, &y), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(y.status, 0);
	assert_int_equal(fake_count(&W.dns, "short.test", NULL, NULL), 2);

	/* A TTL of 0 is clamped up to 1 s: an immediate repeat is a hit. */
	assert_int_equal(resolver_lookup(W.r, "zero.test", &t0a.req, on_res, &t0a), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(resolver_lookup(W.r, "zero.test", &t0b.req, on_res, &t0b), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(t0b.status, 0);
	assert_int_equal(fake_count(&W.dns, "zero.test", NULL, NULL), 2);

	/* After the TTL: asked upstream again. */
	run_for(1300);
	assert_int_equal(resolver_lookup(W.r, "short.test", &z.req, on_res, &z), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(z.status, 0);
	assert_int_equal(fake_count(&W.dns, "short.test", NULL, NULL), 4);

	st = stats();
	assert_int_equal(st.hits, 2);
	assert_int_equal(st.misses, 3);
	assert_true(st.expired >= 1);
}

static void test_nxdomain_and_nodata(void **state)
{
	static const char *const v6[] = { "2001:db8::6" };
	struct res x = { 0 }, y = { 0 }, nd = { 0 }, o6 = { 0 };
	struct sl_addr w6 = A6(v6[0]);
	unsigned int before;

	(void)state;
	/* Not in the server's table: NXDOMAIN. */
	assert_int_equal(resolver_lookup(W.r, "nope.test", &x.req, on_res, &x), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(x.status, -ENOENT);
	assert_int_equal(x.n, 0);
	before = fake_unknown(&W.dns);
	assert_int_equal(before, 2);

	/* Negative answers are cached too. */
	assert_int_equal(resolver_lookup(W.r, "nope.test", &y.req, on_res, &y), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(y.status, -ENOENT);
	assert_int_equal(fake_unknown(&W.dns), before);
	assert_int_equal(stats().hits, 1);

	/* The name exists but has no address. */
	fake_set(&W.dns, "nodata.test", 0, 60, 0, NULL, 0, NULL);
	assert_int_equal(resolver_lookup(W.r, "nodata.test", &nd.req, on_res, &nd), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(nd.status, -ENOENT);

	/* v6 only. */
	fake_set(&W.dns, "v6only.test", 0, 60, 0, NULL, 1, v6);
	assert_int_equal(resolver_lookup(W.r, "v6only.test", &o6.req, on_res, &o6), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(o6.status, 0);
	assert_int_equal(o6.n, 1);
	assert_memory_equal(&o6.a[0], &w6, sizeof(w6));
}

static void test_servfail(void **state)
{
	struct res x = { 0 }, y = { 0 };
	unsigned int first;

	(void)state;
	fake_set(&W.dns, "broken.test", 2, 60, 0, NULL, 0, NULL);
	assert_int_equal(resolver_lookup(W.r, "broken.test", &x.req, on_res, &x), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(x.status, -EIO);
	assert_int_equal(x.n, 0);
	first = fake_count(&W.dns, "broken.test", NULL, NULL);
	assert_true(first >= 2);

	/* Failures are not cached: the next lookup asks again. */
	assert_int_equal(resolver_lookup(W.r, "broken.test", &y.req, on_res, &y), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(y.status, -EIO);
	assert_true(fake_count(&W.dns, "broken.test", NULL, NULL) > first);
}

static void test_timeout(void **state)
{
	struct res x = { 0 };
	uint64_t t0, dt;

	(void)state;
	fake_drop(&W.dns, "silent.test");
	t0 = mono_ms();
	assert_int_equal(resolver_lookup(W.r, "silent.test", &x.req, on_res, &x), 0);
	assert_true(run_until(1, RESOLVE_DEADLINE_MS + 3000));
	dt = x.at_ms - t0;
	print_message("    timeout reported after %llu ms (%u upstream queries)\n",
		      (unsigned long long)dt, fake_count(&W.dns, "silent.test", NULL, NULL));
	assert_int_equal(x.called, 1);
	assert_int_equal(x.status, -ETIMEDOUT);
	assert_true(dt >= 2 * RESOLVE_TRY_TIMEOUT_MS); /* waited through a retry */
	assert_true(dt <= RESOLVE_DEADLINE_MS + 500);
	/* Retried: more than one A + one AAAA. */
	assert_true(fake_count(&W.dns, "silent.test", NULL, NULL) >= 4);
}

/* resolver_set_deadline() (the broker's resolve_timeout): a silent name is
 * given up after the deadline set, not the default; 0 changes nothing; a
 * lookup keeps the deadline it started with. */
static void test_set_deadline(void **state)
{
	struct res x = { 0 }, y = { 0 };
	uint64_t t0, dt;

	(void)state;
	fake_drop(&W.dns, "quiet.test");
	fake_drop(&W.dns, "quiet2.test");
	resolver_set_deadline(W.r, 700);
	resolver_set_deadline(W.r, 0);
	t0 = mono_ms();
	assert_int_equal(resolver_lookup(W.r, "quiet.test", &x.req, on_res, &x), 0);
	resolver_set_deadline(W.r, 2500);
	assert_int_equal(resolver_lookup(W.r, "quiet2.test", &y.req, on_res, &y), 0);
	assert_true(run_until(1, 3000));
	dt = x.at_ms - t0;
	print_message("    deadline 700 ms: reported after %llu ms\n", (unsigned long long)dt);
	assert_int_equal(x.called, 1);
	assert_int_equal(x.status, -ETIMEDOUT);
	/* Far from the next deadline and the default (5 s): a loaded
	 * machine's lateness is not what is checked. */
	assert_true(dt >= 650 && dt <= 2000);
	assert_int_equal(y.called, 0);
	assert_true(run_until(1, 4000));
	dt = y.at_ms - t0;
	print_message("    deadline 2500 ms: reported after %llu ms\n", (unsigned long long)dt);
	assert_int_equal(y.status, -ETIMEDOUT);
	assert_true(dt >= 2450 && dt <= 4500);
}

/* Several silent servers: c-ares alone would go on for 9 s; the deadline
 * answers at RESOLVE_DEADLINE_MS while the query itself is left to end. */
static void test_deadline_with_two_servers(void **state)
{
	static const uint32_t kept4[] = { 0xc0000207 };
	struct fake_dns *second = &W.second;
	char servers[64];
	struct res x = { 0 }, k1 = { 0 }, k2 = { 0 };
	uint64_t t0, dt;

	(void)state;
	fake_start(second);
	W.have_second = true;
	fake_drop_unknown(second);
	fake_drop_unknown(&W.dns);
	resolver_free(W.r);
	snprintf(servers, sizeof(servers), "127.0.0.1:%u,127.0.0.1:%u", W.dns.port, second->port);
	W.r = resolver_new(W.l, servers, 64, NULL);
	assert_non_null(W.r);

	/* An answer cached just before: it must outlive its query's deadline.
	 */
	fake_set(&W.dns, "kept.test", 0, 300, 1, kept4, 0, NULL);
	assert_int_equal(resolver_lookup(W.r, "kept.test", &k1.req, on_res, &k1), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(k1.status, 0);

	t0 = mono_ms();
	assert_int_equal(resolver_lookup(W.r, "silent2.test", &x.req, on_res, &x), 0);
	assert_true(run_until(1, RESOLVE_DEADLINE_MS + 3000));
	dt = x.at_ms - t0;
	print_message("    deadline reported after %llu ms (%u + %u upstream queries)\n",
		      (unsigned long long)dt, fake_unknown(&W.dns), fake_unknown(second));
	assert_int_equal(x.status, -ETIMEDOUT);
	assert_true(dt >= RESOLVE_DEADLINE_MS - 50 && dt <= RESOLVE_DEADLINE_MS + 500);
	/* Both servers were tried. */
	assert_true(fake_unknown(&W.dns) >= 2 && fake_unknown(second) >= 2);
	/* The abandoned query still runs (freed by teardown's resolver_free).
	 */
	assert_int_equal(stats().in_flight, 1);
	assert_int_equal(stats().entries, 1);

	/* kept.test is still a cached success, more than 5 s after its query.
	 */
	assert_int_equal(resolver_lookup(W.r, "kept.test", &k2.req, on_res, &k2), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(k2.status, 0);
	assert_int_equal(k2.n, 1);
	assert_int_equal(fake_count(&W.dns, "kept.test", NULL, NULL), 2);
	assert_int_equal(stats().hits, 1);
}

static void test_cancel(void **state)
{
	static const uint32_t v4[] = { 0xcb007108 };
	struct res *conn = calloc(1, sizeof(*conn));
	struct res y = { 0 }, z = { 0 }, h = { 0 }, idle = { 0 };
	uint64_t t0;

	(void)state;
	assert_non_null(conn);
	fake_set(&W.dns, "c.test", 0, 60, 1, v4, 0, NULL);

	/* A connection closes before the answer: cancel, then free it. */
	assert_int_equal(resolver_lookup(W.r, "c.test", &conn->req, on_res, conn), 0);
	resolver_cancel(W.r, &conn->req);
	assert_int_equal(conn->called, 0);
	free(conn);

	/* Two join the same query; one of them is cancelled. */
	assert_int_equal(resolver_lookup(W.r, "c.test", &y.req, on_res, &y), 0);
	assert_int_equal(resolver_lookup(W.r, "c.test", &z.req, on_res, &z), 0);
	resolver_cancel(W.r, &z.req);
	resolver_cancel(W.r, &idle.req); /* idle: a no-op */
	assert_true(run_until(1, 3000));
	assert_int_equal(y.called, 1);
	assert_int_equal(y.status, 0);
	/* Let anything late have its chance. */
	t0 = mono_ms();
	while (stats().in_flight && mono_ms() - t0 < 3000)
		run_for(10);
	run_for(50);
	assert_int_equal(z.called, 0);
	assert_int_equal(fake_count(&W.dns, "c.test", NULL, NULL), 2);

	/* A cache hit waiting for its delivery can be cancelled too. */
	assert_int_equal(resolver_lookup(W.r, "c.test", &h.req, on_res, &h), 0);
	resolver_cancel(W.r, &h.req);
	run_for(50);
	assert_int_equal(h.called, 0);

	/* The req is idle again and can be reused. */
	assert_int_equal(resolver_lookup(W.r, "c.test", &h.req, on_res, &h), 0);
	assert_true(run_until(1, 3000));
	assert_int_equal(h.called, 1);
	assert_int_equal(h.status, 0);
}

static void test_eviction_lru(void **state)
{
	static const uint32_t v4[] = { 0xc0000263 };
	const char *names[] = { "a.test", "b.test", "c.test", "d.test" };
	struct res x[8];
	struct resolver_stats st;
	int k = 0;

	(void)state;
	memset(x, 0, sizeof(x));
	for (int i = 0; i < 4; i++)
		fake_set(&W.dns, names[i], 0, 300, 1, v4, 0, NULL);

	/* One at a time, so the LRU order is known: c, b, a. */
	for (int i = 0; i < 3; i++, k++) {
		assert_int_equal(resolver_lookup(W.r, names[i], &x[k].req, on_res, &x[k]), 0);
		assert_true(run_until(1, 3000));
	}
	assert_int_equal(stats().entries, 3);
	/* Touch a: now a, c, b. */
	assert_int_equal(resolver_lookup(W.r, "a.test", &x[k].req, on_res, &x[k]), 0);
	assert_true(run_until(1, 3000));
	k++;
	/* d pushes out the least recently used: b. */
	assert_int_equal(resolver_lookup(W.r, "d.test", &x[k].req, on_res, &x[k]), 0);
	assert_true(run_until(1, 3000));
	k++;
	st = stats();
	assert_int_equal(st.entries, 3);
	assert_int_equal(st.evictions, 1);

	/* a survived (no new query), b did not. */
	assert_int_equal(resolver_lookup(W.r, "a.test", &x[k].req, on_res, &x[k]), 0);
	assert_true(run_until(1, 3000));
	k++;
	assert_int_equal(fake_count(&W.dns, "a.test", NULL, NULL), 2);
	assert_int_equal(resolver_lookup(W.r, "b.test", &x[k].req, on_res, &x[k]), 0);
	assert_true(run_until(1, 3000));
	k++;
	assert_int_equal(fake_count(&W.dns, "b.test", NULL, NULL), 4);

	st = stats();
	assert_int_equal(st.entries, 3);
	assert_int_equal(st.evictions, 2);
	assert_int_equal(st.hits, 2);
	assert_int_equal(st.misses, 5);
	for (int i = 0; i < k; i++) {
		assert_int_equal(x[i].called, 1);
		assert_int_equal(x[i].status, 0);
	}
}

#define CONCURRENT 50

static void test_concurrent_share_one_query(void **state)
{
	static const uint32_t v4[] = { 0xc0000205 };
	static const char *const v6[] = { "2001:db8::5" };
	struct sl_addr want[2] = { A4(v4[0]), A6(v6[0]) };
	struct res x[CONCURRENT];
	unsigned int qa, qaaaa;
	struct resolver_stats st;

	(void)state;
	memset(x, 0, sizeof(x));
	fake_set(&W.dns, "popular.test", 0, 300, 1, v4, 1, v6);
	for (int i = 0; i < CONCURRENT; i++)
		assert_int_equal(resolver_lookup(W.r, "popular.test", &x[i].req, on_res, &x[i]), 0);
	assert_true(run_until(CONCURRENT, 3000));
	for (int i = 0; i < CONCURRENT; i++) {
		assert_int_equal(x[i].called, 1);
		assert_false(x[i].wrong_req);
		assert_int_equal(x[i].status, 0);
		assert_int_equal(x[i].n, 2);
		assert_memory_equal(x[i].a, want, sizeof(want));
	}
	assert_int_equal(fake_count(&W.dns, "popular.test", &qa, &qaaaa), 2);
	assert_int_equal(qa, 1);
	assert_int_equal(qaaaa, 1);
	st = stats();
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.coalesced, CONCURRENT - 1);
	assert_int_equal(st.in_flight, 0);
}

/* A callback that looks the name up again on its own req (a retry). */
static int chain_left;

static void on_chain(struct resolve_req *req, int status, const struct sl_addr *addrs, size_t n,
		     void *arg)
{
	struct res *x = arg;

	on_res(req, status, addrs, n, arg);
	if (--chain_left > 0)
		assert_int_equal(resolver_lookup(W.r, "chain.test", req, on_chain, x), 0);
}

static void test_lookup_from_callback(void **state)
{
	static const uint32_t v4[] = { 0xc0000206 };
	struct res x = { 0 };

	(void)state;
	fake_set(&W.dns, "chain.test", 0, 300, 1, v4, 0, NULL);
	chain_left = 3;
	assert_int_equal(resolver_lookup(W.r, "chain.test", &x.req, on_chain, &x), 0);
	assert_true(run_until(3, 3000));
	assert_int_equal(x.called, 3);
	assert_int_equal(x.status, 0);
	assert_int_equal(fake_count(&W.dns, "chain.test", NULL, NULL), 2);
	assert_int_equal(stats().hits, 2);
}

static void test_bad_names(void **state)
{
	char lab64[80], lab63[80], long254[300], long253[300];
	const char *bad[] = { "",	  ".",	 "..",	 "a..b",
			      ".a",	  "a b", "a/b",	 "caf\xc3\xa9.test",
			      "a.test..", lab64, long254 };
	struct res x = { 0 }, ok = { 0 };

	(void)state;
	memset(lab64, 'a', 64);
	strcpy(lab64 + 64, ".test");
	memset(lab63, 'a', 63);
	strcpy(lab63 + 63, ".test");
	/* 4 x (62 + dot) = 252, + "b" = 253; + "bb" = 254 */
	for (int i = 0; i < 4; i++) {
		memset(long253 + i * 63, 'x', 62);
		long253[i * 63 + 62] = '.';
	}
	memcpy(long254, long253, 252);
	strcpy(long253 + 252, "b");
	strcpy(long254 + 252, "bb");
	assert_int_equal(strlen(long253), 253);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(resolver_lookup(W.r, bad[i], &x.req, on_res, &x), -EINVAL);

	assert_int_equal(resolver_lookup(W.r, lab63, &ok.req, on_res, &ok), 0);
	assert_int_equal(resolver_lookup(W.r, lab63, &ok.req, on_res, &ok), -EBUSY);
	resolver_cancel(W.r, &ok.req);
	assert_int_equal(resolver_lookup(W.r, long253, &ok.req, on_res, &ok), 0);
	resolver_cancel(W.r, &ok.req);
	assert_int_equal(resolver_lookup(W.r, "under_score-dash.test.", &ok.req, on_res, &ok), 0);
	resolver_cancel(W.r, &ok.req);
	run_for(50);
	assert_int_equal(x.called + ok.called, 0);
}

/* In-flight queries are bounded; resolver_free with everything pending
 * calls no callback (and, under valgrind, leaks nothing). */
static void test_inflight_bound_and_free(void **state)
{
	const int n = RESOLVE_MAX_INFLIGHT;
	struct res *x = calloc(n + 1, sizeof(*x));
	char name[64];
	int called = 0;

	(void)state;
	assert_non_null(x);
	fake_drop_unknown(&W.dns);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "n%d.cap.test", i);
		assert_int_equal(resolver_lookup(W.r, name, &x[i].req, on_res, &x[i]), 0);
	}
	assert_int_equal(resolver_lookup(W.r, "one-more.cap.test", &x[n].req, on_res, &x[n]),
			 -EAGAIN);
	assert_int_equal(stats().in_flight, n);
	/* A name already in flight still joins its query. */
	resolve_req_init(&x[n].req);
	assert_int_equal(resolver_lookup(W.r, "n0.cap.test", &x[n].req, on_res, &x[n]), 0);
	run_for(100);
	resolver_free(W.r);
	W.r = NULL;
	for (int i = 0; i <= n; i++)
		called += x[i].called;
	assert_int_equal(called, 0);
	free(x);
}

static void test_new_errors(void **state)
{
	struct sl_err err = { 0 };
	struct resolver *r;

	(void)state;
	r = resolver_new(W.l, "not an address", 16, &err);
	assert_null(r);
	assert_non_null(
		strstr(sl_err_msg(&err), "upstream_resolvers: bad server list `not an address`: "));
	assert_int_equal(sl_err_errno(&err), 0); /* c-ares' code, not an errno */
	/* The system configuration: created and freed, nothing sent. */
	r = resolver_new(W.l, NULL, 16, &err);
	assert_non_null(r);
	resolver_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_and_aaaa, setup, teardown),
		cmocka_unit_test_setup_teardown(test_at_most_16_v4_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ttl_honoured, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nxdomain_and_nodata, setup, teardown),
		cmocka_unit_test_setup_teardown(test_servfail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deadline_with_two_servers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_set_deadline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eviction_lru, setup_cache3, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_share_one_query, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lookup_from_callback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inflight_bound_and_free, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_errors, setup, teardown),
	};

	alarm(300); /* every wait is bounded; this bounds a bug's hang too */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
