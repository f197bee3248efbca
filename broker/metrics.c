// SPDX-License-Identifier: MIT
/* Broker metrics: lock-free counters shared by all worker threads, and their
 * rendering.
 *
 * Theory of operation: plain counters are C11 atomics updated with relaxed
 * adds. Labelled counters live in a "family": a fixed array of slots, each a
 * key (label values copied in) and a count. A slot is filled once, under the
 * family's mutex, and then published by a release store of the family's
 * `used` count; a reader that loads `used` with acquire sees every slot below
 * it complete, so counting an existing key is a lock-free scan and an atomic
 * add. Nothing is ever unpublished while the broker runs (metrics_reset() is
 * for tests). The key set is small and comes from our own code, but it is
 * not hard-coded here: a new reason needs no change to this file.
 */
#include "broker/metrics.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "broker/audit.h"
#include "common/log.h"
#include "common/reason.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define FAMILY_MAX_LABELS 3

struct label_slot {
	uint32_t hash;
	char val[FAMILY_MAX_LABELS][METRICS_LABEL_MAX];
	atomic_uint_fast64_t count;
};

struct label_family {
	const char *const *labels; /* label names */
	unsigned nlabels;
	unsigned nslots;
	struct label_slot *slots;
	atomic_uint used;	    /* slots published; release/acquire */
	atomic_uint_fast64_t other; /* keys that did not get a slot */
	pthread_mutex_t lock;	    /* fills slots; never held to count */
};

static const char *const decision_labels[] = { "proto", "decision", "reason" };
static struct label_slot decision_slots[METRICS_DECISION_SLOTS];
static struct label_family decisions = {
	.labels = decision_labels,
	.nlabels = ARRAY_SIZE(decision_labels),
	.nslots = ARRAY_SIZE(decision_slots),
	.slots = decision_slots,
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static const char *const dns_answer_labels[] = { "answer" };
static struct label_slot dns_answer_slots[METRICS_DNS_ANSWER_SLOTS];
static struct label_family dns_answers = {
	.labels = dns_answer_labels,
	.nlabels = ARRAY_SIZE(dns_answer_labels),
	.nslots = ARRAY_SIZE(dns_answer_slots),
	.slots = dns_answer_slots,
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

_Static_assert(ARRAY_SIZE(decision_labels) <= FAMILY_MAX_LABELS, "slot has room");
_Static_assert(ARRAY_SIZE(dns_answer_labels) <= FAMILY_MAX_LABELS, "slot has room");

static atomic_int_fast64_t open_connections;
static atomic_int_fast64_t pipes_held, pipes_kept;
static atomic_uint_fast64_t connections_total;
static atomic_uint_fast64_t pipes_small;
static atomic_uint_fast64_t bytes_up, bytes_down;
static atomic_uint_fast64_t dns_cache_hits, dns_cache_misses;

/* Upper bounds, inclusive, in microseconds; the last bucket is +Inf. */
static const uint64_t latency_bound_us[] = {
	500,	1000,	2500,	5000,	 10000,	  25000,   50000,
	100000, 250000, 500000, 1000000, 2500000, 5000000,
};
#define LATENCY_BUCKETS (ARRAY_SIZE(latency_bound_us) + 1)
static const char *const latency_le[] = {
	[0] = "0.0005", [1] = "0.001", [2] = "0.0025", [3] = "0.005", [4] = "0.01",
	[5] = "0.025",	[6] = "0.05",  [7] = "0.1",    [8] = "0.25",  [9] = "0.5",
	[10] = "1",	[11] = "2.5",  [12] = "5",     [13] = "+Inf",
};
_Static_assert(ARRAY_SIZE(latency_le) == LATENCY_BUCKETS,
	       "one le label per latency bucket, +Inf included");

/* Per-bucket (not cumulative) counts: one add per sample. */
static atomic_uint_fast64_t latency_bucket[LATENCY_BUCKETS];
static atomic_uint_fast64_t latency_sum_us;

static inline void add(atomic_uint_fast64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static inline uint64_t get(atomic_uint_fast64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

/* --- labelled families --------------------------------------------------- */

/*
 * Keys are always FAMILY_MAX_LABELS values, the unused ones "", so that
 * hashing, comparing and copying need no per-family length.
 */

/* FNV-1a over the values, with a separator so ("ab","c") != ("a","bc"). */
static uint32_t key_hash(const char *const vals[FAMILY_MAX_LABELS])
{
	uint32_t h = 2166136261u;
	unsigned i;
	const char *p;

	for (i = 0; i < FAMILY_MAX_LABELS; i++) {
		for (p = vals[i]; *p; p++)
			h = (h ^ (unsigned char)*p) * 16777619u;
		h = (h ^ 0xff) * 16777619u;
	}
	return h;
}

static bool slot_matches(const struct label_slot *s, uint32_t h,
			 const char *const vals[FAMILY_MAX_LABELS])
{
	unsigned i;

	if (s->hash != h)
		return false;
	for (i = 0; i < FAMILY_MAX_LABELS; i++)
		if (strcmp(s->val[i], vals[i]))
			return false;
	return true;
}

/*
 * A value we can store and print as it is: it fits a slot and is printable
 * ASCII, so the exposition is valid UTF-8 whatever a caller passes.
 */
static bool value_ok(const char *v)
{
	size_t n;

	for (n = 0; v[n]; n++)
		if (n + 1 >= METRICS_LABEL_MAX || v[n] < 0x20 || v[n] > 0x7e)
			return false;
	return true;
}

static bool all_other(const char *const vals[FAMILY_MAX_LABELS], unsigned n)
{
	unsigned i;

	for (i = 0; i < n && i < FAMILY_MAX_LABELS; i++)
		if (strcmp(vals[i], "other"))
			return false;
	return true;
}

/* Returns the counter for @vals, interning the key on first use. */
static atomic_uint_fast64_t *family_counter(struct label_family *f,
					    const char *const vals[FAMILY_MAX_LABELS])
{
	atomic_uint_fast64_t *ret = &f->other;
	unsigned i, n, used;
	uint32_t h;

	for (i = 0; i < FAMILY_MAX_LABELS; i++)
		if (!value_ok(vals[i]))
			return &f->other;
	/* Would print as a second "other" series: it is that series. */
	if (all_other(vals, f->nlabels))
		return &f->other;

	h = key_hash(vals);
	n = atomic_load_explicit(&f->used, memory_order_acquire);
	for (i = 0; i < n; i++)
		if (slot_matches(&f->slots[i], h, vals))
			return &f->slots[i].count;

	pthread_mutex_lock(&f->lock);
	/* Another thread may have added keys, this one among them. */
	used = atomic_load_explicit(&f->used, memory_order_relaxed);
	for (i = n; i < used; i++)
		if (slot_matches(&f->slots[i], h, vals)) {
			ret = &f->slots[i].count;
			goto out;
		}
	if (used < f->nslots) {
		struct label_slot *s = &f->slots[used];

		s->hash = h;
		for (i = 0; i < FAMILY_MAX_LABELS; i++)
			/* value_ok() bounded it below METRICS_LABEL_MAX */
			memcpy(s->val[i], vals[i], strlen(vals[i]) + 1);
		atomic_store_explicit(&s->count, 0, memory_order_relaxed);
		atomic_store_explicit(&f->used, used + 1, memory_order_release);
		ret = &s->count;
	}
out:
	pthread_mutex_unlock(&f->lock);
	return ret;
}

static void family_reset(struct label_family *f)
{
	unsigned i;

	pthread_mutex_lock(&f->lock);
	for (i = 0; i < f->nslots; i++)
		atomic_store_explicit(&f->slots[i].count, 0, memory_order_relaxed);
	atomic_store_explicit(&f->used, 0, memory_order_release);
	atomic_store_explicit(&f->other, 0, memory_order_relaxed);
	pthread_mutex_unlock(&f->lock);
}

/* --- updates -------------------------------------------------------------- */

void metrics_decision(const char *proto, const char *decision, const char *reason)
{
	const char *vals[FAMILY_MAX_LABELS] = {
		proto ? proto : "",
		decision ? decision : "",
		reason ? reason : "",
	};

	add(family_counter(&decisions, vals), 1);
}

void metrics_dns_query(const char *answer)
{
	/* Sized for any family, so that no reader sees an unset entry. */
	const char *vals[FAMILY_MAX_LABELS] = { answer ? answer : "", "", "" };

	add(family_counter(&dns_answers, vals), 1);
}

void metrics_connection_open(void)
{
	atomic_fetch_add_explicit(&open_connections, 1, memory_order_relaxed);
	add(&connections_total, 1);
}

void metrics_pipes(int held, int kept)
{
	atomic_fetch_add_explicit(&pipes_held, held, memory_order_relaxed);
	atomic_fetch_add_explicit(&pipes_kept, kept, memory_order_relaxed);
}

void metrics_pipe_small(void)
{
	add(&pipes_small, 1);
}

void metrics_connection_close(void)
{
	atomic_fetch_sub_explicit(&open_connections, 1, memory_order_relaxed);
}

void metrics_bytes(uint64_t up, uint64_t down)
{
	if (up)
		add(&bytes_up, up);
	if (down)
		add(&bytes_down, down);
}

void metrics_dns_cache_hit(void)
{
	add(&dns_cache_hits, 1);
}

void metrics_dns_cache_miss(void)
{
	add(&dns_cache_misses, 1);
}

void metrics_connect_latency_us(uint64_t us)
{
	size_t i = 0;

	while (i < ARRAY_SIZE(latency_bound_us) && us > latency_bound_us[i])
		i++;
	add(&latency_bucket[i], 1);
	add(&latency_sum_us, us);
}

void metrics_reset(void)
{
	size_t i;

	family_reset(&decisions);
	family_reset(&dns_answers);
	atomic_store_explicit(&open_connections, 0, memory_order_relaxed);
	atomic_store_explicit(&pipes_held, 0, memory_order_relaxed);
	atomic_store_explicit(&pipes_kept, 0, memory_order_relaxed);
	atomic_store_explicit(&connections_total, 0, memory_order_relaxed);
	atomic_store_explicit(&pipes_small, 0, memory_order_relaxed);
	atomic_store_explicit(&bytes_up, 0, memory_order_relaxed);
	atomic_store_explicit(&bytes_down, 0, memory_order_relaxed);
	atomic_store_explicit(&dns_cache_hits, 0, memory_order_relaxed);
	atomic_store_explicit(&dns_cache_misses, 0, memory_order_relaxed);
	for (i = 0; i < LATENCY_BUCKETS; i++)
		atomic_store_explicit(&latency_bucket[i], 0, memory_order_relaxed);
	atomic_store_explicit(&latency_sum_us, 0, memory_order_relaxed);
}

/* --- rendering ------------------------------------------------------------ */

/* A bounded output buffer; ->overflow sticks once set. */
struct out {
	char *buf;
	size_t len, pos;
	bool overflow;
};

__attribute__((format(printf, 2, 3))) static void outf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->overflow)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->pos, o->len - o->pos, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->len - o->pos) {
		o->overflow = true;
		return;
	}
	o->pos += (size_t)n;
}

static int out_finish(struct out *o)
{
	if (o->overflow) {
		if (o->len)
			o->buf[0] = '\0';
		return -ENOSPC;
	}
	return (int)o->pos;
}

/* A label value, escaped as the exposition format asks (\\, \", \n). */
static void out_label_value(struct out *o, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\')
			outf(o, "\\\\");
		else if (*v == '"')
			outf(o, "\\\"");
		else if (*v == '\n')
			outf(o, "\\n");
		else
			outf(o, "%c", *v);
	}
}

static void out_header(struct out *o, const char *name, const char *type, const char *help)
{
	outf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void out_family_series(struct out *o, const char *name, const struct label_family *f,
			      const char *const *vals, uint64_t v)
{
	unsigned i;

	outf(o, "%s{", name);
	for (i = 0; i < f->nlabels && i < FAMILY_MAX_LABELS; i++) {
		outf(o, "%s%s=\"", i ? "," : "", f->labels[i]);
		out_label_value(o, vals[i]);
		outf(o, "\"");
	}
	outf(o, "} %llu\n", (unsigned long long)v);
}

static void out_family(struct out *o, const char *name, struct label_family *f)
{
	static const char *const other[FAMILY_MAX_LABELS] = { "other", "other", "other" };
	unsigned i, j, n = atomic_load_explicit(&f->used, memory_order_acquire);
	uint64_t v;

	for (i = 0; i < n; i++) {
		const char *vals[FAMILY_MAX_LABELS] = { "", "", "" };

		for (j = 0; j < f->nlabels; j++)
			vals[j] = f->slots[i].val[j];
		out_family_series(o, name, f, vals, get(&f->slots[i].count));
	}
	v = get(&f->other);
	if (v)
		out_family_series(o, name, f, other, v);
}

static void out_counter(struct out *o, const char *name, const char *help, uint64_t v)
{
	out_header(o, name, "counter", help);
	outf(o, "%s %llu\n", name, (unsigned long long)v);
}

/* A snapshot of the histogram whose _count is its +Inf bucket. */
struct latency_snap {
	uint64_t bucket[LATENCY_BUCKETS];
	uint64_t count, sum_us;
};

static void latency_snapshot(struct latency_snap *s)
{
	size_t i;

	s->count = 0;
	for (i = 0; i < LATENCY_BUCKETS; i++) {
		s->bucket[i] = get(&latency_bucket[i]);
		s->count += s->bucket[i];
	}
	s->sum_us = get(&latency_sum_us);
}

int metrics_render_prometheus(char *buf, size_t len)
{
	struct out o = { .buf = buf, .len = len };
	struct latency_snap lat;
	uint64_t cum = 0;
	size_t i;

	if (!len)
		return -ENOSPC;
	buf[0] = '\0';

	out_header(&o, "sluice_decisions_total", "counter",
		   "Broker decisions, by protocol, decision and reason.");
	out_family(&o, "sluice_decisions_total", &decisions);

	out_header(&o, "sluice_open_connections", "gauge", "Connections open now.");
	outf(&o, "sluice_open_connections %lld\n",
	     (long long)atomic_load_explicit(&open_connections, memory_order_relaxed));
	out_header(&o, "sluice_splice_pipes", "gauge",
		   "Splice pipes: held by connections (bytes wait in them), or kept empty "
		   "by the workers for the next.");
	outf(&o, "sluice_splice_pipes{state=\"held\"} %lld\n",
	     (long long)atomic_load_explicit(&pipes_held, memory_order_relaxed));
	outf(&o, "sluice_splice_pipes{state=\"kept\"} %lld\n",
	     (long long)atomic_load_explicit(&pipes_kept, memory_order_relaxed));
	out_counter(&o, "sluice_splice_pipes_small_total",
		    "Splice pipes that came out smaller than 64 KiB: the broker's user was over "
		    "fs.pipe-user-pages-soft, and each moves bytes 8 KiB at a time.",
		    get(&pipes_small));
	out_counter(&o, "sluice_connections_total", "Connections accepted.",
		    get(&connections_total));

	out_header(&o, "sluice_bytes_total", "counter",
		   "Bytes relayed: up is sandbox to upstream, down the reverse.");
	outf(&o, "sluice_bytes_total{direction=\"up\"} %llu\n", (unsigned long long)get(&bytes_up));
	outf(&o, "sluice_bytes_total{direction=\"down\"} %llu\n",
	     (unsigned long long)get(&bytes_down));

	out_counter(&o, "sluice_dns_cache_hits_total",
		    "Upstream name resolutions answered from the cache.", get(&dns_cache_hits));
	out_counter(&o, "sluice_dns_cache_misses_total",
		    "Upstream name resolutions that had to ask a resolver.",
		    get(&dns_cache_misses));

	out_header(&o, "sluice_dns_queries_total", "counter",
		   "DNS filter queries, by the answer they got.");
	out_family(&o, "sluice_dns_queries_total", &dns_answers);

	out_counter(&o, "sluice_log_lines_lost_total",
		    "Log lines not written to stderr (its reader gone, or a failed write).",
		    log_lines_lost());
	out_counter(&o, "sluice_audit_write_failures_total",
		    "Audit lines lost to a failed or short write.", audit_write_failures());
	out_counter(&o, "sluice_audit_refusals_folded_total",
		    "Refusals counted in the repeated field of an earlier audit "
		    "line of their kind.",
		    audit_refusals_folded());
	out_counter(&o, "sluice_audit_refusals_dropped_total",
		    "Refusals not written beyond a sandbox's audit rate, counted "
		    "in the dropped field of a summary line.",
		    audit_refusals_dropped());

	latency_snapshot(&lat);
	out_header(&o, "sluice_upstream_connect_seconds", "histogram",
		   "Time to establish a connection to an upstream.");
	for (i = 0; i < LATENCY_BUCKETS; i++) {
		cum += lat.bucket[i];
		outf(&o, "sluice_upstream_connect_seconds_bucket{le=\"%s\"} %llu\n", latency_le[i],
		     (unsigned long long)cum);
	}
	outf(&o, "sluice_upstream_connect_seconds_sum %llu.%06llu\n",
	     (unsigned long long)(lat.sum_us / 1000000),
	     (unsigned long long)(lat.sum_us % 1000000));
	outf(&o, "sluice_upstream_connect_seconds_count %llu\n", (unsigned long long)lat.count);

	return out_finish(&o);
}

/* "<= 2.5 ms" for the bucket holding the @q-th permille sample. */
static void out_quantile(struct out *o, const struct latency_snap *s, const char *label,
			 unsigned permille)
{
	uint64_t want = (s->count * permille + 999) / 1000, cum = 0;
	size_t i;

	if (want == 0)
		want = 1;
	for (i = 0; i < LATENCY_BUCKETS; i++) {
		cum += s->bucket[i];
		if (cum >= want)
			break;
	}
	if (i >= ARRAY_SIZE(latency_bound_us)) {
		/* the +Inf bucket (or no sample at all, which callers avoid) */
		outf(o, ", %s > %llu ms", label,
		     (unsigned long long)(latency_bound_us[ARRAY_SIZE(latency_bound_us) - 1] /
					  1000));
		return;
	}
	if (latency_bound_us[i] % 1000)
		outf(o, ", %s <= %llu.%llu ms", label,
		     (unsigned long long)(latency_bound_us[i] / 1000),
		     (unsigned long long)(latency_bound_us[i] % 1000 / 100));
	else
		outf(o, ", %s <= %llu ms", label, (unsigned long long)(latency_bound_us[i] / 1000));
}

int metrics_render_text(char *buf, size_t len)
{
	struct out o = { .buf = buf, .len = len };
	struct latency_snap lat;
	uint64_t allow = 0, deny = 0, error = 0, would = 0, v;
	unsigned i, n;

	if (!len)
		return -ENOSPC;
	buf[0] = '\0';

	outf(&o, "connections: %lld open, %llu accepted\n",
	     (long long)atomic_load_explicit(&open_connections, memory_order_relaxed),
	     (unsigned long long)get(&connections_total));
	outf(&o, "bytes: %llu up, %llu down\n", (unsigned long long)get(&bytes_up),
	     (unsigned long long)get(&bytes_down));

	n = atomic_load_explicit(&decisions.used, memory_order_acquire);
	for (i = 0; i < n; i++) {
		const struct label_slot *s = &decision_slots[i];

		v = get(&decision_slots[i].count);
		if (!strcmp(s->val[1], "allow"))
			allow += v;
		else if (!strcmp(s->val[1], "deny"))
			deny += v;
		else if (!strcmp(s->val[1], SL_DECISION_WOULD_DENY))
			would += v;
		else
			error += v;
	}
	error += get(&decisions.other);
	outf(&o, "decisions: %llu allowed, %llu denied, %llu errors", (unsigned long long)allow,
	     (unsigned long long)deny, (unsigned long long)error);
	/* Audit mode's: let through, though the policy would refuse them. */
	if (would)
		outf(&o, ", %llu would-deny", (unsigned long long)would);
	outf(&o, "\n");
	/* What was refused and why is what an operator looks for. */
	for (i = 0; i < n; i++) {
		const struct label_slot *s = &decision_slots[i];

		v = get(&decision_slots[i].count);
		if (v && strcmp(s->val[1], "allow"))
			outf(&o, "  %s %s %s: %llu\n", s->val[1], s->val[0], s->val[2],
			     (unsigned long long)v);
	}
	v = get(&decisions.other);
	if (v)
		outf(&o, "  other: %llu\n", (unsigned long long)v);

	outf(&o, "dns: cache %llu hits, %llu misses; filter",
	     (unsigned long long)get(&dns_cache_hits), (unsigned long long)get(&dns_cache_misses));
	n = atomic_load_explicit(&dns_answers.used, memory_order_acquire);
	for (i = 0; i < n; i++)
		outf(&o, " %s %llu", dns_answer_slots[i].val[0],
		     (unsigned long long)get(&dns_answer_slots[i].count));
	v = get(&dns_answers.other);
	if (v)
		outf(&o, " other %llu", (unsigned long long)v);
	if (!n && !v)
		outf(&o, " no queries");
	outf(&o, "\n");

	latency_snapshot(&lat);
	outf(&o, "upstream connect: %llu", (unsigned long long)lat.count);
	if (lat.count) {
		outf(&o, ", mean %llu.%llu ms", (unsigned long long)(lat.sum_us / lat.count / 1000),
		     (unsigned long long)(lat.sum_us / lat.count % 1000 / 100));
		out_quantile(&o, &lat, "p50", 500);
		out_quantile(&o, &lat, "p99", 990);
	}
	outf(&o, "\n");
	outf(&o, "log: %llu lines lost%s\n", (unsigned long long)log_lines_lost(),
	     log_stderr_dead() ? " (stderr is gone: only the audit log and this status remain)"
			       : "");
	outf(&o, "audit: %llu lines lost; refusals %llu folded, %llu dropped\n",
	     (unsigned long long)audit_write_failures(),
	     (unsigned long long)audit_refusals_folded(),
	     (unsigned long long)audit_refusals_dropped());

	return out_finish(&o);
}
