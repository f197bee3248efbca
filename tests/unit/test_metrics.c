// SPDX-License-Identifier: MIT
/* Unit tests for broker metrics: exact counts across threads, buckets,
 * exposition text. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker/audit.h"
#include "broker/metrics.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define RENDER_MAX 65536

static char out[RENDER_MAX];

static int reset(void **state)
{
	(void)state;
	metrics_reset();
	return 0;
}

static void render(void)
{
	int n = metrics_render_prometheus(out, sizeof(out));

	assert_true(n > 0);
	assert_int_equal(strlen(out), (size_t)n);
}

/* The value of the series whose text (name and labels) is exactly @series;
 * fails the test when there is not exactly one. */
static unsigned long long series(const char *series)
{
	size_t sl = strlen(series);
	const char *p = out, *hit = NULL;
	unsigned long long v;
	char *end;

	while ((p = strstr(p, series))) {
		if ((p == out || p[-1] == '\n') && p[sl] == ' ') {
			if (hit)
				fail_msg("series `%s` twice", series);
			hit = p;
		}
		p += sl;
	}
	if (!hit)
		fail_msg("series `%s` missing in:\n%s", series, out);
	errno = 0;
	v = strtoull(hit + sl + 1, &end, 10);
	assert_int_equal(errno, 0);
	assert_int_equal(*end, '\n');
	return v;
}

static unsigned count_lines_starting(const char *prefix)
{
	const char *p = out;
	unsigned n = 0;

	for (;;) {
		if (!strncmp(p, prefix, strlen(prefix)))
			n++;
		p = strchr(p, '\n');
		if (!p || !*++p)
			return n;
	}
}

/* --- threads ----------------------------------------------------------------
 */

#define NTHREADS 4
#define NITER 100000
#define NREASONS 10

static void *counter_main(void *arg)
{
	unsigned id = *(unsigned *)arg, i;
	char reason[NREASONS][16];

	for (i = 0; i < NREASONS; i++)
		snprintf(reason[i], sizeof(reason[i]), "r%u", i);
	for (i = 0; i < NITER; i++) {
		/* Each thread starts on a different key, so first uses race. */
		metrics_decision("http", "deny", reason[(i + id) % NREASONS]);
		metrics_connection_open();
		metrics_bytes(1, 2);
		metrics_connect_latency_us(i % 7000000);
		if (i % 2)
			metrics_connection_close();
		if (i % 3)
			metrics_dns_cache_hit();
		else
			metrics_dns_cache_miss();
		metrics_dns_query(i % 2 ? "synthetic" : "nxdomain");
	}
	return NULL;
}

static void test_threads_add_up(void **state)
{
	pthread_t th[NTHREADS];
	unsigned id[NTHREADS], i;
	char name[128];
	const unsigned long long total = (unsigned long long)NTHREADS * NITER;

	(void)state;
	for (i = 0; i < NTHREADS; i++) {
		id[i] = i;
		assert_int_equal(pthread_create(&th[i], NULL, counter_main, &id[i]), 0);
	}
	for (i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);

	render();
	for (i = 0; i < NREASONS; i++) {
		snprintf(name, sizeof(name),
			 "sluice_decisions_total{proto=\"http\",decision="
			 "\"deny\",reason=\"r%u\"}",
			 i);
		assert_int_equal(series(name), total / NREASONS);
	}
	/* interned once each, however the first uses raced */
	assert_int_equal(count_lines_starting("sluice_decisions_total{"), NREASONS);
	assert_int_equal(series("sluice_connections_total"), total);
	assert_int_equal(series("sluice_open_connections"), total / 2);
	assert_int_equal(series("sluice_bytes_total{direction=\"up\"}"), total);
	assert_int_equal(series("sluice_bytes_total{direction=\"down\"}"), 2 * total);
	assert_int_equal(series("sluice_dns_cache_misses_total"), NTHREADS * ((NITER + 2) / 3));
	assert_int_equal(series("sluice_dns_cache_hits_total"),
			 total - NTHREADS * ((NITER + 2) / 3));
	assert_int_equal(series("sluice_dns_queries_total{answer=\"synthetic\"}"), total / 2);
	assert_int_equal(series("sluice_dns_queries_total{answer=\"nxdomain\"}"), total / 2);
	assert_int_equal(series("sluice_upstream_connect_seconds_count"), total);
	assert_int_equal(series("sluice_upstream_connect_seconds_bucket{le=\"+Inf\"}"), total);
}

/* --- histogram -------------------------------------------------------------
 */

static void test_histogram_buckets(void **state)
{
	static const struct {
		uint64_t us;
		const char *le; /* the first bucket that counts it */
	} cases[] = {
		{ 0, "0.0005" },     { 500, "0.0005" },		 { 501, "0.001" },
		{ 1000, "0.001" }, /* 1 ms is "le 1 ms" */
		{ 1001, "0.0025" },  { 2500, "0.0025" },	 { 10000, "0.01" },
		{ 99999, "0.1" },    { 1000000, "1" },		 { 5000000, "5" },
		{ 5000001, "+Inf" }, { UINT64_MAX / 2, "+Inf" },
	};
	static const char *const les[] = {
		"0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
		"0.1",	  "0.25",  "0.5",    "1",     "2.5",  "5",     "+Inf",
	};
	char name[128];
	size_t i, j;
	bool reached;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		metrics_reset();
		metrics_connect_latency_us(cases[i].us);
		render();
		reached = false;
		for (j = 0; j < ARRAY_SIZE(les); j++) {
			snprintf(name, sizeof(name),
				 "sluice_upstream_connect_seconds_bucket{le=\"%s\"}", les[j]);
			if (!strcmp(les[j], cases[i].le))
				reached = true;
			if (series(name) != (reached ? 1u : 0u))
				fail_msg("%llu us: bucket le=%s is %llu",
					 (unsigned long long)cases[i].us, les[j], series(name));
		}
		assert_true(reached);
		assert_int_equal(series("sluice_upstream_connect_seconds_count"), 1);
	}
	assert_int_equal(count_lines_starting("sluice_upstream_connect_seconds_bucket{"),
			 ARRAY_SIZE(les));
}

static void test_histogram_sum(void **state)
{
	(void)state;
	metrics_connect_latency_us(1000);
	metrics_connect_latency_us(2500001);
	render();
	assert_non_null(strstr(out, "\nsluice_upstream_connect_seconds_sum 2.501001\n"));
}

/* --- exposition text ---------------------------------------------------------
 */

static void known_state(void)
{
	metrics_decision("http", "deny", "not-allowlisted");
	metrics_decision("http", "deny", "not-allowlisted");
	metrics_decision("tls", "allow", "allowed");
	metrics_connection_open();
	metrics_connection_open();
	metrics_connection_close();
	metrics_pipe_small();
	metrics_bytes(100, 2000);
	metrics_dns_cache_hit();
	metrics_dns_cache_miss();
	metrics_dns_cache_miss();
	metrics_dns_query("nxdomain");
	metrics_connect_latency_us(1000);
	metrics_connect_latency_us(30000);
}

static const char known_prometheus[] =
	"# HELP sluice_decisions_total Broker decisions, by protocol, decision and "
	"reason.\n"
	"# TYPE sluice_decisions_total counter\n"
	"sluice_decisions_total{proto=\"http\",decision=\"deny\",reason=\"not-"
	"allowlisted\"} 2\n"
	"sluice_decisions_total{proto=\"tls\",decision=\"allow\",reason="
	"\"allowed\"} 1\n"
	"# HELP sluice_open_connections Connections open now.\n"
	"# TYPE sluice_open_connections gauge\n"
	"sluice_open_connections 1\n"
	"# HELP sluice_splice_pipes Splice pipes: held by connections (bytes wait in "
	"them), or kept empty by the workers for the next.\n"
	"# TYPE sluice_splice_pipes gauge\n"
	"sluice_splice_pipes{state=\"held\"} 0\n"
	"sluice_splice_pipes{state=\"kept\"} 0\n"
	"# HELP sluice_splice_pipes_small_total Splice pipes that came out smaller than "
	"64 KiB: the broker's user was over fs.pipe-user-pages-soft, and each moves "
	"bytes 8 KiB at a time.\n"
	"# TYPE sluice_splice_pipes_small_total counter\n"
	"sluice_splice_pipes_small_total 1\n"
	"# HELP sluice_connections_total Connections accepted.\n"
	"# TYPE sluice_connections_total counter\n"
	"sluice_connections_total 2\n"
	"# HELP sluice_bytes_total Bytes relayed: up is sandbox to upstream, down "
	"the reverse.\n"
	"# TYPE sluice_bytes_total counter\n"
	"sluice_bytes_total{direction=\"up\"} 100\n"
	"sluice_bytes_total{direction=\"down\"} 2000\n"
	"# HELP sluice_dns_cache_hits_total Upstream name resolutions answered "
	"from the cache.\n"
	"# TYPE sluice_dns_cache_hits_total counter\n"
	"sluice_dns_cache_hits_total 1\n"
	"# HELP sluice_dns_cache_misses_total Upstream name resolutions that had "
	"to ask a resolver.\n"
	"# TYPE sluice_dns_cache_misses_total counter\n"
	"sluice_dns_cache_misses_total 2\n"
	"# HELP sluice_dns_queries_total DNS filter queries, by the answer they "
	"got.\n"
	"# TYPE sluice_dns_queries_total counter\n"
	"sluice_dns_queries_total{answer=\"nxdomain\"} 1\n"
	"# HELP sluice_log_lines_lost_total Log lines not written to stderr (its "
	"reader gone, or a failed write).\n"
	"# TYPE sluice_log_lines_lost_total counter\n"
	"sluice_log_lines_lost_total 0\n"
	"# HELP sluice_audit_write_failures_total Audit lines lost to a failed or "
	"short write.\n"
	"# TYPE sluice_audit_write_failures_total counter\n"
	"sluice_audit_write_failures_total 0\n"
	"# HELP sluice_audit_refusals_folded_total Refusals counted in the "
	"repeated field of an earlier audit line of their kind.\n"
	"# TYPE sluice_audit_refusals_folded_total counter\n"
	"sluice_audit_refusals_folded_total 0\n"
	"# HELP sluice_audit_refusals_dropped_total Refusals not written beyond a "
	"sandbox's audit rate, counted in the dropped field of a summary line.\n"
	"# TYPE sluice_audit_refusals_dropped_total counter\n"
	"sluice_audit_refusals_dropped_total 0\n"
	"# HELP sluice_upstream_connect_seconds Time to establish a connection to "
	"an upstream.\n"
	"# TYPE sluice_upstream_connect_seconds histogram\n"
	"sluice_upstream_connect_seconds_bucket{le=\"0.0005\"} 0\n"
	"sluice_upstream_connect_seconds_bucket{le=\"0.001\"} 1\n"
	"sluice_upstream_connect_seconds_bucket{le=\"0.0025\"} 1\n"
	"sluice_upstream_connect_seconds_bucket{le=\"0.005\"} 1\n"
	"sluice_upstream_connect_seconds_bucket{le=\"0.01\"} 1\n"
	"sluice_upstream_connect_seconds_bucket{le=\"0.025\"} 1\n"
	"sluice_upstream_connect_seconds_bucket{le=\"0.05\"} 2\n"
	"sluice_upstream_connect_seconds_bucket{le=\"0.1\"} 2\n"
	"sluice_upstream_connect_seconds_bucket{le=\"0.25\"} 2\n"
	"sluice_upstream_connect_seconds_bucket{le=\"0.5\"} 2\n"
	"sluice_upstream_connect_seconds_bucket{le=\"1\"} 2\n"
	"sluice_upstream_connect_seconds_bucket{le=\"2.5\"} 2\n"
	"sluice_upstream_connect_seconds_bucket{le=\"5\"} 2\n"
	"sluice_upstream_connect_seconds_bucket{le=\"+Inf\"} 2\n"
	"sluice_upstream_connect_seconds_sum 0.031000\n"
	"sluice_upstream_connect_seconds_count 2\n";

static void test_prometheus_known_state(void **state)
{
	(void)state;
	/* this test binary never writes an audit line */
	assert_int_equal(audit_write_failures(), 0);
	known_state();
	assert_int_equal(metrics_render_prometheus(out, sizeof(out)),
			 (int)strlen(known_prometheus));
	assert_string_equal(out, known_prometheus);
}

static void test_enospc(void **state)
{
	size_t need = strlen(known_prometheus);
	char *small;

	(void)state;
	known_state();
	small = malloc(need + 1);
	assert_non_null(small);
	assert_int_equal(metrics_render_prometheus(small, 64), -ENOSPC);
	assert_int_equal(metrics_render_prometheus(small, 0), -ENOSPC);
	/* exactly the text, but no room for its NUL */
	assert_int_equal(metrics_render_prometheus(small, need), -ENOSPC);
	assert_int_equal(metrics_render_prometheus(small, need + 1), (int)need);
	assert_string_equal(small, known_prometheus);
	assert_int_equal(metrics_render_text(small, 16), -ENOSPC);
	free(small);
}

static void test_label_values_escaped(void **state)
{
	(void)state;
	metrics_decision("http", "deny", "a\"b\\c");
	render();
	assert_int_equal(series("sluice_decisions_total{proto=\"http\",decision=\"deny\","
				"reason=\"a\\\"b\\\\c\"}"),
			 1);
}

/* Keys that cannot be printed as they are, or do not fit, count as "other". */
static void test_bad_keys_are_other(void **state)
{
	char longv[METRICS_LABEL_MAX + 1];

	(void)state;
	memset(longv, 'x', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	metrics_decision("http", "deny", "new\nline");
	metrics_decision("http", "deny", "caf\xc3\xa9");
	metrics_decision("http", "deny", longv);
	metrics_decision("other", "other", "other");
	longv[METRICS_LABEL_MAX - 1] = '\0'; /* the longest that fits */
	metrics_decision("http", "deny", longv);
	metrics_dns_query("\x01");
	render();
	assert_int_equal(series("sluice_decisions_total{proto=\"other\",decision=\"other\","
				"reason=\"other\"}"),
			 4);
	assert_int_equal(count_lines_starting("sluice_decisions_total{"), 2);
	assert_int_equal(series("sluice_dns_queries_total{answer=\"other\"}"), 1);
	metrics_decision(NULL, NULL, NULL);
	render();
	assert_int_equal(series("sluice_decisions_total{proto=\"\",decision=\"\","
				"reason=\"\"}"),
			 1);
}

/* A full table never grows, never drops a count: the rest go to "other". */
static void test_table_overflow(void **state)
{
	char reason[32], name[160];
	unsigned i;

	(void)state;
	for (i = 0; i < METRICS_DECISION_SLOTS + 5; i++) {
		snprintf(reason, sizeof(reason), "reason-%u", i);
		metrics_decision("tcp", "deny", reason);
		metrics_decision("tcp", "deny", reason);
	}
	render();
	assert_int_equal(count_lines_starting("sluice_decisions_total{"),
			 METRICS_DECISION_SLOTS + 1);
	for (i = 0; i < METRICS_DECISION_SLOTS; i++) {
		snprintf(name, sizeof(name),
			 "sluice_decisions_total{proto=\"tcp\",decision="
			 "\"deny\",reason=\"reason-%u\"}",
			 i);
		assert_int_equal(series(name), 2);
	}
	assert_int_equal(series("sluice_decisions_total{proto=\"other\",decision=\"other\","
				"reason=\"other\"}"),
			 10);
}

static void test_render_text(void **state)
{
	static const char want[] = "connections: 1 open, 2 accepted\n"
				   "bytes: 100 up, 2000 down\n"
				   "decisions: 1 allowed, 2 denied, 0 errors\n"
				   "  deny http not-allowlisted: 2\n"
				   "dns: cache 1 hits, 2 misses; filter nxdomain 1\n"
				   "upstream connect: 2, mean 15.5 ms, p50 <= 1 ms, p99 <= 50 ms\n"
				   "log: 0 lines lost\n"
				   "audit: 0 lines lost; refusals 0 folded, 0 dropped\n";
	int n;

	(void)state;
	known_state();
	n = metrics_render_text(out, sizeof(out));
	assert_string_equal(out, want);
	assert_int_equal(n, (int)strlen(want));

	metrics_reset();
	n = metrics_render_text(out, sizeof(out));
	assert_true(n > 0);
	assert_non_null(strstr(out, "decisions: 0 allowed, 0 denied, 0 errors\n"));
	assert_non_null(strstr(out, "filter no queries\n"));
	assert_non_null(strstr(out, "upstream connect: 0\n"));
}

/* The failure counter the audit module keeps is what metrics show. */
static void test_audit_failures_shown(void **state)
{
	struct audit_event ev = { .decision = "allow", .reason = "allowed" };

	(void)state;
	assert_int_equal(audit_open("/dev/full", NULL), 0);
	audit_log(&ev);
	audit_log(&ev);
	audit_close();
	render();
	assert_int_equal(series("sluice_audit_write_failures_total"), 2);
	assert_int_equal(metrics_render_text(out, sizeof(out)) > 0, 1);
	assert_non_null(strstr(out, "audit: 2 lines lost;"));
}

static uint64_t fixed_ms(void)
{
	return 1000;
}

/* So are the audit module's folded and dropped refusals. */
static void test_audit_refusals_shown(void **state)
{
	struct audit_event ev = {
		.sandbox = "m1", .proto = "dns", .decision = "deny", .reason = "not-allowlisted"
	};
	char name[32];
	unsigned i;

	(void)state;
	audit_set_clock(fixed_ms);
	assert_int_equal(audit_open("/dev/null", NULL), 0);
	ev.name = "same.example";
	for (i = 0; i < 3; i++)
		audit_log(&ev); /* one line, two folded */
	ev.name = name;
	for (i = 0; i < AUDIT_REFUSAL_BURST + 5; i++) {
		snprintf(name, sizeof(name), "n%u.example", i);
		audit_log(&ev); /* the line of the two folded took a token */
	}
	audit_close();
	audit_set_clock(NULL);
	render();
	assert_int_equal(series("sluice_audit_refusals_folded_total"), 2);
	assert_int_equal(series("sluice_audit_refusals_dropped_total"), 7);
	assert_int_equal(metrics_render_text(out, sizeof(out)) > 0, 1);
	assert_non_null(strstr(out, "refusals 2 folded, 7 dropped\n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* first: it asserts that no audit line has failed yet */
		cmocka_unit_test_setup(test_prometheus_known_state, reset),
		cmocka_unit_test_setup(test_threads_add_up, reset),
		cmocka_unit_test_setup(test_histogram_buckets, reset),
		cmocka_unit_test_setup(test_histogram_sum, reset),
		cmocka_unit_test_setup(test_enospc, reset),
		cmocka_unit_test_setup(test_label_values_escaped, reset),
		cmocka_unit_test_setup(test_bad_keys_are_other, reset),
		cmocka_unit_test_setup(test_table_overflow, reset),
		cmocka_unit_test_setup(test_render_text, reset),
		cmocka_unit_test_setup(test_audit_refusals_shown, reset),
		cmocka_unit_test_setup(test_audit_failures_shown, reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
