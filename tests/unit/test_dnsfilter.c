// SPDX-License-Identifier: MIT
/* Unit tests for the DNS filter's decision (dnsfilter/filter.c), the
 * synthetic address map (dnsfilter/synth.c) and the query rate bucket:
 * replies are read back byte by byte, as a client would. */
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

#include "common/addr.h"
#include "dnsfilter/dnsfilter.h"
#include "policy/policy.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const char policy_yaml[] = "version: 1\n"
				  "egress:\n"
				  "  allow:\n"
				  "    - host: api.example.com\n"
				  "    - host: other.example.com\n"
				  "      ports: [8443]\n"
				  "    - host: \"*.wild.test\"\n"
				  "    - cidr: 203.0.113.0/24\n";

struct fx {
	struct policy *p;
	struct dns_synth *s;
	struct sl_addr net;
	unsigned plen;
};

static int setup(void **state)
{
	struct policy_error err;
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(
		policy_load_buffer("test.yaml", policy_yaml, strlen(policy_yaml), &f->p, &err), 0);
	assert_int_equal(addr_parse_cidr("198.18.0.0/15", &f->net, &f->plen), 0);
	f->s = dns_synth_new(&f->net, f->plen, DNS_SYNTH_MAX_NAMES);
	assert_non_null(f->s);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	dns_synth_free(f->s);
	policy_unref(f->p);
	free(f);
	return 0;
}

/* ---- building queries and reading replies ------------------------------ */

struct qspec {
	uint16_t id;
	uint16_t flags; /* default RD */
	const char *name;
	uint16_t qtype;
	uint16_t qclass; /* 0: IN */
	bool edns;
	uint16_t udp_size;
};

/* Writes a query for @s->name (dots separate labels; a name that needs
 * other bytes is written by hand, see test_weird_names()). Returns its
 * length. */
static size_t mkq(const struct qspec *s, uint8_t *b)
{
	size_t o = 0;
	const char *p = s->name;
	uint16_t fl = s->flags ? s->flags : 0x0100;

	b[o++] = (uint8_t)(s->id >> 8);
	b[o++] = (uint8_t)s->id;
	b[o++] = (uint8_t)(fl >> 8);
	b[o++] = (uint8_t)fl;
	b[o++] = 0, b[o++] = 1;				/* QDCOUNT */
	b[o++] = 0, b[o++] = 0, b[o++] = 0, b[o++] = 0; /* AN, NS */
	b[o++] = 0, b[o++] = s->edns ? 1 : 0;
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);

		b[o++] = (uint8_t)l;
		memcpy(b + o, p, l);
		o += l;
		p += l;
		if (*p == '.')
			p++;
	}
	b[o++] = 0;
	b[o++] = (uint8_t)(s->qtype >> 8);
	b[o++] = (uint8_t)s->qtype;
	b[o++] = (uint8_t)((s->qclass ? s->qclass : 1) >> 8);
	b[o++] = (uint8_t)(s->qclass ? s->qclass : 1);
	if (s->edns) {
		uint16_t u = s->udp_size ? s->udp_size : 1232;

		b[o++] = 0;
		b[o++] = 0, b[o++] = 41;
		b[o++] = (uint8_t)(u >> 8), b[o++] = (uint8_t)u;
		b[o++] = 0, b[o++] = 0, b[o++] = 0, b[o++] = 0;
		b[o++] = 0, b[o++] = 0;
	}
	return o;
}

struct reply {
	uint16_t id;
	bool qr, tc, aa, ra, rd;
	uint16_t rcode; /* with the OPT RR's upper bits */
	uint16_t qd, an, ns, ar;
	char qname_raw[300]; /* the question's name as sent back, dotted */
	uint16_t qtype;
	unsigned n_a;
	uint8_t a[4]; /* first A record */
	uint32_t a_ttl;
	uint16_t ns_type; /* first authority record's type */
	uint32_t soa_min;
	bool opt;
	int ede; /* -1: none */
};

static uint16_t g16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t g32(const uint8_t *p)
{
	return (uint32_t)g16(p) << 16 | g16(p + 2);
}

/* Skips a name (labels or a pointer). */
static size_t skip_name(const uint8_t *m, size_t n, size_t o)
{
	for (;;) {
		assert_true(o < n);
		if ((m[o] & 0xc0) == 0xc0)
			return o + 2;
		if (m[o] == 0)
			return o + 1;
		o += 1u + m[o];
	}
}

static void read_reply(const uint8_t *m, size_t n, struct reply *r)
{
	size_t o = 12, t = 0;

	memset(r, 0, sizeof(*r));
	r->ede = -1;
	assert_true(n >= 12);
	r->id = g16(m);
	r->qr = m[2] & 0x80;
	r->aa = m[2] & 0x04;
	r->tc = m[2] & 0x02;
	r->rd = m[2] & 0x01;
	r->ra = m[3] & 0x80;
	r->rcode = m[3] & 0xf;
	r->qd = g16(m + 4);
	r->an = g16(m + 6);
	r->ns = g16(m + 8);
	r->ar = g16(m + 10);
	if (r->qd) {
		assert_int_equal(r->qd, 1);
		while (m[o]) {
			if (t)
				r->qname_raw[t++] = '.';
			memcpy(r->qname_raw + t, m + o + 1, m[o]);
			t += m[o];
			o += 1u + m[o];
		}
		o++;
		r->qtype = g16(m + o);
		o += 4;
	}
	for (unsigned i = 0; i < (unsigned)r->an + r->ns + r->ar; i++) {
		uint16_t type, rdlen;
		uint32_t ttl;

		o = skip_name(m, n, o);
		assert_true(o + 10 <= n);
		type = g16(m + o);
		ttl = g32(m + o + 4);
		rdlen = g16(m + o + 8);
		o += 10;
		assert_true(o + rdlen <= n);
		if (i < r->an) {
			if (type == DNS_TYPE_A) {
				assert_int_equal(rdlen, 4);
				if (!r->n_a++) {
					memcpy(r->a, m + o, 4);
					r->a_ttl = ttl;
				}
			}
		} else if (i < (unsigned)r->an + r->ns) {
			if (!r->ns_type)
				r->ns_type = type;
			if (type == DNS_TYPE_SOA)
				r->soa_min = g32(m + o + rdlen - 4);
		} else if (type == DNS_TYPE_OPT) {
			size_t x = o;

			r->opt = true;
			r->rcode |= (uint16_t)((ttl >> 24) << 4);
			while (x + 4 <= o + rdlen) {
				uint16_t code = g16(m + x), olen = g16(m + x + 2);

				if (code == 15 && olen >= 2)
					r->ede = g16(m + x + 4);
				x += 4u + olen;
			}
		}
		o += rdlen;
	}
	assert_int_equal(o, n); /* nothing after the records */
}

/* Ask @name/@qtype through the filter; returns the reply length. */
static int ask(struct fx *f, const struct qspec *qs, bool udp, struct reply *r,
	       struct dns_filter_result *res)
{
	uint8_t q[600], out[512];
	size_t ql = mkq(qs, q);
	int n = dns_filter_answer(f->p, f->s, q, ql, udp, out, sizeof(out), res);

	if (n > 0)
		read_reply(out, (size_t)n, r);
	return n;
}

/* ask(), for a sandbox in audit mode. */
static int ask_audit(struct fx *f, const struct qspec *qs, struct reply *r,
		     struct dns_filter_result *res)
{
	uint8_t q[600], out[512];
	size_t ql = mkq(qs, q);
	int n = dns_filter_answer_mode(f->p, f->s, true, q, ql, true, out, sizeof(out), res);

	if (n > 0)
		read_reply(out, (size_t)n, r);
	return n;
}

static void a_text(const struct reply *r, char *buf, size_t len)
{
	snprintf(buf, len, "%u.%u.%u.%u", r->a[0], r->a[1], r->a[2], r->a[3]);
}

/* ---- the filter ---------------------------------------------------------- */

static void test_allowed_a(void **state)
{
	struct fx *f = *state;
	struct qspec qs = { .id = 0x1234, .name = "api.example.com", .qtype = DNS_TYPE_A };
	struct dns_filter_result res;
	struct reply r;
	struct sl_addr a;
	char txt[32];

	assert_true(ask(f, &qs, true, &r, &res) > 0);
	assert_int_equal(r.id, 0x1234);
	assert_true(r.qr && r.rd && r.ra && !r.aa && !r.tc);
	assert_int_equal(r.rcode, DNS_RCODE_NOERROR);
	assert_int_equal(r.an, 1);
	assert_int_equal(r.n_a, 1);
	assert_int_equal(r.a_ttl, DNS_FILTER_TTL);
	assert_int_equal(r.a_ttl, 60);
	assert_false(r.opt);
	a_text(&r, txt, sizeof(txt));
	/* The first name of a fresh map gets the pool's first host address. */
	assert_string_equal(txt, "198.18.0.1");
	assert_int_equal(addr_parse(txt, &a), 0);
	assert_true(addr_in_prefix(&a, &f->net, f->plen));

	assert_string_equal(res.name, "api.example.com");
	assert_string_equal(res.type, "A");
	assert_string_equal(res.answer, "198.18.0.1");
	assert_string_equal(res.decision, "allow");
	assert_string_equal(res.reason, "allowed");
	assert_string_equal(res.metric, "synthetic");
	assert_int_equal(res.rcode, DNS_RCODE_NOERROR);

	/* with EDNS: an OPT RR comes back */
	qs.edns = true;
	assert_true(ask(f, &qs, true, &r, &res) > 0);
	assert_true(r.opt);
	assert_int_equal(r.n_a, 1);
	assert_string_equal(res.answer, "198.18.0.1");
}

/* Audit mode: a name outside the policy gets a synthetic address (would-deny,
 * not-allowlisted), an allowed one is as before, a bad name stays NXDOMAIN. */
static int ask_hold(struct fx *f, const struct qspec *qs, struct reply *r,
		    struct dns_filter_result *res);

static void test_audit_mode(void **state)
{
	struct fx *f = *state;
	struct qspec qs = { .id = 7, .name = "evil.example.com", .qtype = DNS_TYPE_A };
	struct dns_filter_result res;
	struct reply r;
	char txt[32];

	assert_true(ask_audit(f, &qs, &r, &res) > 0);
	assert_int_equal(r.rcode, DNS_RCODE_NOERROR);
	assert_int_equal(r.n_a, 1);
	a_text(&r, txt, sizeof(txt));
	assert_string_equal(txt, "198.18.0.1");
	assert_string_equal(res.answer, "198.18.0.1");
	assert_string_equal(res.decision, "would-deny");
	assert_string_equal(res.reason, "not-allowlisted");
	assert_string_equal(res.metric, "synthetic");
	/* The same name, the same address; in enforce mode it is refused. */
	assert_true(ask_audit(f, &qs, &r, &res) > 0);
	a_text(&r, txt, sizeof(txt));
	assert_string_equal(txt, "198.18.0.1");
	assert_true(ask(f, &qs, true, &r, &res) > 0);
	assert_int_equal(r.rcode, DNS_RCODE_NXDOMAIN);
	assert_string_equal(res.decision, "deny");

	qs.qtype = DNS_TYPE_AAAA;
	assert_true(ask_audit(f, &qs, &r, &res) > 0);
	assert_int_equal(r.rcode, DNS_RCODE_NOERROR);
	assert_int_equal(r.an, 0);
	assert_string_equal(res.decision, "would-deny");

	qs.qtype = DNS_TYPE_A;
	qs.name = "api.example.com";
	assert_true(ask_audit(f, &qs, &r, &res) > 0);
	assert_string_equal(res.decision, "allow");
	assert_string_equal(res.reason, "allowed");

	qs.name = "a b.example.com";
	assert_true(ask_audit(f, &qs, &r, &res) > 0);
	assert_int_equal(r.rcode, DNS_RCODE_NXDOMAIN);
	assert_string_equal(res.decision, "deny");

	/* An address literal asked as a name (the resolver would answer it
	 * itself): a synthetic address for it would lead to that address
	 * with no cidr rule to allow it. Refused in audit and hold mode. */
	{
		static const char *const literals[] = { "11.0.2.10", "0177.0.0.1", "10.0.0.5.",
							"123" };
		size_t i;

		for (i = 0; i < sizeof(literals) / sizeof(literals[0]); i++) {
			qs.name = literals[i];
			assert_true(ask_audit(f, &qs, &r, &res) > 0);
			assert_int_equal(r.rcode, DNS_RCODE_NXDOMAIN);
			assert_int_equal(r.n_a, 0);
			assert_string_equal(res.decision, "deny");
			assert_string_equal(res.reason, "bad-name");
			assert_true(ask_hold(f, &qs, &r, &res) > 0);
			assert_int_equal(r.rcode, DNS_RCODE_NXDOMAIN);
			assert_string_equal(res.reason, "bad-name");
		}
	}
}

/* ask(), for a sandbox whose policy says `unlisted: hold`. */
static int ask_hold(struct fx *f, const struct qspec *qs, struct reply *r,
		    struct dns_filter_result *res)
{
	uint8_t q[600], out[512];
	size_t ql = mkq(qs, q);
	int n = dns_filter_answer_unlisted(f->p, f->s, DNS_UNLISTED_HOLD, q, ql, true, out,
					   sizeof(out), res);

	if (n > 0)
		read_reply(out, (size_t)n, r);
	return n;
}

/* `unlisted: hold`: a name outside the policy gets a synthetic address
 * (decision hold, not-allowlisted), so that its connection comes to the
 * proxy and waits there; a bad name stays NXDOMAIN. */
static void test_hold_mode(void **state)
{
	struct fx *f = *state;
	struct qspec qs = { .id = 9, .name = "held.example.com", .qtype = DNS_TYPE_A };
	struct dns_filter_result res;
	struct reply r;
	char txt[32];

	assert_true(ask_hold(f, &qs, &r, &res) > 0);
	assert_int_equal(r.rcode, DNS_RCODE_NOERROR);
	assert_int_equal(r.n_a, 1);
	a_text(&r, txt, sizeof(txt));
	assert_string_equal(txt, "198.18.0.1");
	assert_string_equal(res.decision, "hold");
	assert_string_equal(res.reason, "not-allowlisted");
	assert_string_equal(res.metric, "synthetic");
	assert_int_equal(r.ede, -1); /* no Extended DNS Error */

	qs.qtype = DNS_TYPE_AAAA;
	assert_true(ask_hold(f, &qs, &r, &res) > 0);
	assert_int_equal(r.rcode, DNS_RCODE_NOERROR);
	assert_int_equal(r.an, 0);
	assert_string_equal(res.decision, "hold");

	qs.qtype = DNS_TYPE_A;
	qs.name = "api.example.com";
	assert_true(ask_hold(f, &qs, &r, &res) > 0);
	assert_string_equal(res.decision, "allow");

	qs.name = "a b.example.com";
	assert_true(ask_hold(f, &qs, &r, &res) > 0);
	assert_int_equal(r.rcode, DNS_RCODE_NXDOMAIN);
	assert_string_equal(res.decision, "deny");
	assert_string_equal(res.reason, "bad-name");
}

static void test_allowed_other_types_nodata(void **state)
{
	struct fx *f = *state;
	static const uint16_t types[] = { DNS_TYPE_AAAA, DNS_TYPE_TXT,	 DNS_TYPE_ANY,
					  DNS_TYPE_NULL, DNS_TYPE_MX,	 DNS_TYPE_HTTPS,
					  DNS_TYPE_SVCB, DNS_TYPE_CNAME, DNS_TYPE_PTR,
					  DNS_TYPE_NS,	 DNS_TYPE_SOA,	 DNS_TYPE_SRV,
					  DNS_TYPE_AXFR, 65280 };

	for (size_t i = 0; i < ARRAY_SIZE(types); i++) {
		struct qspec qs = {
			.id = 7, .name = "api.example.com", .qtype = types[i], .edns = i % 2
		};
		struct dns_filter_result res;
		struct reply r;

		printf("# type %u\n", types[i]);
		assert_true(ask(f, &qs, true, &r, &res) > 0);
		assert_int_equal(r.rcode, DNS_RCODE_NOERROR);
		assert_int_equal(r.an, 0);
		assert_int_equal(r.ns, 1);
		assert_int_equal(r.ns_type, DNS_TYPE_SOA);
		assert_int_equal(r.soa_min, DNS_FILTER_TTL);
		assert_int_equal(r.qtype, types[i]);
		assert_string_equal(res.answer, "NODATA");
		assert_string_equal(res.decision, "allow");
		assert_string_equal(res.reason, "allowed");
		assert_string_equal(res.metric, "nodata");
		assert_string_equal(res.type, dns_type_name(types[i]));
	}
	/* NODATA hands out no address: the map is still empty. */
	assert_int_equal(dns_synth_count(f->s), 0);
}

static void test_other_classes(void **state)
{
	struct fx *f = *state;
	struct qspec qs = { .id = 9, .name = "api.example.com", .qtype = DNS_TYPE_A };
	struct dns_filter_result res;
	struct reply r;

	qs.qclass = 3; /* CH */
	assert_true(ask(f, &qs, true, &r, &res) > 0);
	assert_int_equal(r.rcode, DNS_RCODE_NOERROR);
	assert_int_equal(r.an, 0);
	assert_string_equal(res.answer, "NODATA");
	qs.qclass = 255; /* ANY */
	assert_true(ask(f, &qs, true, &r, &res) > 0);
	assert_int_equal(r.n_a, 1);
	assert_string_equal(res.metric, "synthetic");
}

static void test_blocked_nxdomain_ede(void **state)
{
	struct fx *f = *state;
	static const char *const names[] = { "evil.example.com", "example.com", "wild.test",
					     "api.example.com.evil.net", "xapi.example.com" };

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		struct qspec qs = {
			.id = 0x4242, .name = names[i], .qtype = DNS_TYPE_A, .edns = true
		};
		struct dns_filter_result res;
		struct reply r;

		printf("# %s\n", names[i]);
		assert_true(ask(f, &qs, true, &r, &res) > 0);
		assert_int_equal(r.id, 0x4242);
		assert_int_equal(r.rcode, DNS_RCODE_NXDOMAIN);
		assert_int_equal(r.an, 0);
		assert_int_equal(r.ns, 0); /* no SOA: not cached negatively */
		assert_true(r.opt);
		assert_int_equal(r.ede, DNS_EDE_BLOCKED);
		assert_string_equal(r.qname_raw, names[i]);
		assert_string_equal(res.answer, "NXDOMAIN");
		assert_string_equal(res.decision, "deny");
		assert_string_equal(res.reason, "not-allowlisted");
		assert_string_equal(res.metric, "nxdomain");
		assert_string_equal(res.name, names[i]);

		/* without EDNS there is nowhere to put the EDE */
		qs.edns = false;
		assert_true(ask(f, &qs, true, &r, &res) > 0);
		assert_int_equal(r.rcode, DNS_RCODE_NXDOMAIN);
		assert_false(r.opt);
		assert_int_equal(r.ede, -1);

		/* any type: NXDOMAIN too */
		qs.qtype = DNS_TYPE_AAAA;
		assert_true(ask(f, &qs, true, &r, &res) > 0);
		assert_int_equal(r.rcode, DNS_RCODE_NXDOMAIN);
	}
	/* No address was handed out for a blocked name. */
	assert_int_equal(dns_synth_count(f->s), 0);
}

static void test_wildcards(void **state)
{
	struct fx *f = *state;
	static const struct {
		const char *name;
		bool allowed;
	} t[] = {
		{ "a.wild.test", true }, { "a.b.c.wild.test", true }, { "WILD.wild.test", true },
		{ "wild.test", false },	 { "awild.test", false },     { "a.wild.test.evil", false },
	};

	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		struct qspec qs = { .id = 1, .name = t[i].name, .qtype = DNS_TYPE_A, .edns = true };
		struct dns_filter_result res;
		struct reply r;

		printf("# %s\n", t[i].name);
		assert_true(ask(f, &qs, true, &r, &res) > 0);
		if (t[i].allowed) {
			assert_int_equal(r.rcode, DNS_RCODE_NOERROR);
			assert_int_equal(r.n_a, 1);
		} else {
			assert_int_equal(r.rcode, DNS_RCODE_NXDOMAIN);
			assert_int_equal(r.ede, DNS_EDE_BLOCKED);
		}
	}
	/* A rule restricted to a port still makes the name resolvable. */
	{
		struct qspec qs = { .id = 1, .name = "other.example.com", .qtype = DNS_TYPE_A };
		struct dns_filter_result res;
		struct reply r;

		assert_true(ask(f, &qs, true, &r, &res) > 0);
		assert_int_equal(r.n_a, 1);
	}
}

static void test_stable_and_distinct(void **state)
{
	struct fx *f = *state;
	struct dns_filter_result res;
	struct reply r;
	char a1[32], a2[32], b1[32], c1[32];
	struct qspec qa = { .id = 1, .name = "api.example.com", .qtype = DNS_TYPE_A };
	struct qspec qb = { .id = 2, .name = "x.wild.test", .qtype = DNS_TYPE_A };

	assert_true(ask(f, &qa, true, &r, &res) > 0);
	a_text(&r, a1, sizeof(a1));
	assert_true(ask(f, &qb, false, &r, &res) > 0);
	a_text(&r, b1, sizeof(b1));
	/* many other names in between */
	for (int i = 0; i < 300; i++) {
		char n[64];
		struct qspec qn = { .id = 3, .name = n, .qtype = DNS_TYPE_A };

		snprintf(n, sizeof(n), "n%d.wild.test", i);
		assert_true(ask(f, &qn, true, &r, &res) > 0);
		assert_int_equal(r.n_a, 1);
	}
	assert_true(ask(f, &qa, false, &r, &res) > 0); /* TCP: same */
	a_text(&r, a2, sizeof(a2));
	assert_string_equal(a1, a2);
	assert_string_not_equal(a1, b1);
	/* mixed case (0x20) and a trailing dot in the map's own API */
	qa.name = "ApI.ExAmPlE.cOm";
	assert_true(ask(f, &qa, true, &r, &res) > 0);
	a_text(&r, c1, sizeof(c1));
	assert_string_equal(a1, c1);
	/* the reply echoes the requester's spelling */
	assert_string_equal(r.qname_raw, "ApI.ExAmPlE.cOm");
	assert_string_equal(res.name, "api.example.com");
	assert_int_equal(dns_synth_count(f->s), 302);
}

static void test_weird_names(void **state)
{
	struct fx *f = *state;
	/* api.example.com spelled with a dot inside a label, a space, a NUL,
	 * a control byte, a high byte; and a name that is shaped wrong for a
	 * host name though printable. W() passes a wire name with its root
	 * label: the string's NUL is that label. */
#define W(s) (const uint8_t *)(s), sizeof(s)
	static const struct {
		const char *what;
		const uint8_t *wire;
		size_t len;
		const char *reason;
	} t[] = {
		{ "dot in label", W("\017api.example.com"), "bad-name" },
		{ "space", W("\4api \7example\3com"), "bad-name" },
		{ "NUL", W("\4api\0\7example\3com"), "bad-name" },
		{ "control", W("\4api\n\7example\3com"), "bad-name" },
		{ "high byte", W("\4api\351\7example\3com"), "bad-name" },
		{ "bang", W("\4api!\7example\3com"), "bad-name" },
		{ "root", W(""), "bad-name" },
	};
#undef W

	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		uint8_t q[80], out[512];
		struct dns_filter_result res;
		struct reply r;
		size_t o = 0;
		int n;

		printf("# %s\n", t[i].what);
		memcpy(q, "\xab\xcd\x01\x00\x00\x01\x00\x00\x00\x00\x00\x01", 12);
		o = 12;
		memcpy(q + o, t[i].wire, t[i].len);
		o += t[i].len;
		memcpy(q + o, "\x00\x01\x00\x01", 4);
		o += 4;
		memcpy(q + o, "\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00", 11);
		o += 11;
		n = dns_filter_answer(f->p, f->s, q, o, true, out, sizeof(out), &res);
		assert_true(n > 0);
		read_reply(out, (size_t)n, &r);
		assert_int_equal(r.rcode, DNS_RCODE_NXDOMAIN);
		assert_int_equal(r.ede, DNS_EDE_BLOCKED);
		assert_string_equal(res.reason, t[i].reason);
		assert_string_equal(res.decision, "deny");
		assert_string_equal(res.answer, "NXDOMAIN");
	}
	assert_int_equal(dns_synth_count(f->s), 0);
}

static void test_formerr_and_friends(void **state)
{
	struct fx *f = *state;
	/* automatic, so that the compound literals may initialise it */
	const struct {
		const char *what;
		const uint8_t *msg;
		size_t len;
		uint16_t rcode;
		const char *reason;
	} t[] = {
#define B(...) (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ })
		{ "QDCOUNT 0", B(0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0), DNS_RCODE_FORMERR,
		  "formerr" },
		{ "name runs off", B(0, 2, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 5, 'a', 'b'),
		  DNS_RCODE_FORMERR, "formerr" },
		{ "trailing garbage",
		  B(0, 3, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 'a', 0, 0, 1, 0, 1, 0xff),
		  DNS_RCODE_FORMERR, "formerr" },
		{ "answer record in a query",
		  B(0, 4, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 'a', 0, 0, 1, 0, 1), DNS_RCODE_FORMERR,
		  "formerr" },
		{ "opcode STATUS", B(0, 5, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0), DNS_RCODE_NOTIMP,
		  "notimp" },
		{ "EDNS version 1",
		  B(0, 6, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 'a', 0, 0, 1, 0, 1, 0, 0, 41, 4, 0, 0, 1,
		    0, 0, 0, 0),
		  DNS_RCODE_BADVERS, "badvers" },
#undef B
	};

	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		uint8_t out[512];
		struct dns_filter_result res;
		struct reply r;
		int n;

		printf("# %s\n", t[i].what);
		n = dns_filter_answer(f->p, f->s, t[i].msg, t[i].len, true, out, sizeof(out), &res);
		assert_true(n > 0);
		read_reply(out, (size_t)n, &r);
		assert_int_equal(r.id, g16(t[i].msg));
		assert_true(r.qr);
		assert_int_equal(r.rcode, t[i].rcode);
		assert_int_equal(r.an, 0);
		assert_string_equal(res.reason, t[i].reason);
		assert_string_equal(res.decision, "deny");
		assert_string_equal(res.metric, t[i].reason);
	}
}

static void test_not_answered(void **state)
{
	struct fx *f = *state;
	struct qspec qs = {
		.id = 1, .flags = 0x8100, .name = "api.example.com", .qtype = DNS_TYPE_A
	};
	struct dns_filter_result res;
	uint8_t q[300], out[512];
	size_t ql = mkq(&qs, q);

	/* a response (answering it could loop two servers) */
	assert_int_equal(dns_filter_answer(f->p, f->s, q, ql, true, out, sizeof(out), &res), 0);
	assert_string_equal(res.metric, "dropped");
	assert_string_equal(res.answer, "DROPPED");
	assert_string_equal(res.reason, "not-a-query");
	/* shorter than a header */
	assert_int_equal(dns_filter_answer(f->p, f->s, q, 11, true, out, sizeof(out), &res), 0);
	assert_int_equal(dns_filter_answer(f->p, f->s, q, 0, true, out, sizeof(out), &res), 0);
	/* no room for the reply: nothing, never a partial message */
	qs.flags = 0;
	ql = mkq(&qs, q);
	assert_int_equal(dns_filter_answer(f->p, f->s, q, ql, true, out, 20, &res), 0);
	assert_string_equal(res.decision, "error");
}

/* The longest name: every reply still fits 512 bytes, so UDP never needs
 * TC, with or without EDNS (and with the smallest EDNS size). */
static void test_longest_name_fits_udp(void **state)
{
	struct fx *f = *state;
	char name[DNS_NAME_TEXT_MAX + 1];
	static const uint16_t types[] = { DNS_TYPE_A, DNS_TYPE_AAAA };
	size_t o = 0;

	/* "x." prefix + labels of 63 under wild.test: 253 characters */
	memset(name, 0, sizeof(name));
	while (o + 64 + 10 <= DNS_NAME_TEXT_MAX) {
		memset(name + o, 'a', 63);
		o += 63;
		name[o++] = '.';
	}
	while (o + 10 < DNS_NAME_TEXT_MAX)
		name[o++] = 'b';
	memcpy(name + o, ".wild.test", 10);
	o += 10;
	name[o] = '\0';
	assert_int_equal(strlen(name), DNS_NAME_TEXT_MAX);

	for (int edns = 0; edns < 2; edns++) {
		for (size_t i = 0; i < ARRAY_SIZE(types); i++) {
			struct qspec qs = { .id = 5,
					    .name = name,
					    .qtype = types[i],
					    .edns = edns,
					    .udp_size = 512 };
			struct dns_filter_result res;
			struct reply r;
			int n = ask(f, &qs, true, &r, &res);

			assert_true(n > 0 && n <= 512);
			assert_false(r.tc);
			assert_int_equal(r.rcode, DNS_RCODE_NOERROR);
			assert_int_equal(r.an, types[i] == DNS_TYPE_A ? 1 : 0);
		}
		/* blocked: the longest name with EDE text */
		name[o - 10] = '\0';
		{
			char bl[DNS_NAME_TEXT_MAX + 1];
			struct qspec qs = {
				.id = 6, .name = bl, .qtype = DNS_TYPE_A, .edns = edns
			};
			struct dns_filter_result res;
			struct reply r;
			int n;

			snprintf(bl, sizeof(bl), "%s.blocked.x", name);
			bl[DNS_NAME_TEXT_MAX] = '\0';
			if (bl[strlen(bl) - 1] == '.')
				bl[strlen(bl) - 1] = 'z';
			n = ask(f, &qs, true, &r, &res);
			assert_true(n > 0 && n <= 512);
			assert_int_equal(r.rcode, DNS_RCODE_NXDOMAIN);
		}
		name[o - 10] = '.';
	}
}

static void test_pool_full(void **state)
{
	struct fx *f = *state;
	struct dns_synth *small = dns_synth_new(&f->net, f->plen, 2);
	struct sl_addr a;
	uint8_t q[300], out[512];
	struct dns_filter_result res;
	struct reply r;
	struct qspec qs = { .id = 77, .name = "c.wild.test", .qtype = DNS_TYPE_A, .edns = true };
	size_t ql;
	int n;

	assert_non_null(small);
	assert_int_equal(dns_synth_get(small, "a.wild.test", &a), 0);
	assert_int_equal(dns_synth_get(small, "b.wild.test", &a), 0);
	assert_int_equal(dns_synth_get(small, "c.wild.test", &a), -ENOSPC);
	/* names that have an address keep it */
	assert_int_equal(dns_synth_get(small, "a.wild.test", &a), 0);

	ql = mkq(&qs, q);
	n = dns_filter_answer(f->p, small, q, ql, true, out, sizeof(out), &res);
	assert_true(n > 0);
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.rcode, DNS_RCODE_SERVFAIL);
	assert_int_equal(r.an, 0);
	assert_string_equal(res.answer, "SERVFAIL");
	assert_string_equal(res.decision, "error");
	assert_string_equal(res.reason, "synthetic-pool-full");
	assert_string_equal(res.metric, "servfail");
	/* an allowed name already mapped still works, NODATA still works */
	qs.name = "b.wild.test";
	ql = mkq(&qs, q);
	n = dns_filter_answer(f->p, small, q, ql, true, out, sizeof(out), &res);
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.n_a, 1);
	dns_synth_free(small);

	/* a /30 pool: offsets 1..3 only */
	{
		struct sl_addr net;
		unsigned plen;
		struct dns_synth *tiny;
		char t[ADDR_STRLEN];

		assert_int_equal(addr_parse_cidr("198.18.7.0/30", &net, &plen), 0);
		tiny = dns_synth_new(&net, plen, DNS_SYNTH_MAX_NAMES);
		assert_non_null(tiny);
		for (int i = 1; i <= 3; i++) {
			char nm[32];

			snprintf(nm, sizeof(nm), "n%d.x", i);
			assert_int_equal(dns_synth_get(tiny, nm, &a), 0);
			addr_format(&a, t, sizeof(t));
			snprintf(nm, sizeof(nm), "198.18.7.%d", i);
			assert_string_equal(t, nm);
		}
		assert_int_equal(dns_synth_get(tiny, "n4.x", &a), -ENOSPC);
		dns_synth_free(tiny);
	}
}

/* ---- the map ------------------------------------------------------------- */

static void test_synth_normalise(void **state)
{
	struct fx *f = *state;
	struct sl_addr a, b, c;
	char n[DNS_NAME_TEXT_MAX + 2];

	assert_int_equal(dns_synth_get(f->s, "API.Example.COM.", &a), 0);
	assert_int_equal(dns_synth_get(f->s, "api.example.com", &b), 0);
	assert_int_equal(dns_synth_get(f->s, "api.example.com.", &c), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_memory_equal(&a, &c, sizeof(a));
	assert_int_equal(dns_synth_count(f->s), 1);
	assert_int_equal(dns_synth_name(f->s, &a, n, sizeof(n)), 0);
	assert_string_equal(n, "api.example.com");

	assert_int_equal(dns_synth_get(f->s, "", &a), -EINVAL);
	assert_int_equal(dns_synth_get(f->s, ".", &a), -EINVAL);
	assert_int_equal(dns_synth_get(f->s, "a b.com", &a), -EINVAL);
	assert_int_equal(dns_synth_get(f->s, "a\x80.com", &a), -EINVAL);
	memset(n, 'a', DNS_NAME_TEXT_MAX + 1);
	n[DNS_NAME_TEXT_MAX + 1] = '\0';
	assert_int_equal(dns_synth_get(f->s, n, &a), -EINVAL);
	n[DNS_NAME_TEXT_MAX] = '.'; /* 253 + a trailing dot: fine */
	assert_int_equal(dns_synth_get(f->s, n, &a), 0);
	assert_int_equal(dns_synth_count(f->s), 2);
}

static void test_synth_reverse(void **state)
{
	struct fx *f = *state;
	struct sl_addr a, b, x;
	char n[DNS_NAME_TEXT_MAX + 1];

	assert_int_equal(dns_synth_get(f->s, "one.test", &a), 0);
	assert_int_equal(dns_synth_get(f->s, "two.test", &b), 0);
	assert_memory_not_equal(&a, &b, sizeof(a));
	assert_int_equal(dns_synth_name(f->s, &a, n, sizeof(n)), 0);
	assert_string_equal(n, "one.test");
	assert_int_equal(dns_synth_name(f->s, &b, n, sizeof(n)), 0);
	assert_string_equal(n, "two.test");
	/* too small a buffer */
	assert_int_equal(dns_synth_name(f->s, &a, n, 8), -ENOSPC);
	assert_int_equal(dns_synth_name(f->s, &a, n, 9), 0);
	/* never handed out: the network address, the next one, the last of
	 * the pool, an address outside it, its v6 lookalike */
	assert_int_equal(addr_parse("198.18.0.0", &x), 0);
	assert_int_equal(dns_synth_name(f->s, &x, n, sizeof(n)), -ENOENT);
	assert_int_equal(addr_parse("198.18.0.3", &x), 0);
	assert_int_equal(dns_synth_name(f->s, &x, n, sizeof(n)), -ENOENT);
	assert_int_equal(addr_parse("198.19.255.255", &x), 0);
	assert_int_equal(dns_synth_name(f->s, &x, n, sizeof(n)), -ENOENT);
	assert_int_equal(addr_parse("198.20.0.1", &x), 0);
	assert_int_equal(dns_synth_name(f->s, &x, n, sizeof(n)), -ENOENT);
	assert_int_equal(addr_parse("10.0.0.1", &x), 0);
	assert_int_equal(dns_synth_name(f->s, &x, n, sizeof(n)), -ENOENT);
	assert_int_equal(addr_parse("::c612:1", &x), 0); /* ::198.18.0.1 */
	assert_int_equal(dns_synth_name(f->s, &x, n, sizeof(n)), -ENOENT);
}

/* Two sandboxes' maps are independent: the same address, different names. */
static void test_synth_per_sandbox(void **state)
{
	struct fx *f = *state;
	struct dns_synth *other = dns_synth_new(&f->net, f->plen, DNS_SYNTH_MAX_NAMES);
	struct sl_addr a, b;
	char n[DNS_NAME_TEXT_MAX + 1];

	assert_non_null(other);
	assert_int_equal(dns_synth_get(f->s, "first.test", &a), 0);
	assert_int_equal(dns_synth_get(other, "second.test", &b), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_int_equal(dns_synth_name(other, &a, n, sizeof(n)), 0);
	assert_string_equal(n, "second.test");
	assert_int_equal(dns_synth_name(f->s, &a, n, sizeof(n)), 0);
	assert_string_equal(n, "first.test");
	dns_synth_free(other);
	dns_synth_free(NULL);
}

/* Thousands of names: every one keeps its own address, both ways (the
 * table grows several times on the way). */
static void test_synth_many(void **state)
{
	struct fx *f = *state;
	enum { N = 20000 };
	static struct sl_addr got[N];
	char nm[64], back[DNS_NAME_TEXT_MAX + 1];

	for (int i = 0; i < N; i++) {
		snprintf(nm, sizeof(nm), "host-%d.many.test", i);
		assert_int_equal(dns_synth_get(f->s, nm, &got[i]), 0);
		/* handed out in order: offset i + 1 */
		assert_int_equal(addr_v4(&got[i]), addr_v4(&f->net) + (uint32_t)i + 1);
	}
	for (int i = N - 1; i >= 0; i--) {
		struct sl_addr again;

		snprintf(nm, sizeof(nm), "HOST-%d.many.test.", i);
		assert_int_equal(dns_synth_get(f->s, nm, &again), 0);
		assert_memory_equal(&again, &got[i], sizeof(again));
		assert_int_equal(dns_synth_name(f->s, &got[i], back, sizeof(back)), 0);
		snprintf(nm, sizeof(nm), "host-%d.many.test", i);
		assert_string_equal(back, nm);
	}
	assert_int_equal(dns_synth_count(f->s), N);
}

struct race {
	struct dns_synth *s;
	int start;
	struct sl_addr addrs[2000];
};

static void *race_main(void *arg)
{
	struct race *r = arg;
	char nm[64], back[DNS_NAME_TEXT_MAX + 1];

	for (int k = 0; k < 2000; k++) {
		int i = (k * 7 + r->start) % 2000;

		snprintf(nm, sizeof(nm), "r%d.race.test", i);
		if (dns_synth_get(r->s, nm, &r->addrs[i]) < 0)
			return (void *)1;
		if (dns_synth_name(r->s, &r->addrs[i], back, sizeof(back)) < 0 ||
		    strcmp(back, nm) != 0)
			return (void *)1;
	}
	return NULL;
}

/* Several threads hand out the same names at once: each name gets exactly
 * one address, which every thread sees. */
static void test_synth_threads(void **state)
{
	struct fx *f = *state;
	enum { T = 4 };
	static struct race r[T];
	pthread_t th[T];

	for (int t = 0; t < T; t++) {
		r[t].s = f->s;
		r[t].start = t * 500;
		assert_int_equal(pthread_create(&th[t], NULL, race_main, &r[t]), 0);
	}
	for (int t = 0; t < T; t++) {
		void *ret;

		assert_int_equal(pthread_join(th[t], &ret), 0);
		assert_null(ret);
	}
	assert_int_equal(dns_synth_count(f->s), 2000);
	for (int i = 0; i < 2000; i++)
		for (int t = 1; t < T; t++)
			assert_memory_equal(&r[0].addrs[i], &r[t].addrs[i], sizeof(r[0].addrs[i]));
}

/* ---- errors without a verdict (unknown source, rate limit) --------------- */

static void test_filter_error(void **state)
{
	struct qspec qs = {
		.id = 0x5151, .name = "api.example.com", .qtype = DNS_TYPE_A, .edns = true
	};
	struct dns_filter_result res;
	struct reply r;
	uint8_t q[300], out[512];
	size_t ql = mkq(&qs, q);
	int n;

	(void)state;
	n = dns_filter_error(q, ql, DNS_RCODE_REFUSED, DNS_EDE_PROHIBITED, "deny", "unknown-source",
			     out, sizeof(out), &res);
	assert_true(n > 0);
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.id, 0x5151);
	assert_int_equal(r.rcode, DNS_RCODE_REFUSED);
	assert_int_equal(r.ede, DNS_EDE_PROHIBITED);
	assert_int_equal(r.an, 0);
	assert_string_equal(res.answer, "REFUSED");
	assert_string_equal(res.reason, "unknown-source");
	assert_string_equal(res.metric, "refused");
	assert_string_equal(res.name, "api.example.com");

	n = dns_filter_error(q, ql, DNS_RCODE_REFUSED, 0, "deny", "rate-limited", out, sizeof(out),
			     &res);
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.rcode, DNS_RCODE_REFUSED);
	assert_int_equal(r.ede, -1);
	assert_string_equal(res.reason, "rate-limited");

	/* a datagram cut short: FORMERR, the ID still echoed */
	n = dns_filter_error(q, 20, DNS_RCODE_FORMERR, 0, "deny", "formerr", out, sizeof(out),
			     &res);
	assert_true(n > 0);
	read_reply(out, (size_t)n, &r);
	assert_int_equal(r.id, 0x5151);
	assert_int_equal(r.rcode, DNS_RCODE_FORMERR);
	assert_int_equal(r.qd, 0);
	assert_string_equal(res.metric, "formerr");

	/* a response gets nothing */
	q[2] |= 0x80;
	assert_int_equal(dns_filter_error(q, ql, DNS_RCODE_REFUSED, 0, "deny", "unknown-source",
					  out, sizeof(out), &res),
			 0);
}

/* ---- rate bucket --------------------------------------------------------- */

static void test_bucket(void **state)
{
	struct dns_bucket b = { 0 };
	int ok = 0;

	(void)state;
	/* a fresh bucket holds the burst */
	for (int i = 0; i < 1500; i++)
		ok += dns_bucket_take(&b, 10000, DNS_RATE_QPS, DNS_RATE_BURST);
	assert_int_equal(ok, DNS_RATE_BURST);
	assert_false(dns_bucket_take(&b, 10000, DNS_RATE_QPS, DNS_RATE_BURST));
	/* 100 ms later: 50 more at 500/s */
	ok = 0;
	for (int i = 0; i < 100; i++)
		ok += dns_bucket_take(&b, 10100, DNS_RATE_QPS, DNS_RATE_BURST);
	assert_int_equal(ok, 50);
	/* 1 ms refills half a token: not enough; 2 ms: one */
	assert_false(dns_bucket_take(&b, 10101, DNS_RATE_QPS, DNS_RATE_BURST));
	assert_true(dns_bucket_take(&b, 10102, DNS_RATE_QPS, DNS_RATE_BURST));
	/* the clock going back refills nothing */
	assert_false(dns_bucket_take(&b, 5000, DNS_RATE_QPS, DNS_RATE_BURST));
	/* a long pause fills it to the burst, no further */
	ok = 0;
	for (int i = 0; i < 5000; i++)
		ok += dns_bucket_take(&b, 10102 + 3600 * 1000ull, DNS_RATE_QPS, DNS_RATE_BURST);
	assert_int_equal(ok, DNS_RATE_BURST);
	/* sustained: 10 s at a query per ms gives 500 a second */
	ok = 0;
	for (uint64_t t = 0; t < 10000; t++)
		ok += dns_bucket_take(&b, 20000000 + t, DNS_RATE_QPS, DNS_RATE_BURST);
	assert_in_range(ok, 1000 + 5000 - 2, 1000 + 5000 + 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_allowed_a, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hold_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_allowed_other_types_nodata, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_classes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_blocked_nxdomain_ede, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wildcards, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stable_and_distinct, setup, teardown),
		cmocka_unit_test_setup_teardown(test_weird_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_formerr_and_friends, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_answered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_longest_name_fits_udp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_synth_normalise, setup, teardown),
		cmocka_unit_test_setup_teardown(test_synth_reverse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_synth_per_sandbox, setup, teardown),
		cmocka_unit_test_setup_teardown(test_synth_many, setup, teardown),
		cmocka_unit_test_setup_teardown(test_synth_threads, setup, teardown),
		cmocka_unit_test(test_filter_error),
		cmocka_unit_test(test_bucket),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
