// SPDX-License-Identifier: MIT
/* `sluice policy suggest`: the smallest policy that would have allowed what
 * an audit log shows a sandbox doing.
 *
 * Theory of operation: each audit line about a connection or a DNS query
 * is sorted into one entry per host name (or address literal): the ports
 * it was used on (allowed, refused as outside the policy, or failed after
 * the policy let it pass), the ports where bytes that are neither HTTP nor
 * TLS were refused (raw_tcp), how often and when. A name or literal that
 * was ever refused for an address reason (address-denied, a literal in a
 * denied range, broker-address) is never suggested: the guard refused it
 * for what it is, not for a missing rule; it is listed in a comment
 * instead. Names that are not host names (the log holds whatever a client
 * sent) are never turned into rules either. With --wildcards N, N or more
 * names one label under one suffix become `*.suffix`, never over a suffix
 * of one label, a known public suffix, or one that covers an
 * address-refused name. The output is checked with the policy loader
 * before it is printed: what is printed, `sluice policy check` accepts.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/addr.h"
#include "cli/auditlog.h"
#include "cli/strtab.h"
#include "policy/policy.h"

#define SUG_PORTS 64	      /* ports kept per name */
#define SUG_NAMES 100000      /* names kept; beyond, counted */
#define SUG_BAD_SHOWN 20      /* not-host-names listed in the comment */
#define SUG_REFUSED_SHOWN 100 /* address-refused names listed */
/* What one policy holds: allow rules (policy/load.c's MAX_RULES) and bytes
 * (YTREE_MAX_BYTES, 1 MiB; the rules get this much of it, the comments
 * around them the rest). */
#define SUG_RULES 4096
#define SUG_RULE_BYTES (896u << 10)

struct ports {
	uint16_t p[SUG_PORTS];
	unsigned n;
	bool over;
};

struct sug_ent {
	char *key; /* a normalised host name, or an address as addr_format() writes it */
	bool literal;
	char addr_reason[100]; /* not "": refused for an address reason (never suggested) */
	struct ports ports, raw;
	uint64_t allowed, refused, dns;
	int64_t first, last;
	bool absorbed; /* into a wildcard rule */
};

struct suggest {
	struct strtab names;	 /* struct sug_ent */
	struct strtab sandboxes; /* struct { char *key; } */
	struct strtab bad;	 /* not host names: struct { char *key; uint64_t n; } */
	uint64_t lines, dropped;
	struct policy *deny; /* the default deny ranges, to judge literals */
};

struct bad_ent {
	char *key;
	uint64_t n;
};

struct suggest *cli_suggest_new(void)
{
	static const char pol[] = "version: 1\negress:\n  allow: []\n";
	struct suggest *s = calloc(1, sizeof(*s));
	struct policy_error err;

	if (!s)
		return NULL;
	cli_strtabs_init(
		(const struct strtab_spec[]){
			{ &s->names, sizeof(struct sug_ent), SUG_NAMES },
			{ &s->sandboxes, sizeof(char *), 64 },
			{ &s->bad, sizeof(struct bad_ent), 1000 },
		},
		3);
	if (policy_load_buffer("(deny ranges)", pol, sizeof(pol) - 1, &s->deny, &err) < 0) {
		free(s);
		return NULL;
	}
	return s;
}

void cli_suggest_free(struct suggest *s)
{
	if (!s)
		return;
	cli_strtabs_free((struct strtab *const[]){ &s->names, &s->sandboxes, &s->bad }, 3);
	policy_unref(s->deny);
	free(s);
}

static bool in(const char *s, const char *const *set)
{
	for (; *set; set++)
		if (!strcmp(s, *set))
			return true;
	return false;
}

static void port_add(struct ports *ps, uint16_t p)
{
	unsigned i;

	for (i = 0; i < ps->n; i++)
		if (ps->p[i] == p)
			return;
	if (ps->n == SUG_PORTS) {
		ps->over = true;
		return;
	}
	ps->p[ps->n++] = p;
}

static void ports_merge(struct ports *to, const struct ports *from)
{
	unsigned i;

	for (i = 0; i < from->n; i++)
		port_add(to, from->p[i]);
	to->over |= from->over;
}

static bool port_has(const struct ports *ps, uint16_t p)
{
	unsigned i;

	for (i = 0; i < ps->n; i++)
		if (ps->p[i] == p)
			return true;
	return false;
}

enum sug_kind {
	K_IGNORE,
	K_PORT,	   /* a rule for NAME:PORT */
	K_RAW,	   /* the same, with raw_tcp */
	K_NAME,	   /* a DNS query: the name, no port known */
	K_ADDRESS, /* refused for an address reason */
};

static enum sug_kind kind_of(const struct auditlog_rec *r)
{
	static const char *const conn[] = { "http", "https", "connect", "tls", "tcp", NULL };
	/* Refused because the policy lacks a rule: what a rule would change. */
	static const char *const outside[] = { "not-allowlisted", "port-not-allowed", NULL };
	/* The policy let these pass; what failed came after it. */
	static const char *const passed[] = { "policy-withdrawn", "dns-failure",
					      "dns-timeout",	  "connect-failed",
					      "connect-timeout",  "upstream-reset",
					      "upstream-timeout", "upstream-tls",
					      "bad-response",	  NULL };
	static const char *const address[] = { "address-denied", "address-literal",
					       "broker-address", NULL };
	bool allowed = !strcmp(r->decision, "allow");

	if (in(r->proto, conn)) {
		if (in(r->reason, address))
			return K_ADDRESS;
		if (allowed || in(r->reason, outside) || in(r->reason, passed))
			return K_PORT;
		if (!strcmp(r->reason, "raw-tcp-not-allowed"))
			return K_RAW;
		return K_IGNORE;
	}
	if (!strcmp(r->proto, "dns")) {
		if (in(r->reason, address))
			return K_ADDRESS;
		if (allowed || !strcmp(r->reason, "not-allowlisted"))
			return K_NAME;
	}
	return K_IGNORE;
}

static void count_bad(struct suggest *s, const char *name, uint64_t n)
{
	struct bad_ent *b = cli_strtab_get(&s->bad, name);

	if (b)
		b->n += n;
}

void cli_suggest_add(struct suggest *s, const struct auditlog_rec *r)
{
	enum sug_kind k = kind_of(r);
	uint64_t n = r->repeated ? r->repeated : 1;
	char key[256], why[100] = "";
	const char *name = r->name[0] ? r->name : r->addr, *not_name;
	struct sl_addr a;
	struct sug_ent *e;
	bool literal = false;
	size_t klen;

	s->lines++;
	if (!strcmp(r->reason, "audit-rate-limited"))
		s->dropped += r->dropped;
	if (k == K_IGNORE || !name[0])
		return;
	if (r->sandbox[0] && !r->suspect)
		cli_strtab_get(&s->sandboxes, r->sandbox);
	if (!r->suspect && addr_parse(name, &a) == 0) {
		struct guard_result g;

		literal = true;
		addr_format(&a, key, sizeof(key));
		if (k == K_ADDRESS && !strcmp(r->reason, "address-literal")) {
			/* Refused only for being a literal without a cidr rule:
			 * a cidr rule may allow it, if the guard's ranges do. */
			if (policy_guard(s->deny, &a, r->port ? r->port : 443, GUARD_FROM_NAME,
					 &g) == GUARD_ALLOW)
				k = r->port ? K_PORT : K_IGNORE;
			else
				snprintf(why, sizeof(why), "address-literal, in %s", g.range);
		}
		if (k == K_NAME)
			k = K_IGNORE; /* a DNS name that is an address: nothing to allow */
	} else if (r->suspect || policy_normalize_name(name, strlen(name), key, &klen) < 0 ||
		   !policy_check_name(key, klen, false, &not_name)) {
		count_bad(s, r->suspect ? "(a name cut short or holding a NUL)" : name, n);
		return;
	}
	if (k == K_IGNORE)
		return;
	e = cli_strtab_get(&s->names, key);
	if (!e)
		return; /* counted in s->names.over */
	e->literal = literal;
	if (!e->first || r->t_ms < e->first)
		e->first = r->t_ms;
	if (r->t_ms > e->last)
		e->last = r->t_ms;
	if (k == K_ADDRESS) {
		if (!e->addr_reason[0])
			snprintf(e->addr_reason, sizeof(e->addr_reason), "%s",
				 why[0] ? why : r->reason);
		e->refused += n;
		return;
	}
	if (!strcmp(r->decision, "allow"))
		e->allowed += n;
	else
		e->refused += n;
	if (k == K_NAME || !r->port) { /* port 0 is no port: none was logged */
		e->dns += !strcmp(r->proto, "dns") ? n : 0;
		return;
	}
	port_add(k == K_RAW ? &e->raw : &e->ports, r->port);
}

/* Public suffixes that a wildcard must never sit on, beyond one label
 * (which the rule "two labels at least" already refuses): a short list of
 * common ones, not the Public Suffix List; a name under any other suffix
 * needs N siblings and a person who reads the output. */
/* clang-format off */
static const char *const public_suffixes[] = {
	"co.uk", "org.uk", "ac.uk", "gov.uk", "me.uk", "ltd.uk", "plc.uk", "net.uk",
	"com.au", "net.au", "org.au", "edu.au", "gov.au", "co.nz", "org.nz", "co.jp",
	"ne.jp", "or.jp", "ac.jp", "co.kr", "or.kr", "co.in", "net.in", "org.in",
	"co.za", "org.za", "com.br", "net.br", "org.br", "com.cn", "net.cn", "org.cn",
	"com.mx", "com.tr", "com.tw", "com.hk", "com.sg", "com.ar", "co.il", "com.pl",
	NULL,
};
/* Platforms whose every name below may be another tenant's: neither they nor
 * any suffix under them (s3.us-east-1.amazonaws.com, storage.googleapis.com,
 * blob.core.windows.net) is a wildcard's. */
static const char *const shared_platforms[] = {
	"github.io", "githubusercontent.com", "gitlab.io", "pages.dev", "workers.dev",
	"netlify.app", "vercel.app", "herokuapp.com", "appspot.com", "web.app",
	"firebaseapp.com", "blogspot.com", "azurewebsites.net", "cloudfront.net",
	"amazonaws.com", "elasticbeanstalk.com", "fly.dev", "googleapis.com",
	"googleusercontent.com", "windows.net", "azureedge.net", "azurefd.net",
	"digitaloceanspaces.com", "r2.dev", "r2.cloudflarestorage.com",
	"backblazeb2.com", "wasabisys.com", "onrender.com", "ngrok.io",
	"ngrok-free.app", "trycloudflare.com", "repl.co", "glitch.me", "surge.sh",
	"readthedocs.io", "duckdns.org", "no-ip.org", "dyndns.org", NULL,
};
/* clang-format on */

static bool under(const char *name, const char *suffix);

bool cli_suggest_public_suffix(const char *suffix)
{
	size_t i;

	if (!strchr(suffix, '.'))
		return true; /* one label: com, org, test */
	if (in(suffix, public_suffixes))
		return true;
	for (i = 0; shared_platforms[i]; i++)
		if (!strcmp(suffix, shared_platforms[i]) || under(suffix, shared_platforms[i]))
			return true;
	return false;
}

static unsigned labels(const char *s)
{
	unsigned n = 1;

	for (; *s; s++)
		n += *s == '.';
	return n;
}

/* Does @name lie under @suffix (at any depth, not the suffix itself)? */
static bool under(const char *name, const char *suffix)
{
	size_t n = strlen(name), k = strlen(suffix);

	return n > k + 1 && name[n - k - 1] == '.' && !strcmp(name + n - k, suffix);
}

struct rule {
	char pattern[260];
	bool cidr, raw;
	struct ports ports;
	uint64_t allowed, refused, dns, members;
	int64_t first, last;
	char example[3][256]; /* a few of a wildcard's names */
};

static void rule_from(struct rule *ru, const struct sug_ent *e)
{
	if (!ru->members || e->first < ru->first)
		ru->first = e->first;
	if (e->last > ru->last)
		ru->last = e->last;
	ru->allowed += e->allowed;
	ru->refused += e->refused;
	ru->dns += e->dns;
	if (ru->members < 3)
		snprintf(ru->example[ru->members], sizeof(ru->example[0]), "%s", e->key);
	ru->members++;
}

static int cmp_rule(const void *a, const void *b)
{
	const struct rule *x = a, *y = b;
	int c = x->cidr - y->cidr;

	if (c)
		return c;
	c = strcmp(x->pattern, y->pattern);
	return c ? c : x->raw - y->raw;
}

/* The most used first (allowed and refused), then by pattern. */
static int cmp_use(const void *a, const void *b)
{
	const struct rule *x = a, *y = b;
	uint64_t nx = x->allowed + x->refused, ny = y->allowed + y->refused;

	if (nx != ny)
		return nx > ny ? -1 : 1;
	return cmp_rule(a, b);
}

static int cmp_port(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void put_time(FILE *out, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	fprintf(out, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

static void print_rule(FILE *out, struct rule *ru)
{
	uint64_t n = ru->allowed + ru->refused;
	unsigned i;

	fputs("    # ", out);
	if (ru->raw) {
		fputs("bytes neither HTTP nor TLS were refused on these ports "
		      "(raw-tcp-not-allowed); a rule of their own\n",
		      out);
		goto rule;
	}
	if (ru->members > 1 || ru->pattern[0] == '*') {
		fprintf(out, "%llu names (", (unsigned long long)ru->members);
		for (i = 0; i < ru->members && i < 3; i++)
			fprintf(out, "%s%s", i ? ", " : "", ru->example[i]);
		fprintf(out, "%s), ", ru->members > 3 ? ", ..." : "");
	}
	fprintf(out, "%llu time%s (%llu allowed, %llu refused), first ", (unsigned long long)n,
		n == 1 ? "" : "s", (unsigned long long)ru->allowed,
		(unsigned long long)ru->refused);
	put_time(out, ru->first);
	fputs(", last ", out);
	put_time(out, ru->last);
	if (!ru->ports.n)
		fputs("; no port seen (a DNS query): the default ports", out);
	if (ru->ports.over)
		fprintf(out, "; more than %d ports seen, the first %d kept", SUG_PORTS, SUG_PORTS);
	fputc('\n', out);
rule:
	/* Quoted: YAML reads a leading '*' as an alias, and a name such as
	 * "null" or "yes" as something else than a string. The pattern holds
	 * only letters, digits, '-', '_', '.', ':', '/' and a leading '*'. */
	fprintf(out, "    - %s: \"%s\"\n", ru->cidr ? "cidr" : "host", ru->pattern);
	if (ru->ports.n) {
		qsort(ru->ports.p, ru->ports.n, sizeof(uint16_t), cmp_port);
		fputs("      ports: [", out);
		for (i = 0; i < ru->ports.n; i++)
			fprintf(out, "%s%u", i ? ", " : "", ru->ports.p[i]);
		fputs("]\n", out);
	}
	if (ru->raw)
		fputs("      raw_tcp: true\n", out);
}

/* Writes the policy into @out (a memory stream); returns the rule count. */
/*
 * Keeps of @rules (*@n of them) what one policy holds, the most used first:
 * at most SUG_RULES, their text at most SUG_RULE_BYTES. A sandbox that asks
 * for more names than that must not leave the operator with no policy at
 * all. Return: how many were left out (*@n is what is kept).
 */
static size_t keep_within_bounds(struct rule *rules, size_t *n)
{
	size_t i, keep = 0, bytes = 0;
	char *buf = NULL;
	size_t len = 0;
	FILE *m;

	qsort(rules, *n, sizeof(*rules), cmp_use);
	m = open_memstream(&buf, &len);
	for (i = 0; i < *n && keep < SUG_RULES; i++) {
		long end;

		if (!m || fseek(m, 0, SEEK_SET) < 0)
			break;
		print_rule(m, &rules[i]);
		end = ftell(m);
		if (end < 0 || bytes + (size_t)end > SUG_RULE_BYTES)
			break;
		bytes += (size_t)end;
		keep++;
	}
	if (m)
		fclose(m);
	free(buf);
	i = *n - keep;
	*n = keep;
	return i;
}

static int write_policy(struct suggest *s, unsigned wildcards, FILE *out)
{
	struct strtab sfx = { .esize = sizeof(struct {
				      char *key;
				      uint64_t n;
			      }),
			      .max = SUG_NAMES };
	struct rule *rules = NULL;
	char **chosen = NULL, **names = NULL, **covering = NULL;
	size_t i, j, nrules = 0, nchosen = 0, nrefused = 0, ncovering = 0, nleft;
	int ret = -ENOMEM;

	rules = calloc(2 * s->names.n + 1, sizeof(*rules));
	chosen = calloc(s->names.n + 1, sizeof(*chosen));
	names = calloc(s->sandboxes.n + 1, sizeof(*names));
	covering = calloc(s->names.n + 1, sizeof(*covering));
	if (!rules || !chosen || !names || !covering)
		goto out;

	/* Wildcards: count the names one label under each suffix. */
	for (i = 0; wildcards && i < s->names.n; i++) {
		struct sug_ent *e = cli_strtab_at(&s->names, i);
		const char *dot = strchr(e->key, '.');
		struct {
			char *key;
			uint64_t n;
		} *c;

		if (e->literal || e->addr_reason[0] || !dot)
			continue;
		c = cli_strtab_get(&sfx, dot + 1);
		if (c)
			c->n++;
	}
	for (i = 0; i < sfx.n; i++) {
		struct {
			char *key;
			uint64_t n;
		} *c = cli_strtab_at(&sfx, i);
		bool covers_refused = false;

		if (c->n < wildcards || cli_suggest_public_suffix(c->key))
			continue;
		for (j = 0; j < s->names.n; j++) {
			struct sug_ent *e = cli_strtab_at(&s->names, j);

			covers_refused |= e->addr_reason[0] && under(e->key, c->key);
		}
		if (!covers_refused)
			chosen[nchosen++] = c->key;
		else
			covering[ncovering++] = c->key;
	}
	/* Shorter suffixes first: *.a.b under a chosen *.b adds nothing. */
	for (i = 1; i < nchosen; i++) {
		for (j = i; j > 0 && labels(chosen[j - 1]) > labels(chosen[j]); j--) {
			char *t = chosen[j];

			chosen[j] = chosen[j - 1];
			chosen[j - 1] = t;
		}
	}
	for (i = 0; i < nchosen; i++) {
		struct rule *ru = NULL, *rr = NULL;

		for (j = 0; j < i; j++)
			if (chosen[j] && under(chosen[i], chosen[j]))
				break;
		if (j < i) {
			chosen[i] = NULL;
			continue;
		}
		for (j = 0; j < s->names.n; j++) {
			struct sug_ent *e = cli_strtab_at(&s->names, j);

			if (e->literal || e->absorbed || !under(e->key, chosen[i]))
				continue;
			if (!ru) {
				ru = &rules[nrules++];
				snprintf(ru->pattern, sizeof(ru->pattern), "*.%s", chosen[i]);
			}
			e->absorbed = true;
			rule_from(ru, e);
			ports_merge(&ru->ports, &e->ports);
			if (e->raw.n) {
				if (!rr) {
					rr = &rules[nrules++];
					snprintf(rr->pattern, sizeof(rr->pattern), "*.%s",
						 chosen[i]);
					rr->raw = true;
				}
				rule_from(rr, e);
				ports_merge(&rr->ports, &e->raw);
			}
		}
	}
	/* Exact names and literals. */
	for (i = 0; i < s->names.n; i++) {
		struct sug_ent *e = cli_strtab_at(&s->names, i);
		struct rule *ru;
		unsigned k;

		if (e->absorbed)
			continue;
		if (e->addr_reason[0]) {
			nrefused++;
			continue;
		}
		if (e->literal && !e->ports.n && !e->raw.n)
			continue;
		if (e->ports.n || !e->raw.n) {
			ru = &rules[nrules++];
			ru->cidr = e->literal;
			if (e->literal)
				snprintf(ru->pattern, sizeof(ru->pattern), "%s/%d", e->key,
					 strchr(e->key, ':') ? 128 : 32);
			else
				snprintf(ru->pattern, sizeof(ru->pattern), "%s", e->key);
			rule_from(ru, e);
			for (k = 0; k < e->ports.n; k++)
				if (!port_has(&e->raw, e->ports.p[k]))
					port_add(&ru->ports, e->ports.p[k]);
			ru->ports.over = e->ports.over;
			if (e->ports.n && !ru->ports.n)
				nrules--; /* every port it used needs raw_tcp */
		}
		if (e->raw.n) {
			ru = &rules[nrules++];
			ru->cidr = e->literal;
			if (e->literal)
				snprintf(ru->pattern, sizeof(ru->pattern), "%s/%d", e->key,
					 strchr(e->key, ':') ? 128 : 32);
			else
				snprintf(ru->pattern, sizeof(ru->pattern), "%s", e->key);
			ru->raw = true;
			rule_from(ru, e);
			ports_merge(&ru->ports, &e->raw);
		}
	}
	nleft = keep_within_bounds(rules, &nrules);
	qsort(rules, nrules, sizeof(*rules), cmp_rule);

	for (i = 0; i < s->sandboxes.n; i++)
		names[i] = *(char **)cli_strtab_at(&s->sandboxes, i);
	qsort(names, s->sandboxes.n, sizeof(*names), cmp_str);
	fprintf(out, "# Suggested by `sluice policy suggest` from %llu audit lines",
		(unsigned long long)s->lines);
	if (s->sandboxes.n) {
		fputs(" of sandbox", out);
		fputs(s->sandboxes.n > 1 ? "es " : " ", out);
		for (i = 0; i < s->sandboxes.n; i++) {
			fputs(i ? ", " : "", out);
			cli_auditlog_put_safe(out, names[i], 128);
		}
	}
	fputs(".\n# Every rule was used, or asked for, in the log: read it before you use it.\n",
	      out);
	fputs("version: 1\negress:\n", out);
	if (!nrules)
		fputs("  allow: []\n", out);
	else
		fputs("  allow:\n", out);
	for (i = 0; i < nrules; i++)
		print_rule(out, &rules[i]);
	if (nleft)
		fprintf(out,
			"# %zu more rules not suggested, the least used: one policy holds at most %d "
			"allow rules and 1 MiB (sluice report lists every name)\n",
			nleft, SUG_RULES);

	for (i = 0; i < ncovering; i++)
		fprintf(out, "# no \"*.%s\": it would cover a name refused for an address reason\n",
			covering[i]);
	if (nrefused) {
		fputs("# refused for address reasons, not suggested:\n", out);
		for (i = 0, j = 0; i < s->names.n; i++) {
			struct sug_ent *e = cli_strtab_at(&s->names, i);

			if (!e->addr_reason[0] || e->absorbed)
				continue;
			if (j++ == SUG_REFUSED_SHOWN) {
				fprintf(out, "#   ... and %zu more\n",
					nrefused - SUG_REFUSED_SHOWN);
				break;
			}
			fputs("#   ", out);
			cli_auditlog_put_safe(out, e->key, 255);
			/* Our own words: a reason of kind_of()'s list, a range. */
			fprintf(out, "  %s", e->addr_reason);
			fprintf(out, "  (%llu time%s)\n",
				(unsigned long long)(e->refused + e->allowed),
				e->refused + e->allowed == 1 ? "" : "s");
		}
	}
	if (s->bad.n || s->bad.over) {
		fprintf(out, "# names that are not host names, not suggested (%zu%s):\n", s->bad.n,
			s->bad.over ? " and more" : "");
		for (i = 0; i < s->bad.n && i < SUG_BAD_SHOWN; i++) {
			struct bad_ent *b = cli_strtab_at(&s->bad, i);

			fputs("#   ", out);
			cli_auditlog_put_safe(out, b->key, 80);
			fprintf(out, "  (%llu)\n", (unsigned long long)b->n);
		}
	}
	if (s->names.over)
		fprintf(out, "# %llu lines named more than %d names: those were not counted\n",
			(unsigned long long)s->names.over, SUG_NAMES);
	if (s->dropped)
		fprintf(out,
			"# %llu refusals were dropped by the broker's audit rate (audit-rate-limited):"
			" what they asked for is not in the log\n",
			(unsigned long long)s->dropped);
	ret = (int)nrules;
out:
	cli_strtab_free(&sfx);
	free(rules);
	free(chosen);
	free(names);
	free(covering);
	return ret;
}

int cli_suggest_print(struct suggest *s, unsigned wildcards, FILE *out)
{
	struct policy_error err;
	struct policy *p = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	int n;

	if (!m)
		return -errno;
	n = write_policy(s, wildcards, m);
	if (fclose(m) != 0 && n >= 0)
		n = -ENOMEM;
	if (n < 0) {
		free(buf);
		return n;
	}
	/* What is printed must load; if it does not, that is a bug here. */
	if (policy_load_buffer("(suggested policy)", buf, len, &p, &err) < 0) {
		fprintf(stderr, "sluice: the suggested policy does not load (a bug): %s\n",
			err.msg);
		free(buf);
		return -EINVAL;
	}
	policy_unref(p);
	fwrite(buf, 1, len, out);
	free(buf);
	return n;
}

struct sug_ctx {
	struct suggest *s;
};

static int add_cb(const struct auditlog_rec *r, void *ctx)
{
	cli_suggest_add(((struct sug_ctx *)ctx)->s, r);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: sluice policy suggest [--sandbox NAME] [--since TIME] "
			"[--wildcards N] AUDIT_LOG...\n"
			"  TIME: an RFC 3339 time (2026-12-01T21:00:00Z) or a duration back "
			"from now (90s, 30m, 1h30m, 2d)\n");
	return 2;
}

int cmd_policy_suggest(int argc, char **argv)
{
	struct auditlog_filter flt = { .since_ms = INT64_MIN };
	struct auditlog_stats st = { 0 };
	struct sug_ctx ctx = { 0 };
	unsigned wildcards = 0;
	struct timespec now;
	int i, ret = 1, nfiles = 0;

	clock_gettime(CLOCK_REALTIME, &now);
	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--sandbox") && i + 1 < argc) {
			flt.sandbox = argv[++i];
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
		} else if (!strcmp(argv[i], "--wildcards") && i + 1 < argc) {
			char *end;
			unsigned long v = strtoul(argv[++i], &end, 10);

			if (!*argv[i] || *end || v < 2 || v > 1000000) {
				fprintf(stderr,
					"sluice: --wildcards `%s`: a number of names, 2 or "
					"more\n",
					argv[i]);
				return 2;
			}
			wildcards = (unsigned)v;
		} else if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "sluice: policy suggest: unknown option `%s`\n", argv[i]);
			return usage();
		} else {
			break;
		}
	}
	if (i >= argc)
		return usage();
	ctx.s = cli_suggest_new();
	if (!ctx.s) {
		fprintf(stderr, "sluice: out of memory\n");
		return 1;
	}
	for (; i < argc; i++) {
		FILE *f = strcmp(argv[i], "-") ? fopen(argv[i], "re") : stdin;
		int r;

		if (!f) {
			fprintf(stderr, "sluice: %s: %s\n", argv[i], strerror(errno));
			goto out;
		}
		r = cli_auditlog_read(f, &flt, add_cb, &ctx, &st);
		if (f != stdin)
			fclose(f);
		if (r < 0) {
			fprintf(stderr, "sluice: %s: %s\n", argv[i], strerror(-r));
			goto out;
		}
		nfiles++;
	}
	if (st.skipped)
		fprintf(stderr, "sluice: skipped %llu of %llu lines: not audit lines\n",
			(unsigned long long)st.skipped, (unsigned long long)st.lines);
	if (flt.sandbox && !ctx.s->lines) {
		fprintf(stderr, "sluice: no audit line of sandbox `");
		cli_auditlog_put_safe(stderr, flt.sandbox, 128);
		fprintf(stderr, "` in the %d file%s given%s\n", nfiles, nfiles == 1 ? "" : "s",
			flt.since_ms != INT64_MIN ? " (since that time)" : "");
		goto out;
	}
	if (cli_suggest_print(ctx.s, wildcards, stdout) < 0)
		goto out;
	ret = 0;
out:
	cli_suggest_free(ctx.s);
	return ret;
}
