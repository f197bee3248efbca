// SPDX-License-Identifier: MIT
/* Unit tests for the DNS filter server (dnsfilter/server.c) on its own:
 * no broker, a fake of struct dns_server_ops, in a network namespace of
 * the test's own (its sockets never reach the machine's network). */
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/addr.h"
#include "common/loop.h"
#include "dnsfilter/dnsfilter.h"
#include "policy/policy.h"

#define PORT 5353
#define WAIT_MS 5000 /* every wait is bounded by this */

static bool have_ns; /* the process is in a namespace of its own, lo up */

static const char policy_yaml[] = "version: 1\n"
				  "egress:\n"
				  "  allow:\n"
				  "    - host: api.example.com\n";

/* What the fake broker saw. Its one sandbox is every source, or none. */
struct fake {
	struct policy *pol;
	struct dns_synth *synth;
	struct dns_client_state st;
	bool known;
	int lookups, puts, audits;
	char sandbox[32], decision[16], reason[32], name[DNS_NAME_TEXT_MAX + 1];
	char count_answer[32];
};

static int fake_lookup(void *ctx, const struct sl_addr *src, struct dns_client *c)
{
	struct fake *f = ctx;

	(void)src;
	if (!f->known)
		return -ENOENT;
	f->lookups++;
	*c = (struct dns_client){
		.handle = f,
		.name = "sb1",
		.policy = policy_ref(f->pol),
		.synth = f->synth,
		.state = &f->st,
	};
	return 0;
}

static void fake_put(void *ctx, struct dns_client *c)
{
	struct fake *f = ctx;

	assert_ptr_equal(c->handle, f);
	f->puts++;
	policy_unref(c->policy);
	c->policy = NULL;
}

static void fake_audit(void *ctx, const struct dns_client *c, const struct sl_addr *src,
		       uint16_t sport, const struct dns_filter_result *res)
{
	struct fake *f = ctx;

	(void)src;
	(void)sport;
	f->audits++;
	snprintf(f->sandbox, sizeof(f->sandbox), "%s", c ? c->name : "(none)");
	snprintf(f->decision, sizeof(f->decision), "%s", res->decision);
	snprintf(f->reason, sizeof(f->reason), "%s", res->reason ? res->reason : "");
	snprintf(f->name, sizeof(f->name), "%s", res->name);
}

static void fake_count(void *ctx, const char *answer, const char *decision, const char *reason)
{
	struct fake *f = ctx;

	(void)decision;
	(void)reason;
	snprintf(f->count_answer, sizeof(f->count_answer), "%s", answer);
}

static const struct dns_server_ops fake_ops = {
	.lookup = fake_lookup,
	.put = fake_put,
	.audit = fake_audit,
	.count = fake_count,
};

struct fx {
	struct fake f;
	struct loop *l;
	struct dns_server *srv;
};

static int setup(void **state)
{
	struct policy_error perr;
	struct sl_addr net;
	unsigned plen;
	struct fx *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	assert_int_equal(
		policy_load_buffer("t.yaml", policy_yaml, strlen(policy_yaml), &x->f.pol, &perr),
		0);
	assert_int_equal(addr_parse_cidr("198.18.0.0/15", &net, &plen), 0);
	x->f.synth = dns_synth_new(&net, plen, DNS_SYNTH_MAX_NAMES);
	assert_non_null(x->f.synth);
	pthread_mutex_init(&x->f.st.lock, NULL);
	x->l = loop_new();
	assert_non_null(x->l);
	if (have_ns)
		assert_int_equal(dns_server_start(x->l, 7, PORT, &fake_ops, &x->f, &x->srv), 0);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;

	dns_server_stop(x->srv);
	loop_free(x->l);
	pthread_mutex_destroy(&x->f.st.lock);
	dns_synth_free(x->f.synth);
	policy_unref(x->f.pol);
	free(x);
	return 0;
}

/* A query for @name, type A, id 0x1234. Returns its length. */
static size_t make_query(const char *name, uint8_t *q)
{
	size_t n = 12;
	const char *p = name;

	memset(q, 0, 12);
	q[0] = 0x12, q[1] = 0x34, q[2] = 0x01, q[5] = 1;
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t len = dot ? (size_t)(dot - p) : strlen(p);

		q[n++] = (uint8_t)len;
		memcpy(q + n, p, len);
		n += len;
		p += len + (dot ? 1 : 0);
	}
	q[n++] = 0;
	q[n++] = 0, q[n++] = 1; /* A */
	q[n++] = 0, q[n++] = 1; /* IN */
	return n;
}

/* Runs the loop until @done(@arg), polling every 5 ms; false after WAIT_MS. */
struct poll_state {
	struct timer t, watchdog;
	struct loop *l;
	bool (*done)(void *arg);
	void *arg;
	bool ok;
};

static void poll_cb(struct timer *t)
{
	struct poll_state *p = container_of(t, struct poll_state, t);

	if (p->done(p->arg)) {
		p->ok = true;
		loop_stop(p->l);
		return;
	}
	loop_timer_arm(p->l, &p->t, 5);
}

static void watchdog_cb(struct timer *t)
{
	struct poll_state *p = container_of(t, struct poll_state, watchdog);

	loop_stop(p->l);
}

static bool run_until(struct loop *l, bool (*done)(void *), void *arg)
{
	struct poll_state p = {
		.t.cb = poll_cb, .watchdog.cb = watchdog_cb, .l = l, .done = done, .arg = arg
	};

	assert_int_equal(loop_timer_arm(l, &p.t, 0), 0);
	assert_int_equal(loop_timer_arm(l, &p.watchdog, WAIT_MS), 0);
	assert_int_equal(loop_run(l), 0);
	loop_timer_cancel(l, &p.t);
	loop_timer_cancel(l, &p.watchdog);
	return p.ok;
}

struct reply {
	int fd;
	uint8_t buf[1024];
	ssize_t len;
	size_t want; /* TCP: bytes to read in all */
};

static bool got_datagram(void *arg)
{
	struct reply *r = arg;

	r->len = recv(r->fd, r->buf, sizeof(r->buf), MSG_DONTWAIT);
	return r->len > 0;
}

static int udp_client(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(PORT),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

/* A sandbox's allowed name: answered from its map, audited under its name,
 * and the references lookup() took are all given back. */
static void test_udp_sandbox(void **state)
{
	struct fx *x = *state;
	struct reply r = { 0 };
	uint8_t q[512];
	size_t n = make_query("api.example.com", q);

	if (!have_ns)
		skip();
	x->f.known = true;
	r.fd = udp_client();
	assert_int_equal(send(r.fd, q, n, 0), (ssize_t)n);
	assert_true(run_until(x->l, got_datagram, &r));
	assert_true(r.len >= 12);
	assert_int_equal(r.buf[0], 0x12);
	assert_int_equal(r.buf[3] & 0x0f, 0); /* NOERROR */
	assert_int_equal(r.buf[6] << 8 | r.buf[7], 1);
	assert_string_equal(x->f.sandbox, "sb1");
	assert_string_equal(x->f.decision, "allow");
	assert_string_equal(x->f.name, "api.example.com");
	assert_int_equal(x->f.lookups, 1);
	assert_int_equal(x->f.puts, 1);
	close(r.fd);
}

/* A name outside the policy: NXDOMAIN, audited as a denial. */
static void test_udp_denied(void **state)
{
	struct fx *x = *state;
	struct reply r = { 0 };
	uint8_t q[512];
	size_t n = make_query("elsewhere.example.org", q);

	if (!have_ns)
		skip();
	x->f.known = true;
	r.fd = udp_client();
	assert_int_equal(send(r.fd, q, n, 0), (ssize_t)n);
	assert_true(run_until(x->l, got_datagram, &r));
	assert_true(r.len >= 12);
	assert_int_equal(r.buf[3] & 0x0f, 3); /* NXDOMAIN */
	assert_string_equal(x->f.decision, "deny");
	assert_int_equal(x->f.lookups, x->f.puts);
	close(r.fd);
}

/* A source that is no sandbox: REFUSED, audited with no sandbox, nothing
 * to give back. */
static void test_udp_unknown(void **state)
{
	struct fx *x = *state;
	struct reply r = { 0 };
	uint8_t q[512];
	size_t n = make_query("api.example.com", q);

	if (!have_ns)
		skip();
	x->f.known = false;
	r.fd = udp_client();
	assert_int_equal(send(r.fd, q, n, 0), (ssize_t)n);
	assert_true(run_until(x->l, got_datagram, &r));
	assert_true(r.len >= 12);
	assert_int_equal(r.buf[3] & 0x0f, 5); /* REFUSED */
	assert_string_equal(x->f.sandbox, "(none)");
	assert_string_equal(x->f.reason, "unknown-source");
	assert_int_equal(x->f.lookups, 0);
	assert_int_equal(x->f.puts, 0);
	close(r.fd);
}

static bool got_stream(void *arg)
{
	struct reply *r = arg;
	ssize_t k = recv(r->fd, r->buf + r->len, sizeof(r->buf) - (size_t)r->len, MSG_DONTWAIT);

	if (k > 0)
		r->len += k;
	return (size_t)r->len >= r->want;
}

static bool tcp_slot_back(void *arg)
{
	struct fx *x = arg;

	return atomic_load(&x->f.st.tcp) == 0 && x->f.lookups == x->f.puts;
}

/* TCP: two queries on one connection, each answered; the connection holds
 * one of the sandbox's TCP slots and a reference until it closes, then
 * gives both back. */
static void test_tcp_sandbox(void **state)
{
	struct fx *x = *state;
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(PORT),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct reply r = { 0 };
	uint8_t q[1024];
	size_t n1, n2, rlen1;

	if (!have_ns)
		skip();
	x->f.known = true;
	n1 = make_query("api.example.com", q + 2);
	q[0] = 0, q[1] = (uint8_t)n1;
	n2 = make_query("elsewhere.example.org", q + 2 + n1 + 2);
	q[2 + n1] = 0, q[2 + n1 + 1] = (uint8_t)n2;
	r.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(r.fd >= 0);
	assert_int_equal(connect(r.fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(send(r.fd, q, 4 + n1 + n2, 0), (ssize_t)(4 + n1 + n2));
	/* The first answer's length prefix, then both answers. */
	r.want = 2;
	assert_true(run_until(x->l, got_stream, &r));
	rlen1 = (size_t)(r.buf[0] << 8 | r.buf[1]);
	r.want = 2 + rlen1 + 2;
	assert_true(run_until(x->l, got_stream, &r));
	r.want += (size_t)(r.buf[2 + rlen1] << 8 | r.buf[2 + rlen1 + 1]);
	assert_true(run_until(x->l, got_stream, &r));
	assert_int_equal(r.buf[2 + 3] & 0x0f, 0);	      /* NOERROR */
	assert_int_equal(r.buf[2 + rlen1 + 2 + 3] & 0x0f, 3); /* NXDOMAIN */
	assert_int_equal(atomic_load(&x->f.st.tcp), 1);
	assert_true(x->f.lookups > x->f.puts); /* the connection's reference */
	close(r.fd);
	assert_true(run_until(x->l, tcp_slot_back, x));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_udp_sandbox, setup, teardown),
		cmocka_unit_test_setup_teardown(test_udp_denied, setup, teardown),
		cmocka_unit_test_setup_teardown(test_udp_unknown, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tcp_sandbox, setup, teardown),
	};

	/* Its own network namespace, lo up: the server binds 0.0.0.0:PORT,
	 * which then reaches nothing but this process. Not permitted (no
	 * root): the tests are skipped. */
	if (unshare(CLONE_NEWNET) == 0) {
		struct ifreq ifr = { 0 };
		int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
		if (s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
			ifr.ifr_flags |= IFF_UP;
			have_ns = ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
		}
		if (s >= 0)
			close(s);
	}
	if (!have_ns)
		fprintf(stderr, "test_dns_server: no network namespace of its own: skipped\n");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
