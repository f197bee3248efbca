// SPDX-License-Identifier: MIT
/* `sluice report [NAME] [--since TIME] [--json] [AUDIT_LOG...]`: what a
 * sandbox did, from the audit log, as tables a person reads at a glance or
 * as one JSON document for tools.
 *
 * Theory of operation: every kept line is counted into four bounded tables
 * keyed by sandbox: hosts reached (allowed connection and request lines:
 * requests and bytes each way), refusals (every decision but allow, by
 * reason, name and port; a "repeated" line counts its N, an
 * audit-rate-limited line its "dropped"), credentials used (their names,
 * never a value: the log has none), and per-sandbox totals with the DNS
 * answers. A request is one line: an HTTP request, or a tunnel whose
 * requests the broker did not see; the line that opens an intercepted or
 * HTTP-carrying tunnel ("intercepted", "http-in-tunnel") is not a request
 * of its own, since each request inside has its line, but its bytes count.
 * Names come from clients: the tables escape them, the JSON escapes them as
 * the broker does (sl_json_escape(), common/json.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/ctlproto.h"
#include "common/json.h"
#include "cli/auditlog.h"
#include "netns/netns.h"
#include "cli/strtab.h"

#define REPORT_ENTRIES 20000 /* per table; beyond, counted in ->over */
#define NO_SANDBOX "(no sandbox)"

struct sb_ent {
	char *key; /* the sandbox */
	int64_t first, last;
	uint64_t lines;
	struct report_totals t;
};

struct host_ent {
	char *key;
	char sandbox[129], host[300];
	uint16_t port;
	uint64_t requests, up, down;
};

struct ref_ent {
	char *key;
	char sandbox[129], reason[65], decision[17], host[300];
	uint16_t port;
	uint64_t count;
};

struct cred_ent {
	char *key;
	char sandbox[129], cred[129], host[300];
	uint16_t port;
	uint64_t requests, refused;
};

struct report {
	struct strtab sbs, hosts, refs, creds;
};

struct report *cli_report_new(void)
{
	struct report *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	cli_strtabs_init(
		(const struct strtab_spec[]){
			{ &r->sbs, sizeof(struct sb_ent), REPORT_ENTRIES },
			{ &r->hosts, sizeof(struct host_ent), REPORT_ENTRIES },
			{ &r->refs, sizeof(struct ref_ent), REPORT_ENTRIES },
			{ &r->creds, sizeof(struct cred_ent), REPORT_ENTRIES },
		},
		4);
	return r;
}

void cli_report_free(struct report *r)
{
	if (!r)
		return;
	cli_strtabs_free((struct strtab *const[]){ &r->sbs, &r->hosts, &r->refs, &r->creds }, 4);
	free(r);
}

/*
 * A table key: the fields the broker writes itself (sandbox, reason,
 * credential, port) first, each ended by \x01, which none of them holds;
 * the client-controlled name last, so that no name can pose as another
 * key's fields.
 */
static void mkkey(char *key, size_t len, const char *a, const char *b, uint16_t port,
		  const char *name)
{
	snprintf(key, len, "%s\x01%s\x01%u\x01%s", a, b, port, name);
}

static bool is_conn(const char *proto)
{
	static const char *const conn[] = { "http", "https", "connect", "tls", "tcp" };
	size_t i;

	for (i = 0; i < sizeof(conn) / sizeof(conn[0]); i++)
		if (!strcmp(proto, conn[i]))
			return true;
	return false;
}

void cli_report_add(struct report *r, const struct auditlog_rec *rec)
{
	const char *sbname = rec->sandbox[0] ? rec->sandbox : NO_SANDBOX;
	/* A refusal before any name (a disguised address literal, say) is
	 * shown by what the client asked for. */
	const char *name = rec->name[0] ? rec->name : rec->addr[0] ? rec->addr : rec->target;
	uint64_t n = rec->repeated ? rec->repeated : 1;
	bool allowed = !strcmp(rec->decision, "allow");
	char key[700];
	struct sb_ent *sb = cli_strtab_get(&r->sbs, sbname);

	if (!sb)
		return;
	if (!sb->lines || rec->t_ms < sb->first)
		sb->first = rec->t_ms;
	if (rec->t_ms > sb->last)
		sb->last = rec->t_ms;
	sb->lines++;
	if (!strcmp(rec->reason, "audit-rate-limited") && rec->dropped)
		n = rec->dropped;

	if (!strcmp(rec->proto, "dns")) {
		if (allowed) {
			sb->t.dns_answered += n;
			return;
		}
		sb->t.dns_refused += n;
	} else if (allowed && is_conn(rec->proto)) {
		struct host_ent *h;

		mkkey(key, sizeof(key), sbname, "", rec->port, name);
		h = cli_strtab_get(&r->hosts, key);
		if (h && !h->host[0] && !h->requests && !h->up && !h->down) {
			snprintf(h->sandbox, sizeof(h->sandbox), "%s", sbname);
			snprintf(h->host, sizeof(h->host), "%s", name);
			h->port = rec->port;
		}
		/* The line that opens a tunnel whose requests have lines of
		 * their own is no request. */
		if (strcmp(rec->reason, "intercepted") && strcmp(rec->reason, "http-in-tunnel")) {
			sb->t.requests += n;
			if (h)
				h->requests += n;
		}
		sb->t.bytes_up += rec->bytes_up;
		sb->t.bytes_down += rec->bytes_down;
		if (h) {
			h->up += rec->bytes_up;
			h->down += rec->bytes_down;
		}
	} else if (allowed) {
		return; /* control lines: register, unregister, reload */
	}
	if (!allowed) {
		struct ref_ent *f;
		char k2[100];

		sb->t.refused += n;
		snprintf(k2, sizeof(k2), "%s\x01%s", rec->reason, rec->decision);
		mkkey(key, sizeof(key), sbname, k2, rec->port, name);
		f = cli_strtab_get(&r->refs, key);
		if (f) {
			if (!f->count) {
				snprintf(f->sandbox, sizeof(f->sandbox), "%s", sbname);
				snprintf(f->reason, sizeof(f->reason), "%s", rec->reason);
				snprintf(f->decision, sizeof(f->decision), "%s", rec->decision);
				snprintf(f->host, sizeof(f->host), "%s", name);
				f->port = rec->port;
			}
			f->count += n;
		}
	}
	if (rec->credential[0]) {
		struct cred_ent *c;
		char k2[300];

		snprintf(k2, sizeof(k2), "%s\x01%s", sbname, rec->credential);
		mkkey(key, sizeof(key), k2, "", rec->port, name);
		c = cli_strtab_get(&r->creds, key);
		if (c) {
			if (!c->requests && !c->refused) {
				snprintf(c->sandbox, sizeof(c->sandbox), "%s", sbname);
				snprintf(c->cred, sizeof(c->cred), "%s", rec->credential);
				snprintf(c->host, sizeof(c->host), "%s", name);
				c->port = rec->port;
			}
			if (!allowed)
				c->refused += n;
			else if (strcmp(rec->reason, "intercepted") &&
				 strcmp(rec->reason, "http-in-tunnel"))
				c->requests += n;
		}
	}
}

int cli_report_totals(const struct report *r, const char *sandbox, struct report_totals *t)
{
	const struct sb_ent *sb = cli_strtab_find(&r->sbs, sandbox);
	size_t i;

	if (!sb)
		return -ENOENT;
	*t = sb->t;
	t->hosts = 0;
	for (i = 0; i < r->hosts.n; i++) {
		const struct host_ent *h = cli_strtab_at(&r->hosts, i);

		t->hosts += !strcmp(h->sandbox, sandbox);
	}
	return 0;
}

void cli_report_host(const struct report *r, const char *sandbox, const char *host, uint16_t port,
		     uint64_t *requests, uint64_t *up, uint64_t *down)
{
	char key[700];
	const struct host_ent *h;

	mkkey(key, sizeof(key), sandbox, "", port, host);
	h = cli_strtab_find(&r->hosts, key);
	*requests = h ? h->requests : 0;
	*up = h ? h->up : 0;
	*down = h ? h->down : 0;
}

uint64_t cli_report_refused(const struct report *r, const char *sandbox, const char *reason,
			    const char *host)
{
	uint64_t n = 0;
	size_t i;

	for (i = 0; i < r->refs.n; i++) {
		const struct ref_ent *f = cli_strtab_at(&r->refs, i);

		if (!strcmp(f->sandbox, sandbox) && (!reason || !strcmp(f->reason, reason)) &&
		    (!host || !strcmp(f->host, host)))
			n += f->count;
	}
	return n;
}

/* --- printing --------------------------------------------------------------- */

/* @s made safe for a terminal (auditlog.h), cut to @max visible bytes. */
static const char *safe(char *buf, size_t len, const char *s, size_t max)
{
	FILE *m = fmemopen(buf, len, "w");

	if (!m) {
		snprintf(buf, len, "?");
		return buf;
	}
	cli_auditlog_put_safe(m, s, max);
	fputc('\0', m);
	fclose(m);
	buf[len - 1] = '\0';
	return buf;
}

static const char *target(char *buf, size_t len, const char *host, uint16_t port)
{
	char h[256];

	safe(h, sizeof(h), host[0] ? host : "-", 48);
	if (port && strchr(h, ':'))
		snprintf(buf, len, "[%s]:%u", h, port); /* an IPv6 literal */
	else if (port)
		snprintf(buf, len, "%s:%u", h, port);
	else
		snprintf(buf, len, "%s", h);
	return buf;
}

static const char *human(char *buf, size_t len, uint64_t n)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	unsigned u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (!u)
		snprintf(buf, len, "%llu B", (unsigned long long)n);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
	return buf;
}

static void put_time(FILE *out, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	fprintf(out, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static void put_json_str(FILE *out, const char *s)
{
	sl_json_print_string(out, s);
}

/* Sorting: most first, then by name. */
static int cmp_host(const void *a, const void *b)
{
	const struct host_ent *x = *(const struct host_ent *const *)a;
	const struct host_ent *y = *(const struct host_ent *const *)b;

	if (x->requests != y->requests)
		return x->requests < y->requests ? 1 : -1;
	return strcmp(x->host, y->host) ? strcmp(x->host, y->host) : (int)x->port - (int)y->port;
}

static int cmp_ref(const void *a, const void *b)
{
	const struct ref_ent *x = *(const struct ref_ent *const *)a;
	const struct ref_ent *y = *(const struct ref_ent *const *)b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	if (strcmp(x->reason, y->reason))
		return strcmp(x->reason, y->reason);
	return strcmp(x->host, y->host);
}

static int cmp_cred(const void *a, const void *b)
{
	const struct cred_ent *x = *(const struct cred_ent *const *)a;
	const struct cred_ent *y = *(const struct cred_ent *const *)b;

	return strcmp(x->cred, y->cred) ? strcmp(x->cred, y->cred) : strcmp(x->host, y->host);
}

static int cmp_sb(const void *a, const void *b)
{
	return strcmp(**(char *const *const *)a, **(char *const *const *)b);
}

/* The entries of @t in @sandbox, sorted by @cmp; *n their count. */
static void **pick(const struct strtab *t, const char *sandbox, size_t off,
		   int (*cmp)(const void *, const void *), size_t *n)
{
	void **v = calloc(t->n + 1, sizeof(*v));
	size_t i;

	*n = 0;
	if (!v)
		return NULL;
	for (i = 0; i < t->n; i++) {
		char *e = cli_strtab_at(t, i);

		if (!strcmp(e + off, sandbox))
			v[(*n)++] = e;
	}
	qsort(v, *n, sizeof(*v), cmp);
	return v;
}

/* Per-reason totals, for the table's order: the reason seen most first. */
struct reason_total {
	char *key;
	uint64_t n, hosts;
	bool shown;
};

#define REFUSAL_HOSTS_SHOWN 3 /* per reason, in the table; --json has all */

/* A refusal's group: its reason, and its decision when that is not "deny"
 * ("error", or "would-deny" in audit mode). */
static const char *label(char *buf, size_t len, const struct ref_ent *f)
{
	if (!strcmp(f->decision, "deny"))
		snprintf(buf, len, "%s", f->reason);
	else
		snprintf(buf, len, "%s (%s)", f->reason, f->decision);
	return buf;
}

/* Refusals grouped by reason (most first), each with its busiest hosts. */
static void print_refusals(FILE *out, struct ref_ent **v, size_t n)
{
	struct strtab tot = { .esize = sizeof(struct reason_total), .max = REPORT_ENTRIES };
	char a[300], rs[100];
	size_t i, j;

	for (i = 0; i < n; i++) {
		struct reason_total *t = cli_strtab_get(&tot, label(rs, sizeof(rs), v[i]));

		if (t) {
			t->n += v[i]->count;
			t->hosts++;
		}
	}
	fprintf(out, "\n  %-62s %8s\n", "REFUSED (REASON, THEN HOSTS)", "COUNT");
	for (;;) {
		struct reason_total *best = NULL;
		uint64_t rest = 0;
		size_t shown = 0;

		for (j = 0; j < tot.n; j++) {
			struct reason_total *t = cli_strtab_at(&tot, j);

			if (!t->shown && (!best || t->n > best->n ||
					  (t->n == best->n && strcmp(t->key, best->key) < 0)))
				best = t;
		}
		if (!best)
			break;
		best->shown = true;
		/* Shown as label() makes it, each word escaped on its own (the
		 * space between them is ours, not the log's). */
		for (i = 0; i < n && strcmp(label(rs, sizeof(rs), v[i]), best->key); i++)
			;
		if (i < n && strcmp(v[i]->decision, "deny")) {
			char d[40];

			safe(a, sizeof(a), v[i]->reason, 40);
			safe(d, sizeof(d), v[i]->decision, 16);
			snprintf(a + strlen(a), sizeof(a) - strlen(a), " (%s)", d);
		} else {
			safe(a, sizeof(a), best->key, 60);
		}
		fprintf(out, "  %-62s %8llu\n", a, (unsigned long long)best->n);
		/* v is sorted by count: the first of this reason are its busiest. */
		for (i = 0; i < n; i++) {
			if (strcmp(label(rs, sizeof(rs), v[i]), best->key))
				continue;
			if (shown++ < REFUSAL_HOSTS_SHOWN)
				fprintf(out, "    %-60s %8llu\n",
					target(a, sizeof(a), v[i]->host, v[i]->port),
					(unsigned long long)v[i]->count);
			else
				rest += v[i]->count;
		}
		if (shown > REFUSAL_HOSTS_SHOWN) {
			snprintf(a, sizeof(a), "... %zu more", shown - REFUSAL_HOSTS_SHOWN);
			fprintf(out, "    %-60s %8llu\n", a, (unsigned long long)rest);
		}
	}
	cli_strtab_free(&tot);
}

static void print_text(const struct report *r, const struct sb_ent *sb, FILE *out)
{
	char a[300], b[32], c[32];
	size_t i, n;
	void **v;

	fputs("sandbox ", out);
	fputs(safe(a, sizeof(a), sb->key, 128), out);
	fputs(": ", out);
	put_time(out, sb->first);
	fputs(" to ", out);
	put_time(out, sb->last);
	fprintf(out, ", %llu audit line%s\n", (unsigned long long)sb->lines,
		sb->lines == 1 ? "" : "s");
	fprintf(out,
		"  %llu requests allowed (%s up, %s down), %llu refused; DNS: %llu answered, %llu refused\n",
		(unsigned long long)sb->t.requests, human(b, sizeof(b), sb->t.bytes_up),
		human(c, sizeof(c), sb->t.bytes_down), (unsigned long long)sb->t.refused,
		(unsigned long long)sb->t.dns_answered, (unsigned long long)sb->t.dns_refused);

	v = pick(&r->hosts, sb->key, offsetof(struct host_ent, sandbox), cmp_host, &n);
	if (v && n) {
		fprintf(out, "\n  %-52s %8s %12s %12s\n", "HOSTS REACHED", "REQUESTS", "BYTES UP",
			"BYTES DOWN");
		for (i = 0; i < n; i++) {
			struct host_ent *h = v[i];

			fprintf(out, "  %-52s %8llu %12s %12s\n",
				target(a, sizeof(a), h->host, h->port),
				(unsigned long long)h->requests, human(b, sizeof(b), h->up),
				human(c, sizeof(c), h->down));
		}
	}
	free(v);
	v = pick(&r->refs, sb->key, offsetof(struct ref_ent, sandbox), cmp_ref, &n);
	if (v && n)
		print_refusals(out, (struct ref_ent **)v, n);
	free(v);
	v = pick(&r->creds, sb->key, offsetof(struct cred_ent, sandbox), cmp_cred, &n);
	if (v && n) {
		fprintf(out, "\n  %-24s %-46s %8s %8s\n", "CREDENTIALS (NAME)", "HOST", "REQUESTS",
			"REFUSED");
		for (i = 0; i < n; i++) {
			struct cred_ent *e = v[i];
			char cn[80];

			fprintf(out, "  %-24s %-46s %8llu %8llu\n",
				safe(cn, sizeof(cn), e->cred, 24),
				target(a, sizeof(a), e->host, e->port),
				(unsigned long long)e->requests, (unsigned long long)e->refused);
		}
	}
	free(v);
}

static void print_json(const struct report *r, const struct sb_ent *sb, FILE *out)
{
	size_t i, n;
	void **v;

	fputs("{\"sandbox\":", out);
	put_json_str(out, sb->key);
	fputs(",\"first\":\"", out);
	put_time(out, sb->first);
	fputs("\",\"last\":\"", out);
	put_time(out, sb->last);
	fprintf(out,
		"\",\"lines\":%llu,\"requests\":%llu,\"bytes_up\":%llu,\"bytes_down\":%llu,"
		"\"refused\":%llu,\"dns_answered\":%llu,\"dns_refused\":%llu,\"hosts\":[",
		(unsigned long long)sb->lines, (unsigned long long)sb->t.requests,
		(unsigned long long)sb->t.bytes_up, (unsigned long long)sb->t.bytes_down,
		(unsigned long long)sb->t.refused, (unsigned long long)sb->t.dns_answered,
		(unsigned long long)sb->t.dns_refused);
	v = pick(&r->hosts, sb->key, offsetof(struct host_ent, sandbox), cmp_host, &n);
	for (i = 0; v && i < n; i++) {
		struct host_ent *h = v[i];

		fputs(i ? ",{\"host\":" : "{\"host\":", out);
		put_json_str(out, h->host);
		fprintf(out,
			",\"port\":%u,\"requests\":%llu,\"bytes_up\":%llu,\"bytes_down\":%llu}",
			h->port, (unsigned long long)h->requests, (unsigned long long)h->up,
			(unsigned long long)h->down);
	}
	free(v);
	fputs("],\"refusals\":[", out);
	v = pick(&r->refs, sb->key, offsetof(struct ref_ent, sandbox), cmp_ref, &n);
	for (i = 0; v && i < n; i++) {
		struct ref_ent *f = v[i];

		fputs(i ? ",{\"reason\":" : "{\"reason\":", out);
		put_json_str(out, f->reason);
		fputs(",\"decision\":", out);
		put_json_str(out, f->decision);
		fputs(",\"host\":", out);
		put_json_str(out, f->host);
		fprintf(out, ",\"port\":%u,\"count\":%llu}", f->port, (unsigned long long)f->count);
	}
	free(v);
	fputs("],\"credentials\":[", out);
	v = pick(&r->creds, sb->key, offsetof(struct cred_ent, sandbox), cmp_cred, &n);
	for (i = 0; v && i < n; i++) {
		struct cred_ent *e = v[i];

		fputs(i ? ",{\"name\":" : "{\"name\":", out);
		put_json_str(out, e->cred);
		fputs(",\"host\":", out);
		put_json_str(out, e->host);
		fprintf(out, ",\"port\":%u,\"requests\":%llu,\"refused\":%llu}", e->port,
			(unsigned long long)e->requests, (unsigned long long)e->refused);
	}
	free(v);
	fputs("]}", out);
}

int cli_report_print(const struct report *r, bool json, const struct auditlog_stats *st, FILE *out)
{
	struct sb_ent **sbs = calloc(r->sbs.n + 1, sizeof(*sbs));
	uint64_t over = r->sbs.over + r->hosts.over + r->refs.over + r->creds.over;
	size_t i;

	if (!sbs)
		return -ENOMEM;
	for (i = 0; i < r->sbs.n; i++)
		sbs[i] = cli_strtab_at(&r->sbs, i);
	qsort(sbs, r->sbs.n, sizeof(*sbs), cmp_sb);
	if (json)
		fprintf(out,
			"{\"lines\":%llu,\"skipped\":%llu,\"not_counted\":%llu,\"sandboxes\":[",
			(unsigned long long)st->lines, (unsigned long long)st->skipped,
			(unsigned long long)over);
	for (i = 0; i < r->sbs.n; i++) {
		if (json) {
			fputs(i ? "," : "", out);
			print_json(r, sbs[i], out);
		} else {
			fputs(i ? "\n" : "", out);
			print_text(r, sbs[i], out);
		}
	}
	if (json)
		fputs("]}\n", out);
	else if (over)
		fprintf(out,
			"\n%llu lines went beyond the report's bounds (%d rows a table) and "
			"are not counted\n",
			(unsigned long long)over, REPORT_ENTRIES);
	free(sbs);
	return 0;
}

/* --- the command ------------------------------------------------------------ */

static int report_cb(const struct auditlog_rec *rec, void *ctx)
{
	cli_report_add(ctx, rec);
	return 0;
}

/* The broker's audit log path in @path: "" when its `config` answer names
 * none (an answer, not an error: no errno stands for it). Return: 0, or
 * a negative errno when the broker could not be asked. */
static int broker_audit_path(char *path, size_t len)
{
	char *resp = NULL, *line, *save = NULL;
	int r = netns_ctl(CTL_CONFIG, &resp);

	path[0] = '\0';
	if (r < 0) {
		free(resp);
		return r;
	}
	for (line = strtok_r(resp, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "audit_log ", 10))
			snprintf(path, len, "%s", line + 10);
	}
	free(resp);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: sluice report [NAME] [--since TIME] [--json] [AUDIT_LOG...]\n"
			"  TIME: an RFC 3339 time (2026-12-01T21:00:00Z) or a duration back "
			"from now (90s, 30m, 1h30m, 2d)\n");
	return 2;
}

int cmd_report(int argc, char **argv)
{
	struct auditlog_filter flt = { .since_ms = INT64_MIN };
	struct auditlog_stats st = { 0 };
	char broker_path[PATH_MAX];
	const char *files[256];
	struct report *rep = NULL;
	bool json = false;
	struct timespec now;
	int i, nfiles = 0, ret = 1;

	clock_gettime(CLOCK_REALTIME, &now);
	for (i = 1; i < argc; i++) {
		struct stat sb;

		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--since") && i + 1 < argc) {
			if (cli_auditlog_since(argv[++i],
					       (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000,
					       &flt.since_ms) < 0) {
				fprintf(stderr,
					"sluice: --since `%s`: not an RFC 3339 time or a "
					"duration (90s, 30m, 1h, 2d)\n",
					argv[i]);
				return 2;
			}
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "sluice: report: unknown option `%s`\n", argv[i]);
			return usage();
		} else if (!flt.sandbox && !nfiles && strcmp(argv[i], "-") &&
			   !strchr(argv[i], '/') && stat(argv[i], &sb) < 0) {
			/* A sandbox name holds no '/'; a log in the current
			 * directory is taken as a log when it exists. */
			flt.sandbox = argv[i];
		} else {
			if (nfiles == (int)(sizeof(files) / sizeof(files[0]))) {
				fprintf(stderr, "sluice: report: at most %zu audit logs\n",
					sizeof(files) / sizeof(files[0]));
				return 2;
			}
			files[nfiles++] = argv[i];
		}
	}
	if (!nfiles) {
		int r = broker_audit_path(broker_path, sizeof(broker_path));

		if (r < 0 || !broker_path[0] || !strcmp(broker_path, "-")) {
			fprintf(stderr,
				"sluice: report: name the audit log (sluice report [NAME] "
				"AUDIT_LOG...): %s\n",
				r < 0 ? "the broker could not be asked where it writes it"
				: !broker_path[0] ? "the broker does not say where it writes it"
						  : "the broker writes it to its stderr");
			return 2;
		}
		files[nfiles++] = broker_path;
	}
	rep = cli_report_new();
	if (!rep) {
		fprintf(stderr, "sluice: out of memory\n");
		return 1;
	}
	for (i = 0; i < nfiles; i++) {
		FILE *f = strcmp(files[i], "-") ? fopen(files[i], "re") : stdin;
		int r;

		if (!f) {
			fprintf(stderr, "sluice: %s: %s\n", files[i], strerror(errno));
			goto out;
		}
		r = cli_auditlog_read(f, &flt, report_cb, rep, &st);
		if (f != stdin)
			fclose(f);
		if (r < 0) {
			fprintf(stderr, "sluice: %s: %s\n", files[i], strerror(-r));
			goto out;
		}
	}
	if (st.skipped)
		fprintf(stderr, "sluice: skipped %llu of %llu lines: not audit lines\n",
			(unsigned long long)st.skipped, (unsigned long long)st.lines);
	if (flt.sandbox && !rep->sbs.n) {
		fputs("sluice: no audit line of sandbox `", stderr);
		cli_auditlog_put_safe(stderr, flt.sandbox, 128);
		fprintf(stderr, "` in the %d file%s given%s\n", nfiles, nfiles == 1 ? "" : "s",
			flt.since_ms != INT64_MIN ? " (since that time)" : "");
		goto out;
	}
	if (cli_report_print(rep, json, &st, stdout) == 0)
		ret = 0;
out:
	cli_report_free(rep);
	return ret;
}
