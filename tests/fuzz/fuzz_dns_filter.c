// SPDX-License-Identifier: MIT
/* libFuzzer target: bytes into dns_filter_answer() and dns_filter_error()
 * with a small fixed policy and a small synthetic map, checking what every
 * reply must say whatever the input. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/addr.h"
#include "common/reason.h"
#include "dnsfilter/dnsfilter.h"
#include "policy/policy.h"

#define CHECK(c)                          \
	do {                              \
		if (!(c))                 \
			__builtin_trap(); \
	} while (0)

static const char policy_yaml[] = "version: 1\n"
				  "egress:\n"
				  "  allow:\n"
				  "    - host: api.example.com\n"
				  "    - host: \"*.wild.test\"\n"
				  "      ports: [443]\n";

static struct policy *pol;
static struct dns_synth *synth;
static struct sl_addr net;
static unsigned plen;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct policy_error err;

	(void)argc;
	(void)argv;
	CHECK(policy_load_buffer("fuzz.yaml", policy_yaml, sizeof(policy_yaml) - 1, &pol, &err) ==
	      0);
	CHECK(addr_parse_cidr("198.18.0.0/15", &net, &plen) == 0);
	return 0;
}

static uint16_t g16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void check_result(const struct dns_filter_result *res)
{
	CHECK(res->decision && res->reason && res->metric);
	CHECK(!strcmp(res->decision, "allow") || !strcmp(res->decision, "deny") ||
	      !strcmp(res->decision, "error") || !strcmp(res->decision, SL_DECISION_WOULD_DENY) ||
	      !strcmp(res->decision, SL_DECISION_HOLD));
	CHECK(memchr(res->name, 0, sizeof(res->name)) != NULL);
	CHECK(memchr(res->answer, 0, sizeof(res->answer)) != NULL);
}

/* What every reply says: our ID, QR, the question echoed, nothing past it.
 * @audit: the reply of dns_filter_answer_mode() in audit mode (or of
 * dns_filter_answer_unlisted() under hold), where a name outside the policy
 * gets a synthetic address too (as would-deny, or hold). */
static void check_reply_mode(const uint8_t *q, size_t qlen, const uint8_t *r, int n, size_t outlen,
			     const struct dns_filter_result *res, bool udp, bool audit)
{
	CHECK(n >= 0);
	if (n == 0)
		return;
	CHECK(n >= 12 && (size_t)n <= outlen);
	CHECK(qlen >= 12);
	CHECK(g16(r) == g16(q));
	CHECK(r[2] & 0x80);
	CHECK(!(q[2] & 0x80));
	CHECK((r[3] & 0x0f) == (res->rcode & 0x0f));
	/* the question, as far as the parser could read it, is echoed */
	{
		struct dns_query pq;

		(void)dns_parse_query(q, qlen, &pq);
		CHECK(g16(r + 4) == (pq.has_question ? 1 : 0));
		if (pq.has_question)
			CHECK((size_t)n >= 12u + pq.qwire_len &&
			      memcmp(r + 12, pq.qwire, pq.qwire_len) == 0);
	}
	/* every reply fits a datagram without TC */
	if (udp)
		CHECK(n <= 512 && !(r[2] & 0x02));
	/* an A answer only for an allowed name with a synthetic address */
	if (g16(r + 6)) {
		struct sl_addr a;
		char back[DNS_NAME_TEXT_MAX + 1];

		CHECK(!strcmp(res->metric, "synthetic"));
		CHECK(g16(r + 6) == 1);
		CHECK(addr_parse(res->answer, &a) == 0);
		CHECK(addr_in_prefix(&a, &net, plen));
		CHECK(dns_synth_name(synth, &a, back, sizeof(back)) == 0);
		CHECK(!strcmp(back, res->name));
	}
	if (!strcmp(res->metric, "synthetic") || !strcmp(res->metric, "nodata"))
		CHECK(policy_name_allowed(pol, res->name, strlen(res->name)) ||
		      (audit && (!strcmp(res->decision, SL_DECISION_WOULD_DENY) ||
				 !strcmp(res->decision, SL_DECISION_HOLD))));
}

static void check_reply(const uint8_t *q, size_t qlen, const uint8_t *r, int n, size_t outlen,
			const struct dns_filter_result *res, bool udp)
{
	check_reply_mode(q, qlen, r, n, outlen, res, udp, false);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dns_filter_result res;
	uint8_t *q, out[512];
	int n;

	/* A fresh small map now and then, so that "full" is reached too. */
	if (!synth || dns_synth_count(synth) >= 64) {
		dns_synth_free(synth);
		synth = dns_synth_new(&net, plen, 64);
		CHECK(synth != NULL);
	}
	/* an exact-size heap copy: ASan sees any read past the end */
	q = malloc(size ? size : 1);
	CHECK(q != NULL);
	if (size)
		memcpy(q, data, size);

	n = dns_filter_answer(pol, synth, q, size, true, out, sizeof(out), &res);
	check_result(&res);
	check_reply(q, size, out, n, sizeof(out), &res, true);
	if (size >= 12 && !(q[2] & 0x80))
		CHECK(n > 0); /* every query is answered */

	n = dns_filter_answer(pol, synth, q, size, false, out, sizeof(out), &res);
	check_result(&res);
	check_reply(q, size, out, n, sizeof(out), &res, false);

	/* audit mode: an unlisted name is answered as an allowed one */
	n = dns_filter_answer_mode(pol, synth, true, q, size, true, out, sizeof(out), &res);
	check_result(&res);
	check_reply_mode(q, size, out, n, sizeof(out), &res, true, true);
	if (!strcmp(res.decision, SL_DECISION_WOULD_DENY))
		CHECK(!policy_name_allowed(pol, res.name, strlen(res.name)));

	/* `unlisted: hold`: the same, decided hold */
	n = dns_filter_answer_unlisted(pol, synth, DNS_UNLISTED_HOLD, q, size, true, out,
				       sizeof(out), &res);
	check_result(&res);
	check_reply_mode(q, size, out, n, sizeof(out), &res, true, true);
	CHECK(strcmp(res.decision, SL_DECISION_WOULD_DENY));
	if (!strcmp(res.decision, SL_DECISION_HOLD))
		CHECK(!policy_name_allowed(pol, res.name, strlen(res.name)));

	n = dns_filter_error(q, size, DNS_RCODE_REFUSED, DNS_EDE_PROHIBITED, "deny",
			     "unknown-source", out, sizeof(out), &res);
	check_result(&res);
	check_reply(q, size, out, n, sizeof(out), &res, true);
	if (n > 0)
		CHECK((out[3] & 0x0f) == DNS_RCODE_REFUSED && g16(out + 6) == 0);

	/* a small buffer from the input: never a partial reply */
	if (size > 0) {
		size_t small = data[size - 1] % 64;

		n = dns_filter_answer(pol, synth, q, size, true, out, small, &res);
		CHECK(n >= 0 && (size_t)n <= small);
	}
	free(q);
	return 0;
}
