// SPDX-License-Identifier: MIT
/* Unit tests for the audit log: escaping, fields, bounds, files, failures,
 * threads. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "broker/audit.h"
#include "common/addr.h"
#include "common/err.h"
#include "common/json.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* --- a tiny, strict checker for the flat JSON objects audit writes ------- */

#define JMAX_FIELDS 40

struct jfield {
	char key[32];
	const char *val; /* raw JSON text of the value, in the line */
	size_t vlen;
	bool is_str; /* val/vlen exclude the quotes */
};

/* The fields with a value in @f; every key, null ones too, in @keys (the
 * schema check, schema_ok()). */
struct jobj {
	struct jfield f[JMAX_FIELDS];
	unsigned n;
	char keys[JMAX_FIELDS][32];
	unsigned nkeys;
};

/* docs/audit.schema.json's keys, in the order every line has them. */
static const char *const schema_keys[] = {
	"time",	      "sandbox",    "proto",	  "name",	 "target",     "src_addr",
	"src_port",   "dst_addr",   "dst_port",	  "decision",	 "reason",     "mode",
	"rule",	      "credential", "method",	  "path",	 "status",     "dns_type",
	"dns_answer", "pid",	    "uid",	  "old_policy",	 "old_sha256", "new_policy",
	"new_sha256", "bytes_up",   "bytes_down", "duration_ms", "repeated",   "dropped",
};

/* Length of a valid UTF-8 sequence at @s (n bytes left), or 0. Written apart
 * from audit.c's decoder on purpose: it checks the code point. */
static size_t check_utf8(const unsigned char *s, size_t n)
{
	uint32_t cp;
	size_t len, i;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Parses one JSON string starting after its opening quote; returns the
 * index of the closing quote, or 0 when the string is malformed. */
static size_t parse_jstring(const char *s, size_t len, size_t i)
{
	while (i < len) {
		unsigned char c = (unsigned char)s[i];
		size_t k;

		if (c == '"')
			return i;
		if (c < 0x20)
			return 0;
		if (c == '\\') {
			if (i + 1 >= len)
				return 0;
			if (strchr("\"\\/bfnrt", s[i + 1]) && s[i + 1]) {
				i += 2;
				continue;
			}
			if (s[i + 1] != 'u' || i + 5 >= len)
				return 0;
			for (k = 2; k < 6; k++)
				if (!is_hex(s[i + k]))
					return 0;
			i += 6;
			continue;
		}
		k = check_utf8((const unsigned char *)s + i, len - i);
		if (!k)
			return 0;
		i += k;
	}
	return 0;
}

/* One line: '{' fields '}' '\n' and nothing else; unique keys. */
static bool parse_line(const char *s, size_t len, struct jobj *o)
{
	size_t i = 0, end, j;

	o->n = 0;
	o->nkeys = 0;
	if (len < 3 || s[0] != '{' || s[len - 1] != '\n' || s[len - 2] != '}')
		return false;
	len -= 1; /* drop the newline */
	i = 1;
	for (;;) {
		struct jfield *f;

		if (o->nkeys == JMAX_FIELDS || i >= len || s[i] != '"')
			return false;
		end = parse_jstring(s, len, i + 1);
		if (!end || end - i - 1 >= sizeof(o->f[0].key))
			return false;
		f = &o->f[o->n];
		memcpy(f->key, s + i + 1, end - i - 1);
		f->key[end - i - 1] = '\0';
		for (j = 0; j < o->nkeys; j++)
			if (!strcmp(o->keys[j], f->key))
				return false;
		memcpy(o->keys[o->nkeys++], f->key, sizeof(f->key));
		i = end + 1;
		if (i >= len || s[i] != ':')
			return false;
		i++;
		if (len - i >= 4 && !memcmp(s + i, "null", 4)) {
			/* In @keys, not in @f: jget() finds no value. */
			i += 4;
			if (i >= len)
				return false;
			if (s[i] == '}')
				return i + 1 == len;
			if (s[i] != ',')
				return false;
			i++;
			continue;
		}
		if (i < len && s[i] == '"') {
			end = parse_jstring(s, len, i + 1);
			if (!end)
				return false;
			f->val = s + i + 1;
			f->vlen = end - i - 1;
			f->is_str = true;
			i = end + 1;
		} else {
			j = i;
			if (i < len && s[i] == '-')
				i++;
			while (i < len && s[i] >= '0' && s[i] <= '9')
				i++;
			if (i == j || (s[j] == '-' && i == j + 1))
				return false;
			f->val = s + j;
			f->vlen = i - j;
			f->is_str = false;
		}
		o->n++;
		if (i >= len)
			return false;
		if (s[i] == '}')
			return i + 1 == len;
		if (s[i] != ',')
			return false;
		i++;
	}
}

static const struct jfield *jget(const struct jobj *o, const char *key)
{
	unsigned i;

	for (i = 0; i < o->n; i++)
		if (!strcmp(o->f[i].key, key))
			return &o->f[i];
	return NULL;
}

/* The raw (still escaped) value of @key as a NUL-terminated copy. */
static const char *jstr(const struct jobj *o, const char *key)
{
	static char buf[AUDIT_LINE_MAX];
	const struct jfield *f = jget(o, key);

	if (!f)
		return NULL;
	memcpy(buf, f->val, f->vlen);
	buf[f->vlen] = '\0';
	return buf;
}

/* Does @o have every key of the schema, in its order, and no other? */
static bool schema_ok(const struct jobj *o)
{
	size_t i;

	if (o->nkeys != ARRAY_SIZE(schema_keys))
		return false;
	for (i = 0; i < ARRAY_SIZE(schema_keys); i++)
		if (strcmp(o->keys[i], schema_keys[i]))
			return false;
	return true;
}

static void format_and_parse(const struct audit_event *ev, char *line, struct jobj *o)
{
	int n = audit_format(ev, line, AUDIT_LINE_MAX);

	assert_true(n > 0);
	assert_true(n < AUDIT_LINE_MAX);
	assert_int_equal(strlen(line), (size_t)n);
	assert_true(parse_line(line, (size_t)n, o));
	if (!schema_ok(o))
		fail_msg("not the schema's keys: %s", line);
}

/* The checker itself must refuse what a broken writer would produce. */
static void test_checker_rejects(void **state)
{
	static const char *const bad[] = {
		"{\"a\":1}",		  /* no newline */
		"{\"a\":1\n",		  /* unbalanced */
		"{\"a\":\"x}\n",	  /* unterminated string */
		"{\"a\":\"\x01\"}\n",	  /* raw control byte */
		"{\"a\":\"\xff\"}\n",	  /* invalid UTF-8 */
		"{\"a\":\"\\x\"}\n",	  /* bad escape */
		"{\"a\":1,\"a\":2}\n",	  /* duplicate key */
		"{\"a\":1}{\"b\":2}\n",	  /* two objects on a line */
		"{\"a\":1}\n{\"b\":2}\n", /* two lines */
	};
	struct jobj o;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		assert_false(parse_line(bad[i], strlen(bad[i]), &o));
	{
		static const char good[] = "{\"a\":1,\"b\":\"\\u00e9\xc3\xa9\"}\n";

		assert_true(parse_line(good, strlen(good), &o));
		assert_false(schema_ok(&o));
	}
	assert_int_equal(o.n, 2);
}

/* --- escaping ------------------------------------------------------------ */

static void test_escape_table(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "api.github.com", "api.github.com" },
		{ "", "" },
		{ "a\"b", "a\\\"b" },
		{ "a\\b", "a\\\\b" },
		{ "\"\\", "\\\"\\\\" },
		{ "\n\t\r", "\\u000a\\u0009\\u000d" },
		{ "\x01\x1f", "\\u0001\\u001f" },
		{ "\x1b[31mred", "\\u001b[31mred" }, /* terminal escapes */
		{ "\x7f", "\\u007f" },
		{ "/ok/", "/ok/" },
		/* valid multi-byte UTF-8 is kept as it is */
		{ "caf\xc3\xa9", "caf\xc3\xa9" },
		{ "\xe2\x82\xac!", "\xe2\x82\xac!" },
		{ "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80" },
		{ "\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf" }, /* U+10FFFF */
		{ "\xed\x9f\xbf", "\xed\x9f\xbf" },	    /* U+D7FF */
		/* invalid UTF-8: one U+FFFD per maximal bad subpart */
		{ "\xff", "\\ufffd" },
		{ "a\x80z", "a\\ufffdz" },				/* lone continuation */
		{ "\xc3", "\\ufffd" },					/* cut at the end */
		{ "\xe2\x82x", "\\ufffdx" },				/* cut in the middle */
		{ "\xc0\xaf", "\\ufffd\\ufffd" },			/* overlong '/' */
		{ "\xe0\x80\xaf", "\\ufffd\\ufffd\\ufffd" },		/* overlong '/' */
		{ "\xed\xa0\x80", "\\ufffd\\ufffd\\ufffd" },		/* surrogate */
		{ "\xf4\x90\x80\x80", "\\ufffd\\ufffd\\ufffd\\ufffd" }, /* > U+10FFFF */
		{ "\xf8\x88\x80\x80\x80", "\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd" },
		{ "\xc3\xa9\xff\xc3\xa9", "\xc3\xa9\\ufffd\xc3\xa9" },
		/* valid, but acting unseen: escaped */
		{ "\xc2\x9b[31m", "\\u009b[31m" },				 /* C1 CSI */
		{ "\xc2\x80\xc2\x9f\xc2\xa0", "\\u0080\\u009f\xc2\xa0" },	 /* C1 ends */
		{ "a\xe2\x80\xae-b", "a\\u202e-b" },				 /* RLO */
		{ "\xe2\x81\xa6\xe2\x81\xa9", "\\u2066\\u2069" },		 /* isolates */
		{ "\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c", "\\u200e\\u200f\\u061c" }, /* marks */
		{ "\xe2\x80\xa8\xe2\x80\xa9", "\\u2028\\u2029" },		 /* separators */
		{ "\xe2\x80\xa7\xe2\x80\xaf", "\xe2\x80\xa7\xe2\x80\xaf" }, /* neighbours kept */
		{ "\xe2\x81\xa5\xe2\x81\xaa", "\xe2\x81\xa5\xe2\x81\xaa" },
	};
	char out[256];
	size_t i, n;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		n = sl_json_escape(out, sizeof(out), cases[i].in, strlen(cases[i].in));
		if (strcmp(out, cases[i].out))
			fail_msg("case %zu: got `%s`, want `%s`", i, out, cases[i].out);
		assert_int_equal(n, strlen(cases[i].out));
	}
}

/* The bound is in escaped bytes, and never splits an escape or a character. */
static void test_escape_bound(void **state)
{
	char out[16];

	(void)state;
	memset(out, 'X', sizeof(out));
	assert_int_equal(sl_json_escape(out, 5, "abc\"def", strlen("abc\"def")), 3);
	assert_string_equal(out, "abc");
	assert_int_equal(out[4], 'X'); /* nothing past the bound */
	assert_int_equal(sl_json_escape(out, 6, "abc\"def", strlen("abc\"def")), 5);
	assert_string_equal(out, "abc\\\"");
	assert_int_equal(sl_json_escape(out, 5, "ab\xe2\x82\xac", strlen("ab\xe2\x82\xac")), 2);
	assert_string_equal(out, "ab");
	assert_int_equal(sl_json_escape(out, 6, "ab\xe2\x82\xac", strlen("ab\xe2\x82\xac")), 5);
	assert_string_equal(out, "ab\xe2\x82\xac");
	assert_int_equal(sl_json_escape(out, 6, "\x01\x02", strlen("\x01\x02")), 0);
	assert_string_equal(out, "");
	assert_int_equal(sl_json_escape(out, 7, "\x01\x02", strlen("\x01\x02")), 6);
	assert_string_equal(out, "\\u0001");
	assert_int_equal(sl_json_escape(out, 12, "\xff", strlen("\xff")), 6);
	assert_string_equal(out, "\\ufffd");
	assert_int_equal(sl_json_escape(out, 6, "\xff", strlen("\xff")), 0);
	assert_int_equal(sl_json_escape(out, 1, "abc", strlen("abc")), 0);
	assert_string_equal(out, "");
	out[0] = 'X';
	assert_int_equal(sl_json_escape(out, 0, "abc", strlen("abc")), 0);
	assert_int_equal(out[0], 'X');
	/* A sequence's lead byte last of @src, which has no terminator: no
	 * byte past @srclen is read (an ASan build sees any), and the cut
	 * sequence is one U+FFFD. Also when the bytes past @srclen would
	 * complete it. */
	{
		char *cut = malloc(2);

		assert_non_null(cut);
		memcpy(cut, "a\xf0", 2);
		assert_int_equal(sl_json_escape(out, sizeof(out), cut, 2), 7);
		assert_string_equal(out, "a\\ufffd");
		free(cut);
	}
	assert_int_equal(sl_json_escape(out, sizeof(out), "a\xe2\x82\xac", 2), 7);
	assert_string_equal(out, "a\\ufffd");
}

/* For random strings of printable runs, quotes, control bytes and whole,
 * cut and invalid UTF-8, and every bound: what comes out is the whole escape
 * of some prefix of the input (never a split escape or character), as long
 * as fits, and nothing is written past the bound. */
static void test_escape_bound_random(void **state)
{
	static const char *const pieces[] = {
		"abc",	    "x",    "\"",	"\\",		"\n",
		"\x01",	    "\x7f", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
		"\xe2\x82", "\xff", "\x80",	"/path?q=1 "
	};
	uint32_t seed = 12345;
	char in[80], full[6 * sizeof(in)], prefix[6 * sizeof(in)], out[6 * sizeof(in) + 1];
	size_t round, n, fl, bound, got, k;

	(void)state;
	for (round = 0; round < 300; round++) {
		n = 0;
		for (;;) {
			const char *p;

			seed = seed * 1664525u + 1013904223u;
			p = pieces[(seed >> 16) % ARRAY_SIZE(pieces)];
			if (n + strlen(p) >= sizeof(in))
				break;
			memcpy(in + n, p, strlen(p));
			n += strlen(p);
		}
		in[n] = '\0';
		fl = sl_json_escape(full, sizeof(full), in, n);
		assert_int_equal(fl, strlen(full));
		for (bound = 1; bound <= fl + 1; bound++) {
			bool whole = false;

			memset(out, 'X', sizeof(out));
			got = sl_json_escape(out, bound, in, n);
			assert_true(got < bound);
			assert_int_equal(got, strlen(out));
			assert_int_equal(out[bound], 'X');
			/* as long as fits: no piece is longer than 6 bytes */
			assert_true(got + 6 >= bound - 1 || got == fl);
			for (k = 0; k <= n && !whole; k++)
				whole = sl_json_escape(prefix, sizeof(prefix), in, k) == got &&
					memcmp(prefix, out, got) == 0;
			if (!whole)
				fail_msg("round %zu bound %zu: `%s` is no prefix's whole escape",
					 round, bound, out);
		}
	}
}

/* --- fields ----------------------------------------------------------------
 */

static void test_full_line(void **state)
{
	char line[AUDIT_LINE_MAX];
	struct sl_addr a;
	struct jobj o;
	struct audit_event ev = {
		.sandbox = "s1",
		.proto = "http",
		.name = "api.github.com",
		.target = "api.github.com:443",
		.src_addr = &a,
		.src_port = 40000,
		.dst_addr = &a,
		.dst_port = 443,
		.decision = "allow",
		.reason = "allowed",
		.rule = "host api.github.com",
		.credential = "github",
		.method = "GET",
		.path = "/repos/acme/x",
		.status = 200,
		.bytes_up = 123,
		.bytes_down = 4567,
		.duration_ms = 12,
	};
	static const char *const order[] = {
		"time",	    "sandbox",	"proto",      "name",	     "target",
		"src_addr", "src_port", "dst_addr",   "dst_port",    "decision",
		"reason",   "rule",	"credential", "method",	     "path",
		"status",   "bytes_up", "bytes_down", "duration_ms",
	};
	const char *t;
	size_t i;

	(void)state;
	addr_from_v4(&a, 0x8c527005); /* 140.82.112.5 */
	format_and_parse(&ev, line, &o);
	assert_int_equal(o.n, ARRAY_SIZE(order));
	for (i = 0; i < ARRAY_SIZE(order); i++)
		assert_string_equal(o.f[i].key, order[i]);
	assert_string_equal(jstr(&o, "sandbox"), "s1");
	assert_string_equal(jstr(&o, "dst_addr"), "140.82.112.5");
	assert_string_equal(jstr(&o, "dst_port"), "443");
	assert_false(jget(&o, "dst_port")->is_str);
	assert_string_equal(jstr(&o, "src_port"), "40000");
	assert_false(jget(&o, "src_port")->is_str);
	assert_string_equal(jstr(&o, "target"), "api.github.com:443");
	assert_string_equal(jstr(&o, "credential"), "github");
	assert_string_equal(jstr(&o, "status"), "200");
	assert_string_equal(jstr(&o, "bytes_up"), "123");
	assert_string_equal(jstr(&o, "bytes_down"), "4567");
	assert_string_equal(jstr(&o, "duration_ms"), "12");
	/* 2026-11-30T04:05:06.123Z */
	t = jstr(&o, "time");
	assert_int_equal(strlen(t), 24);
	assert_true(t[4] == '-' && t[7] == '-' && t[10] == 'T' && t[13] == ':' && t[16] == ':' &&
		    t[19] == '.' && t[23] == 'Z');
	assert_true(!strncmp(t, "20", 2));
}

/* Numbers at their bounds, and the time as gmtime() has it (the part up to
 * the second is kept per thread: it must follow the clock). */
static void test_numbers_and_time(void **state)
{
	char line[AUDIT_LINE_MAX], want0[32], want1[32];
	struct audit_event ev = { .sandbox = "s1",
				  .proto = "http",
				  .decision = "allow",
				  .reason = "allowed",
				  .status = 204,
				  .bytes_up = 0,
				  .bytes_down = UINT64_MAX,
				  .duration_ms = 10 };
	struct timespec t0, t1;
	struct tm tm;
	const char *tv;
	struct jobj o;
	int i, n;

	(void)state;
	for (i = 0; i < 3; i++) {
		clock_gettime(CLOCK_REALTIME, &t0);
		n = audit_format(&ev, line, sizeof(line));
		clock_gettime(CLOCK_REALTIME, &t1);
		assert_true(n > 0);
		assert_true(parse_line(line, (size_t)n, &o));
		assert_string_equal(jstr(&o, "status"), "204");
		assert_string_equal(jstr(&o, "bytes_up"), "0");
		assert_string_equal(jstr(&o, "bytes_down"), "18446744073709551615");
		assert_string_equal(jstr(&o, "duration_ms"), "10");
		gmtime_r(&t0.tv_sec, &tm);
		strftime(want0, sizeof(want0), "%Y-%m-%dT%H:%M:%S.", &tm);
		gmtime_r(&t1.tv_sec, &tm);
		strftime(want1, sizeof(want1), "%Y-%m-%dT%H:%M:%S.", &tm);
		tv = jstr(&o, "time");
		assert_true(!strncmp(tv, want0, 20) || !strncmp(tv, want1, 20));
		usleep(600 * 1000); /* into the next second, at least once */
	}
}

static void test_omitted_fields(void **state)
{
	char line[AUDIT_LINE_MAX];
	struct jobj o;
	struct audit_event dns = {
		.sandbox = "s1",
		.proto = "dns",
		.name = "evil.example",
		.decision = "deny",
		.reason = "not-allowlisted",
		.dns_type = "A",
	};
	struct audit_event tcp = {
		.proto = "tcp",
		.decision = "deny",
		.reason = "denied-range",
	};
	struct audit_event empty = { 0 };

	(void)state;
	format_and_parse(&dns, line, &o);
	assert_int_equal(o.n, 7);
	assert_string_equal(o.f[0].key, "time");
	assert_string_equal(jstr(&o, "dns_type"), "A");
	assert_null(jget(&o, "dst_addr"));
	assert_null(jget(&o, "dst_port"));
	assert_null(jget(&o, "target"));
	assert_null(jget(&o, "rule"));
	assert_null(jget(&o, "credential"));
	assert_null(jget(&o, "status"));
	/* DNS is not a connection: no zero byte counts */
	assert_null(jget(&o, "bytes_up"));
	assert_null(jget(&o, "duration_ms"));

	/* A connection always says how much it moved, even nothing. */
	format_and_parse(&tcp, line, &o);
	assert_int_equal(o.n, 7);
	assert_string_equal(jstr(&o, "bytes_up"), "0");
	assert_string_equal(jstr(&o, "bytes_down"), "0");
	assert_string_equal(jstr(&o, "duration_ms"), "0");
	assert_null(jget(&o, "sandbox"));

	/* Nothing given: every key still there, null but the time (the
	 * schema then refuses the line: a decision and a reason are required
	 * strings, so a caller that forgot them is caught by the suite). */
	format_and_parse(&empty, line, &o);
	assert_int_equal(o.n, 1);
	assert_null(jget(&o, "decision"));
	assert_null(jget(&o, "reason"));
}

static void test_path_drops_query(void **state)
{
	char line[AUDIT_LINE_MAX];
	struct jobj o;
	struct audit_event ev = {
		.proto = "http",
		.decision = "deny",
		.reason = "placeholder-out-of-scope",
		.method = "GET",
		.path = "/x/y?token=SLUICE_PLACEHOLDER_abc#f",
	};

	(void)state;
	format_and_parse(&ev, line, &o);
	assert_string_equal(jstr(&o, "path"), "/x/y");
	assert_null(strstr(line, "SLUICE_PLACEHOLDER"));
	ev.path = "/frag#SLUICE_PLACEHOLDER_abc";
	format_and_parse(&ev, line, &o);
	assert_string_equal(jstr(&o, "path"), "/frag");
	assert_null(strstr(line, "SLUICE_PLACEHOLDER"));
	ev.path = "?only";
	format_and_parse(&ev, line, &o);
	assert_string_equal(jstr(&o, "path"), "");
}

/* "target" is the raw target, but never a query string, a fragment or a
 * URL's userinfo: those can carry a placeholder or a password. */
static void test_target_redacted(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "http://2852039166/", "http://2852039166/" },
		{ "http://0x7f000001/x", "http://0x7f000001/x" },
		{ "127.1:443", "127.1:443" },
		{ "http://a.test/p?token=SLUICE_PLACEHOLDER_x", "http://a.test/p" },
		{ "http://a.test/p#SLUICE_PLACEHOLDER_x", "http://a.test/p" },
		{ "http://user:SLUICE_PLACEHOLDER_x@a.test/p", "http://***@a.test/p" },
		{ "http://u:p@127.1@a.test", "http://***@a.test" },
		{ "u:pw@a.test:443", "***@a.test:443" },
		{ "/path/with@at", "/path/with@at" },
		{ "http://a.test/x@y", "http://a.test/x@y" },
		{ "@", "***@" },
		{ "", "" },
		/* A '?' or '#' inside the userinfo does not end it: the cut at
		 * the query string comes after the userinfo is gone. */
		{ "http://user:pa?ss@a.test/p", "http://***@a.test/p" },
		{ "http://user:pa#ss@a.test/p", "http://***@a.test/p" },
		{ "u:pa?ss@a.test:443", "***@a.test:443" },
		/* A placeholder anywhere else (a Host header, an SNI, a CONNECT
		 * authority, a path) is masked. */
		{ "sluice-ph-0123456789abcdef0123456789abcdef.a.test:443",
		  "sluice-ph-***.a.test:443" },
		{ "http://a.test/sluice-ph-0123456789abcdef0123456789abcdef/x",
		  "http://a.test/sluice-ph-***/x" },
	};
	char line[AUDIT_LINE_MAX];
	struct jobj o;
	struct audit_event ev = {
		.proto = "http",
		.decision = "deny",
		.reason = "address-literal",
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		ev.target = cases[i].in;
		format_and_parse(&ev, line, &o);
		assert_non_null(jget(&o, "target"));
		assert_true(jget(&o, "target")->is_str);
		assert_string_equal(jstr(&o, "target"), cases[i].out);
		assert_null(strstr(line, "SLUICE_PLACEHOLDER"));
		assert_null(strstr(line, "ss@"));
		assert_null(strstr(line, "0123456789abcdef"));
	}
	/* A userinfo longer than the field's bound: none of it is kept. */
	{
		char t[AUDIT_FIELD_MAX + 64];

		snprintf(t, sizeof(t), "http://u:");
		memset(t + 9, 's', AUDIT_FIELD_MAX);
		snprintf(t + 9 + AUDIT_FIELD_MAX, sizeof(t) - 9 - AUDIT_FIELD_MAX, "@a.test/");
		ev.target = t;
		format_and_parse(&ev, line, &o);
		assert_string_equal(jstr(&o, "target"), "http://***@a.test/");
	}
	/* A long target is cut at the field's bound, wherever its "://" and
	 * "@" fall (a scheme cut in two is no scheme): the line stays whole. */
	for (i = AUDIT_FIELD_MAX - 8; i <= AUDIT_FIELD_MAX + 4; i++) {
		char t[AUDIT_FIELD_MAX + 64];

		memset(t, 'a', i);
		snprintf(t + i, sizeof(t) - i, "://u:p@h.test/x");
		ev.target = t;
		format_and_parse(&ev, line, &o);
		assert_true(jget(&o, "target")->vlen <= AUDIT_FIELD_MAX);
		assert_null(strstr(line, "u:p@"));
	}
}

static void test_hostile_strings_escaped(void **state)
{
	char line[AUDIT_LINE_MAX];
	struct jobj o;
	struct audit_event ev = {
		.proto = "tls",
		.decision = "deny",
		.reason = "sni-mismatch",
		.name = "a\",\"decision\":\"allow\n\xff\xfe",
	};

	(void)state;
	format_and_parse(&ev, line, &o);
	/* the forged key stayed inside the name */
	assert_string_equal(jstr(&o, "decision"), "deny");
	assert_string_equal(jstr(&o, "name"),
			    "a\\\",\\\"decision\\\":\\\"allow\\u000a\\ufffd\\ufffd");
	assert_int_equal(strchr(line, '\n') - line, (long)strlen(line) - 1);
}

/* Every field at its worst: the line stays short, whole and parseable. */
/* A control socket caller: pid and uid, as numbers, after the rest. */
static void test_control_peer(void **state)
{
	char line[AUDIT_LINE_MAX];
	struct jobj o;
	struct audit_event ev = {
		.sandbox = "s1",
		.proto = "control",
		.name = "unregister",
		.decision = "deny",
		.reason = "control-refused",
		.has_peer = true,
		.peer_pid = 4242,
		.peer_uid = 0,
	};
	static const char *const order[] = {
		"time", "sandbox", "proto", "name", "decision", "reason", "pid", "uid",
	}; /* with a value; the rest are null */
	size_t i;

	(void)state;
	format_and_parse(&ev, line, &o);
	assert_int_equal(o.n, ARRAY_SIZE(order));
	for (i = 0; i < ARRAY_SIZE(order); i++)
		assert_string_equal(o.f[i].key, order[i]);
	assert_string_equal(jstr(&o, "pid"), "4242");
	assert_false(jget(&o, "pid")->is_str);
	assert_string_equal(jstr(&o, "uid"), "0");
	assert_false(jget(&o, "uid")->is_str);
	/* Without a caller, both null (uid 0 is a value, not "none"). */
	ev.has_peer = false;
	format_and_parse(&ev, line, &o);
	assert_null(jget(&o, "pid"));
	assert_null(jget(&o, "uid"));
}

static void test_truncation_bound(void **state)
{
	static const char fill[] = { '"', '\x01', '\xff', 'a' };
	char line[AUDIT_LINE_MAX], *big;
	struct sl_addr a;
	struct jobj o;
	size_t i, k;

	(void)state;
	big = malloc(20001);
	assert_non_null(big);
	assert_int_equal(addr_parse("2001:db8:1234:5678:9abc:def0:1234:5678", &a), 0);
	for (k = 0; k < ARRAY_SIZE(fill); k++) {
		struct audit_event ev = {
			.sandbox = big,
			.proto = big,
			.name = big,
			.target = big,
			.src_addr = &a,
			.src_port = 65535,
			.dst_addr = &a,
			.dst_port = 65535,
			.decision = big,
			.reason = big,
			.rule = big,
			.credential = big,
			.method = big,
			.path = big,
			.dns_type = big,
			.dns_answer = big,
			.status = -2147483647 - 1,
			.bytes_up = UINT64_MAX,
			.bytes_down = UINT64_MAX,
			.duration_ms = UINT64_MAX,
			.has_peer = true,
			.peer_pid = UINT32_MAX,
			.peer_uid = UINT32_MAX,
			.old_policy = big,
			.old_sha256 = big,
			.new_policy = big,
			.new_sha256 = big,
			.mode = big,
		};

		memset(big, fill[k], 20000);
		big[20000] = '\0';
		format_and_parse(&ev, line, &o);
		/* every key but the counts ("repeated", "dropped") */
		assert_int_equal(o.n, ARRAY_SIZE(schema_keys) - 2);
		for (i = 0; i < o.n; i++)
			assert_true(o.f[i].vlen <= AUDIT_FIELD_MAX);
		assert_true(jget(&o, "name")->vlen > AUDIT_FIELD_MAX - 6);
		assert_true(jget(&o, "target")->vlen > AUDIT_FIELD_MAX - 6);
		assert_string_equal(jstr(&o, "bytes_up"), "18446744073709551615");
		assert_string_equal(jstr(&o, "status"), "-2147483648");
	}
	free(big);
	/* a caller's buffer that could not hold the worst line is refused */
	{
		struct audit_event ev = { .decision = "allow", .reason = "allowed" };

		assert_int_equal(audit_format(&ev, line, AUDIT_LINE_MAX - 1), -ENOSPC);
	}
}

/* --- writing ----------------------------------------------------------------
 */

static char tmpdir[] = "/tmp/sluice-test-audit-XXXXXX";

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Splits @buf into lines (each kept with its '\n'), calling @fn on each.
 * Returns the number of lines; a trailing piece without '\n' fails. */
static size_t for_each_line(const char *buf, size_t len, void (*fn)(const char *, size_t, void *),
			    void *arg)
{
	size_t i = 0, n = 0;

	while (i < len) {
		const char *nl = memchr(buf + i, '\n', len - i);

		assert_non_null(nl);
		fn(buf + i, (size_t)(nl - buf) - i + 1, arg);
		i = (size_t)(nl - buf) + 1;
		n++;
	}
	return n;
}

static void check_line(const char *s, size_t len, void *arg)
{
	struct jobj o;
	static const char *const keys[] = {
		"time",	    "sandbox", "proto",	   "name",	 "dst_port",
		"decision", "reason",  "bytes_up", "bytes_down", "duration_ms",
	};
	size_t i;

	(void)arg;
	if (!parse_line(s, len, &o) || !schema_ok(&o))
		fail_msg("malformed line: %.*s", (int)len, s);
	for (i = 0; i < ARRAY_SIZE(keys); i++)
		if (!jget(&o, keys[i]))
			fail_msg("key `%s` missing: %.*s", keys[i], (int)len, s);
}

static int setup_dir(void **state)
{
	(void)state;
	umask(022);
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
	char cmd[128];

	(void)state;
	audit_close();
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_write_file_and_parse_back(void **state)
{
	char path[256], *buf;
	struct stat st;
	size_t len;
	struct audit_event ev = {
		.sandbox = "s1",
		.proto = "connect",
		.name = "api.github.com",
		.dst_port = 443,
		.decision = "allow",
		.reason = "allowed",
		.bytes_up = 10,
		.bytes_down = 20,
		.duration_ms = 3,
	};

	(void)state;
	snprintf(path, sizeof(path), "%s/audit.log", tmpdir);
	assert_int_equal(audit_open(path, NULL), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	audit_log(&ev);
	ev.decision = "deny";
	ev.reason = "not-allowlisted";
	audit_log(&ev);
	buf = slurp(path, &len);
	assert_int_equal(for_each_line(buf, len, check_line, NULL), 2);
	assert_non_null(strstr(buf, "\"decision\":\"allow\",\"reason\":\"allowed\""));
	assert_non_null(strstr(buf, "\"decision\":\"deny\",\"reason\":\"not-allowlisted\""));
	free(buf);

	/* O_APPEND: a second open adds, never truncates (another refusal:
	 * the same one again would be folded into a count) */
	assert_int_equal(audit_open(path, NULL), 0);
	ev.name = "uploads.github.com";
	audit_log(&ev);
	buf = slurp(path, &len);
	assert_int_equal(for_each_line(buf, len, check_line, NULL), 3);
	free(buf);
}

static void test_open_error(void **state)
{
	struct sl_err err = { 0 };
	char path[256], want[400];

	(void)state;
	snprintf(path, sizeof(path), "%s/no/such/dir/audit.log", tmpdir);
	assert_int_equal(audit_open(path, &err), -ENOENT);
	snprintf(want, sizeof(want), "audit_log `%s`: cannot open: %s", path, strerror(ENOENT));
	assert_string_equal(sl_err_msg(&err), want);
	assert_int_equal(sl_err_errno(&err), ENOENT);
	assert_int_equal(audit_open("", &err), -EINVAL);
	assert_string_equal(sl_err_msg(&err), "audit_log ``: empty target: Invalid argument");
	/* The caller that does not want the message */
	assert_int_equal(audit_open(path, NULL), -ENOENT);
}

static void test_reopen_after_rotation(void **state)
{
	char path[256], rotated[256], *buf;
	size_t len;
	struct audit_event ev = {
		.proto = "dns", .decision = "allow", .reason = "allowed", .name = "before"
	};

	(void)state;
	snprintf(path, sizeof(path), "%s/rot.log", tmpdir);
	snprintf(rotated, sizeof(rotated), "%s/rot.log.1", tmpdir);
	assert_int_equal(audit_open(path, NULL), 0);
	audit_log(&ev);
	assert_int_equal(rename(path, rotated), 0);
	assert_int_equal(audit_reopen(), 0);
	ev.name = "after";
	audit_log(&ev);

	buf = slurp(rotated, &len);
	assert_non_null(strstr(buf, "\"name\":\"before\""));
	assert_null(strstr(buf, "\"name\":\"after\""));
	free(buf);
	buf = slurp(path, &len);
	assert_non_null(strstr(buf, "\"name\":\"after\""));
	assert_null(strstr(buf, "\"name\":\"before\""));
	free(buf);
}

/* A full disk: counted, and audit_log() comes back. */
static void test_write_failure_counted(void **state)
{
	uint64_t before;
	struct audit_event ev = { .proto = "tcp", .decision = "allow", .reason = "allowed" };

	(void)state;
	assert_int_equal(audit_open("/dev/full", NULL), 0);
	before = audit_write_failures();
	audit_log(&ev);
	assert_int_equal(audit_write_failures(), before + 1);
	audit_log(&ev);
	audit_log(&ev);
	assert_int_equal(audit_write_failures(), before + 3);
}

/*
 * stderr is a pipe nobody reads (a stuck log collector): audit_log() must
 * neither block nor fail the caller. If it blocked, SIGALRM would kill the
 * test.
 */
static void test_stderr_pipe_full_never_blocks(void **state)
{
	char buf[AUDIT_LINE_MAX + 1], junk[4096];
	int p[2], saved, wfd;
	uint64_t before;
	ssize_t n;
	unsigned i;
	struct audit_event ev = {
		.proto = "dns", .decision = "deny", .reason = "not-allowlisted", .name = "x.example"
	};

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_int_equal(dup2(p[1], STDERR_FILENO), STDERR_FILENO);

	/* A line goes through while there is room. */
	assert_int_equal(audit_open("-", NULL), 0);
	audit_log(&ev);
	n = read(p[0], buf, sizeof(buf) - 1);

	/* Fill the pipe through a non-blocking descriptor of our own. */
	snprintf(junk, sizeof(junk), "/proc/self/fd/%d", p[1]);
	wfd = open(junk, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	memset(junk, 'j', sizeof(junk));
	for (i = 0; wfd >= 0 && i < 100000; i++)
		if (write(wfd, junk, sizeof(junk)) < 0)
			break;
	for (i = 0; wfd >= 0 && i < 100000; i++)
		if (write(wfd, junk, 1) < 0)
			break;
	before = audit_write_failures();
	ev.reason = "port-not-allowed"; /* a new kind: not folded */
	alarm(10);
	audit_log(&ev);
	alarm(0);

	/* stderr back before asserting, so that cmocka can report */
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(p[1]);
	assert_true(wfd >= 0);
	close(wfd);
	close(p[0]);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_non_null(strstr(buf, "\"name\":\"x.example\""));
	assert_int_equal(buf[n - 1], '\n');
	assert_int_equal(audit_write_failures(), before + 1);
}

/* The same with stderr a stream socket, as under systemd (journald). */
static void test_stderr_socket_full_never_blocks(void **state)
{
	char buf[AUDIT_LINE_MAX + 1], junk[4096];
	int sv[2], saved;
	uint64_t before;
	ssize_t n;
	unsigned i;
	struct audit_event ev = {
		.proto = "dns", .decision = "deny", .reason = "not-allowlisted", .name = "y.example"
	};

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_int_equal(dup2(sv[1], STDERR_FILENO), STDERR_FILENO);

	assert_int_equal(audit_open("-", NULL), 0);
	audit_log(&ev);
	n = recv(sv[0], buf, sizeof(buf) - 1, MSG_DONTWAIT);

	memset(junk, 'j', sizeof(junk));
	for (i = 0; i < 100000; i++)
		if (send(sv[1], junk, sizeof(junk), MSG_DONTWAIT) < 0)
			break;
	for (i = 0; i < 100000; i++)
		if (send(sv[1], junk, 1, MSG_DONTWAIT) < 0)
			break;
	before = audit_write_failures();
	ev.reason = "port-not-allowed"; /* a new kind: not folded */
	alarm(10);
	audit_log(&ev);
	alarm(0);

	dup2(saved, STDERR_FILENO);
	close(saved);
	close(sv[1]);
	close(sv[0]);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_non_null(strstr(buf, "\"name\":\"y.example\""));
	assert_int_equal(buf[n - 1], '\n');
	assert_int_equal(audit_write_failures(), before + 1);
}

/* --- threads ----------------------------------------------------------------
 */

#define NTHREADS 4
#define NLINES 10000

struct writer {
	unsigned id;
	const char *path;
	bool defer; /* as a proxy worker: audit_defer(), flushed at times */
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	char name[64];
	unsigned i;
	struct audit_event ev = {
		.proto = "http",
		.decision = "allow",
		.reason = "allowed",
		.dst_port = 443,
		.method = "POST",
		.path = w->path,
		.sandbox = "sbx",
	};

	audit_defer(w->defer);
	for (i = 0; i < NLINES; i++) {
		if (w->defer && i % 64 == 0)
			audit_flush(); /* a loop iteration ends */
		/* "tN-SEQ" plus hostile bytes, so escaping runs concurrently */
		snprintf(name, sizeof(name), "t%u-%u\"\xff", w->id, i);
		ev.name = name;
		ev.bytes_up = i;
		audit_log(&ev);
	}
	audit_defer(false); /* writes what it held */
	return NULL;
}

struct tally {
	unsigned char seen[NTHREADS][NLINES];
	unsigned dup;
};

static void tally_line(const char *s, size_t len, void *arg)
{
	struct tally *t = arg;
	unsigned id, seq;
	struct jobj o;
	const char *name;

	check_line(s, len, NULL);
	assert_true(parse_line(s, len, &o));
	name = jstr(&o, "name");
	assert_int_equal(sscanf(name, "t%u-%u", &id, &seq), 2);
	assert_true(id < NTHREADS && seq < NLINES);
	assert_non_null(strstr(name, "\\\"\\ufffd"));
	if (t->seen[id][seq]++)
		t->dup++;
}

static void test_threads_lines_whole(void **state)
{
	char path[256], *buf, *reqpath;
	pthread_t th[NTHREADS];
	struct writer w[NTHREADS];
	struct tally *t;
	uint64_t before;
	size_t len, i, j;

	(void)state;
	/* Long lines (about 1.2 KiB) make any interleaving show. */
	reqpath = malloc(1024);
	assert_non_null(reqpath);
	reqpath[0] = '/';
	memset(reqpath + 1, 'p', 1022);
	reqpath[1023] = '\0';

	snprintf(path, sizeof(path), "%s/threads.log", tmpdir);
	assert_int_equal(audit_open(path, NULL), 0);
	before = audit_write_failures();
	for (i = 0; i < NTHREADS; i++) {
		w[i].id = (unsigned)i;
		w[i].path = reqpath;
		w[i].defer = i % 2 == 1;
		assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
	}
	for (i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(audit_write_failures(), before);

	t = calloc(1, sizeof(*t));
	assert_non_null(t);
	buf = slurp(path, &len);
	assert_int_equal(for_each_line(buf, len, tally_line, t), NTHREADS * NLINES);
	assert_int_equal(t->dup, 0);
	for (i = 0; i < NTHREADS; i++)
		for (j = 0; j < NLINES; j++)
			assert_int_equal(t->seen[i][j], 1);
	free(buf);
	free(t);
	free(reqpath);
}

/* After audit_close(), lines are dropped, counted, and nothing breaks. */
static void test_closed_counts(void **state)
{
	struct audit_event ev = { .decision = "error", .reason = "internal" };
	uint64_t before;

	(void)state;
	audit_close();
	before = audit_write_failures();
	audit_log(&ev);
	assert_int_equal(audit_write_failures(), before + 1);
	assert_int_equal(audit_reopen(), 0); /* nothing to reopen */
	audit_close();			     /* twice is fine */
}

/* --- refusals: folded per kind, bounded per source ---------------------------
 */

static uint64_t fake_ms;

static uint64_t fake_now(void)
{
	return fake_ms;
}

/* Opens a new file under tmpdir for one case, with the fake clock at 0 and
 * no source remembered. */
static void fold_open(char *path, size_t len, const char *what)
{
	static unsigned n;

	snprintf(path, len, "%s/fold-%u.log", tmpdir, n++);
	assert_int_equal(audit_open(path, NULL), 0);
	fake_ms = 0;
	audit_set_clock(fake_now);
	(void)what;
}

/* "SANDBOX DECISION REASON NAME[:PORT][@ADDR][(TYPE)][=ANSWER][ r=N][ d=N]",
 * '-' for absent. */
static void compact(const char *line, size_t len, char *out, size_t outlen)
{
	char f[8][AUDIT_LINE_MAX];
	static const char *const keys[] = { "sandbox",	"decision", "reason",	"name",
					    "dst_port", "src_addr", "dns_type", "dns_answer" };
	struct jobj o;
	size_t i;
	int n;

	if (!parse_line(line, len, &o) || !schema_ok(&o))
		fail_msg("malformed line: %.*s", (int)len, line);
	for (i = 0; i < ARRAY_SIZE(keys); i++)
		snprintf(f[i], sizeof(f[i]), "%s", jget(&o, keys[i]) ? jstr(&o, keys[i]) : "");
	if (!f[4][0] && jget(&o, "src_port"))
		snprintf(f[4], sizeof(f[4]), "%s", jstr(&o, "src_port"));
	n = snprintf(out, outlen, "%s %s %s %s%s%s%s%s%s%s%s%s%s", f[0][0] ? f[0] : "-", f[1], f[2],
		     f[3][0] ? f[3] : "-", f[4][0] ? ":" : "", f[4], f[5][0] ? "@" : "", f[5],
		     f[6][0] ? "(" : "", f[6], f[6][0] ? ")" : "", f[7][0] ? "=" : "", f[7]);
	if (jget(&o, "repeated"))
		n += snprintf(out + n, outlen - (size_t)n, " r=%s", jstr(&o, "repeated"));
	if (jget(&o, "dropped"))
		snprintf(out + n, outlen - (size_t)n, " d=%s", jstr(&o, "dropped"));
	/* nothing that says "folded" may carry a number a line never had */
	if (jget(&o, "repeated") || jget(&o, "dropped"))
		assert_null(jget(&o, "bytes_up"));
}

#define MAX_LINES 8192

struct lines {
	char (*s)[700];
	size_t n;
};

static void collect(const char *line, size_t len, void *arg)
{
	struct lines *l = arg;

	assert_true(l->n < MAX_LINES);
	compact(line, len, l->s[l->n++], sizeof(l->s[0]));
}

/* Every line of @path, compacted. */
static void read_lines(const char *path, struct lines *l)
{
	size_t len;
	char *buf = slurp(path, &len);

	l->n = 0;
	for_each_line(buf, len, collect, l);
	free(buf);
}

struct step {
	uint64_t at; /* ms */
	char op;     /* 'e' an event; 't' audit_tick(); 'n' lines so far == port */
	const char *sb, *decision, *reason, *name;
	uint16_t port;
	const char *proto, *addr, *dns_type, *dns_answer;
};

struct fold_case {
	const char *what;
	struct step steps[12];
	const char *want[12]; /* after the steps and audit_close() */
};

#define E(t, sb, d, r, n) { t, 'e', sb, d, r, n, 0, "http", NULL }
#define DENY(t, sb, n) E(t, sb, "deny", "not-allowlisted", n)
#define TICK(t) { t, 't', NULL, NULL, NULL, NULL, 0, NULL, NULL }
#define LINES(t, k) { t, 'n', NULL, NULL, NULL, NULL, k, NULL, NULL }

#define LONG_NAME                                                      \
	"l123456789l123456789l123456789l123456789l123456789l123456789" \
	"l123456789l123456789l123456789l123456789l123456789l123456789" \
	"l123456789l123456789l123456789l123456789l123456789l123456789" \
	"l123456789l123456789l123456789l123456789l123456789l123456789" \
	"l123456789l123456789l123456789l123456789l123456789l123456789.x"

static const struct fold_case fold_cases[] = {
	{ "the first is written, repeats are counted until the kind changes",
	  { DENY(0, "s1", "a.x"), DENY(1, "s1", "a.x"), DENY(2, "s1", "a.x"), LINES(2, 1),
	    DENY(3, "s1", "b.x") },
	  { "s1 deny not-allowlisted a.x", "s1 deny not-allowlisted a.x r=2",
	    "s1 deny not-allowlisted b.x" } },
	{ "the count is written when the interval ends (audit_tick)",
	  { DENY(0, "s1", "a.x"), DENY(100, "s1", "a.x"), DENY(200, "s1", "a.x"), TICK(9999),
	    LINES(9999, 1), TICK(10000), LINES(10000, 2), DENY(10001, "s1", "a.x") },
	  { "s1 deny not-allowlisted a.x", "s1 deny not-allowlisted a.x r=2",
	    "s1 deny not-allowlisted a.x" } },
	{ "a repeat after the interval writes the count, then is a first",
	  { DENY(0, "s1", "a.x"), DENY(5000, "s1", "a.x"), LINES(5000, 1), DENY(10000, "s1", "a.x"),
	    LINES(10000, 3) },
	  { "s1 deny not-allowlisted a.x", "s1 deny not-allowlisted a.x r=1",
	    "s1 deny not-allowlisted a.x" } },
	{ "allowed decisions are never folded, nor end a run",
	  { E(0, "s1", "allow", "allowed", "a.x"), E(1, "s1", "allow", "allowed", "a.x"),
	    DENY(2, "s1", "a.x"), E(3, "s1", "allow", "allowed", "a.x"), DENY(4, "s1", "a.x"),
	    LINES(4, 4) },
	  { "s1 allow allowed a.x", "s1 allow allowed a.x", "s1 deny not-allowlisted a.x",
	    "s1 allow allowed a.x", "s1 deny not-allowlisted a.x r=1" } },
	{ "each sandbox has its own run",
	  { DENY(0, "s1", "a.x"), DENY(1, "s2", "a.x"), DENY(2, "s1", "a.x"), DENY(3, "s2", "a.x"),
	    LINES(3, 2) },
	  { "s1 deny not-allowlisted a.x", "s2 deny not-allowlisted a.x",
	    "s1 deny not-allowlisted a.x r=1", "s2 deny not-allowlisted a.x r=1" } },
	{ "another decision, reason, proto or port is another kind",
	  { DENY(0, "s1", "a.x"),
	    E(1, "s1", "error", "not-allowlisted", "a.x"),
	    E(2, "s1", "deny", "address-denied", "a.x"),
	    { 3, 'e', "s1", "deny", "address-denied", "a.x", 0, "tls", NULL },
	    { 4, 'e', "s1", "deny", "address-denied", "a.x", 443, "tls", NULL },
	    { 5, 'e', "s1", "deny", "address-denied", "a.x", 443, "tls", NULL } },
	  { "s1 deny not-allowlisted a.x", "s1 error not-allowlisted a.x",
	    "s1 deny address-denied a.x", "s1 deny address-denied a.x",
	    "s1 deny address-denied a.x:443", "s1 deny address-denied a.x:443 r=1" } },
	{ "without a sandbox, the address is the kind, not the client's port",
	  { { 0, 'e', NULL, "deny", "unknown-source", NULL, 1111, "tcp", "10.0.0.1" },
	    { 1, 'e', NULL, "deny", "unknown-source", NULL, 2222, "tcp", "10.0.0.1" },
	    { 2, 'e', NULL, "deny", "unknown-source", NULL, 3333, "tcp", "10.0.0.2" } },
	  { "- deny unknown-source -:1111@10.0.0.1", "- deny unknown-source -@10.0.0.1 r=1",
	    "- deny unknown-source -:3333@10.0.0.2" } },
	{ "a name too long to hold is never folded",
	  { DENY(0, "s1", LONG_NAME), DENY(1, "s1", LONG_NAME) },
	  { "s1 deny not-allowlisted " LONG_NAME, "s1 deny not-allowlisted " LONG_NAME } },
	{ "DNS: A and AAAA are one kind, another answer is another",
	  { { 0, 'e', "s1", "deny", "not-allowlisted", "t.x", 0, "dns", NULL, "A", "NXDOMAIN" },
	    { 1, 'e', "s1", "deny", "not-allowlisted", "t.x", 0, "dns", NULL, "AAAA", "NXDOMAIN" },
	    { 2, 'e', "s1", "deny", "not-allowlisted", "t.x", 0, "dns", NULL, "A", "REFUSED" } },
	  { "s1 deny not-allowlisted t.x(A)=NXDOMAIN", "s1 deny not-allowlisted t.x=NXDOMAIN r=1",
	    "s1 deny not-allowlisted t.x(A)=REFUSED" } },
	{ "a refusal seen once leaves no count",
	  { DENY(0, "s1", "a.x"), TICK(20000), DENY(20001, "s1", "b.x") },
	  { "s1 deny not-allowlisted a.x", "s1 deny not-allowlisted b.x" } },
};

static void test_fold_table(void **state)
{
	char path[256];
	struct lines got = { .s = calloc(MAX_LINES, sizeof(*got.s)) };
	size_t c, i;

	(void)state;
	assert_non_null(got.s);
	for (c = 0; c < ARRAY_SIZE(fold_cases); c++) {
		const struct fold_case *fc = &fold_cases[c];
		size_t nwant = 0;

		fold_open(path, sizeof(path), fc->what);
		for (i = 0; i < ARRAY_SIZE(fc->steps) && fc->steps[i].op; i++) {
			const struct step *st = &fc->steps[i];
			struct sl_addr a;
			struct audit_event ev = {
				.sandbox = st->sb,
				.proto = st->proto,
				.name = st->name,
				.dst_port = st->port,
				.decision = st->decision,
				.reason = st->reason,
				.dns_type = st->dns_type,
				.dns_answer = st->dns_answer,
			};

			fake_ms = 1000000 + st->at;
			if (st->op == 'e') {
				if (st->addr) {
					assert_int_equal(addr_parse(st->addr, &a), 0);
					ev.src_addr = &a;
					/* a client without a sandbox: its own port */
					ev.src_port = st->port;
					ev.dst_port = 0;
				}
				audit_log(&ev);
			} else if (st->op == 't') {
				audit_tick();
			} else {
				read_lines(path, &got);
				if (got.n != st->port)
					fail_msg("%s: step %zu: %zu lines, "
						 "wanted %u",
						 fc->what, i, got.n, st->port);
			}
		}
		audit_close();
		read_lines(path, &got);
		while (nwant < ARRAY_SIZE(fc->want) && fc->want[nwant])
			nwant++;
		for (i = 0; i < got.n || i < nwant; i++) {
			const char *w = i < nwant ? fc->want[i] : "(none)";
			const char *g = i < got.n ? got.s[i] : "(none)";

			if (strcmp(w, g))
				fail_msg("%s: line %zu: `%s`, wanted `%s`", fc->what, i + 1, g, w);
		}
	}
	free(got.s);
	audit_set_clock(NULL);
}

/* Over a sandbox's rate: dropped, counted on one line per interval; other
 * sandboxes and allowed decisions are not touched. */
static void test_rate_bound(void **state)
{
	char path[256], name[64];
	struct lines got = { .s = calloc(MAX_LINES, sizeof(*got.s)) };
	uint64_t dropped0 = audit_refusals_dropped();
	struct audit_event ev = { .sandbox = "s1",
				  .proto = "dns",
				  .decision = "deny",
				  .reason = "not-allowlisted",
				  .name = name };
	struct audit_event allow = { .sandbox = "s1",
				     .proto = "dns",
				     .decision = "allow",
				     .reason = "allowed",
				     .name = "ok.x" };
	unsigned i, n_first = 0, n_allow = 0, n_drop = 0, dropped = 0;

	(void)state;
	assert_non_null(got.s);
	fold_open(path, sizeof(path), "rate");
	fake_ms = 5000;
	/* 1000 refusals of 1000 names (no two of a kind), and 1000 allowed */
	for (i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "n%u.x", i);
		audit_log(&ev);
		audit_log(&allow);
	}
	/* another sandbox has its own bucket */
	ev.sandbox = "s2";
	audit_log(&ev);
	ev.sandbox = "s1";
	read_lines(path, &got);
	assert_int_equal(got.n, AUDIT_REFUSAL_BURST + 1000 + 1);
	assert_string_equal(got.s[0], "s1 deny not-allowlisted n0.x");
	assert_string_equal(got.s[got.n - 1], "s2 deny not-allowlisted n999.x");
	assert_int_equal(audit_refusals_dropped() - dropped0, 1000 - AUDIT_REFUSAL_BURST);

	/* the count comes when the interval since the first drop ends */
	fake_ms = 5000 + AUDIT_REPEAT_MS - 1;
	audit_tick();
	read_lines(path, &got);
	assert_int_equal(got.n, AUDIT_REFUSAL_BURST + 1000 + 1);
	fake_ms = 5000 + AUDIT_REPEAT_MS;
	audit_tick();
	read_lines(path, &got);
	assert_int_equal(got.n, AUDIT_REFUSAL_BURST + 1000 + 2);
	snprintf(name, sizeof(name), "s1 deny audit-rate-limited - d=%u",
		 1000 - AUDIT_REFUSAL_BURST);
	assert_string_equal(got.s[got.n - 1], name);

	/* the bucket refills at AUDIT_REFUSAL_RATE a second */
	audit_close();
	fold_open(path, sizeof(path), "refill");
	fake_ms = 1000;
	for (i = 0; i < AUDIT_REFUSAL_BURST + 10; i++) {
		snprintf(name, sizeof(name), "m%u.x", i);
		audit_log(&ev);
	}
	fake_ms += 1000;
	for (i = 0; i < 2 * AUDIT_REFUSAL_RATE; i++) {
		snprintf(name, sizeof(name), "k%u.x", i);
		audit_log(&ev);
	}
	audit_close(); /* writes the drop count at once */
	read_lines(path, &got);
	for (i = 0; i < got.n; i++) {
		if (strstr(got.s[i], " allow "))
			n_allow++;
		else if (sscanf(got.s[i], "s1 deny audit-rate-limited - d=%u", &dropped) == 1)
			n_drop++;
		else
			n_first++;
	}
	assert_int_equal(n_allow, 0);
	assert_int_equal(n_first, AUDIT_REFUSAL_BURST + AUDIT_REFUSAL_RATE);
	assert_int_equal(n_drop, 1);
	assert_int_equal(dropped, 10 + AUDIT_REFUSAL_RATE);
	free(got.s);
	audit_set_clock(NULL);
}

/* 2000 identical refusals in a second are two lines; the count says how
 * many were folded, and the metric agrees. */
static void test_flood_of_one_kind(void **state)
{
	char path[256];
	struct lines got = { .s = calloc(MAX_LINES, sizeof(*got.s)) };
	uint64_t folded0 = audit_refusals_folded();
	struct audit_event ev = { .sandbox = "s1",
				  .proto = "http",
				  .dst_port = 80,
				  .decision = "deny",
				  .reason = "not-allowlisted",
				  .name = "exfil.example",
				  .method = "GET",
				  .path = "/x",
				  .status = 403 };
	unsigned i;

	(void)state;
	assert_non_null(got.s);
	fold_open(path, sizeof(path), "flood");
	for (i = 0; i < 2000; i++) {
		fake_ms = 1000 + i / 2;
		audit_log(&ev);
	}
	read_lines(path, &got);
	assert_int_equal(got.n, 1);
	fake_ms = 1000 + AUDIT_REPEAT_MS;
	audit_tick();
	read_lines(path, &got);
	assert_int_equal(got.n, 2);
	assert_string_equal(got.s[0], "s1 deny not-allowlisted exfil.example:80");
	assert_string_equal(got.s[1], "s1 deny not-allowlisted exfil.example:80 r=1999");
	assert_int_equal(audit_refusals_folded() - folded0, 1999);
	audit_close();
	free(got.s);
	audit_set_clock(NULL);
}

/* audit_fold: 0 writes each refusal on its own line, within the rate bound. */
static void test_fold_off(void **state)
{
	char path[256];
	struct lines got = { .s = calloc(MAX_LINES, sizeof(*got.s)) };
	struct audit_event ev = { .sandbox = "s2",
				  .proto = "tcp",
				  .dst_port = 443,
				  .decision = "deny",
				  .reason = "sni-mismatch",
				  .name = "echo.example" };
	unsigned i;

	(void)state;
	assert_non_null(got.s);
	fold_open(path, sizeof(path), "fold-off");
	audit_set_fold(0);
	for (i = 0; i < 5; i++) {
		fake_ms = 5000 + i;
		audit_log(&ev);
	}
	read_lines(path, &got);
	assert_int_equal(got.n, 5);
	for (i = 0; i < 5; i++)
		assert_string_equal(got.s[i], "s2 deny sni-mismatch echo.example:443");
	audit_set_fold(AUDIT_REPEAT_MS);
	for (i = 0; i < 5; i++) {
		fake_ms = 6000 + i;
		audit_log(&ev);
	}
	read_lines(path, &got);
	/* Folded again: these repeat the last line, within the window. */
	assert_int_equal(got.n, 5);
	fake_ms = 6000 + AUDIT_REPEAT_MS;
	audit_tick();
	read_lines(path, &got);
	assert_int_equal(got.n, 6);
	assert_string_equal(got.s[5], "s2 deny sni-mismatch echo.example:443 r=5");
	audit_close();
	free(got.s);
	audit_set_clock(NULL);
}

/* Without a name, the raw target tells refusals apart (and a count line
 * carries it); with one, the name does, and a count line's target is null
 * (its repeats may have asked for other paths). */
static void test_fold_target(void **state)
{
	char path[256], *buf, *l2, *l3;
	struct audit_event ev = { .sandbox = "s3",
				  .proto = "http",
				  .dst_port = 80,
				  .decision = "deny",
				  .reason = "address-literal" };
	size_t len;

	(void)state;
	fold_open(path, sizeof(path), "fold-target");
	fake_ms = 7000;
	ev.target = "http://2852039166/";
	audit_log(&ev);
	audit_log(&ev); /* folded */
	ev.target = "http://127.1/";
	audit_log(&ev); /* another kind: the count, then this one */
	buf = slurp(path, &len);
	l2 = strchr(buf, '\n') + 1;
	l3 = strchr(l2, '\n') + 1;
	assert_non_null(strstr(buf, "\"target\":\"http://2852039166/\""));
	assert_true(strstr(buf, "\"repeated\":null") < l2);
	assert_non_null(strstr(l2, "\"target\":\"http://2852039166/\""));
	assert_true(strstr(l2, "\"repeated\":1,") < l3);
	assert_non_null(strstr(l3, "\"target\":\"http://127.1/\""));
	assert_int_equal(strchr(l3, '\n') + 1 - buf, (long)len); /* three lines */
	free(buf);

	/* Named: folded across targets; the count line has no target. */
	fold_open(path, sizeof(path), "fold-target-named");
	fake_ms = 8000;
	ev.name = "a.test";
	ev.reason = "not-allowlisted";
	ev.target = "http://a.test/1";
	audit_log(&ev);
	ev.target = "http://a.test/2";
	audit_log(&ev);
	fake_ms = 8000 + AUDIT_REPEAT_MS;
	audit_tick();
	buf = slurp(path, &len);
	l2 = strchr(buf, '\n') + 1;
	assert_non_null(strstr(buf, "\"target\":\"http://a.test/1\""));
	assert_null(strstr(buf, "http://a.test/2"));
	assert_non_null(strstr(l2, "\"name\":\"a.test\",\"target\":null,"));
	assert_non_null(strstr(l2, "\"repeated\":1,"));
	free(buf);
	audit_close();
	audit_set_clock(NULL);
}

/* Whatever comes, in whatever order: every refusal is a line, or in the
 * "repeated" or "dropped" of one; every allowed decision is a line; and a
 * source writes no more refusal lines than its bucket and its counts allow. */
static void test_accounting_random(void **state)
{
	static const char *const sbs[] = { "s1", "s2", "s3", NULL };
	static const char *const names[] = { "a.x", "b.x", "c.x", "d.x", "e.x" };
	static const char *const reasons[] = { "not-allowlisted", "address-denied" };
	struct lines got = { .s = calloc(MAX_LINES, sizeof(*got.s)) };
	unsigned long long refusals = 0, allows = 0, counted = 0, n_allow = 0;
	unsigned long long n_ref_lines[4] = { 0 };
	char path[256];
	uint32_t seed = 12345;
	unsigned i, k;
	struct sl_addr a;

	(void)state;
	assert_non_null(got.s);
	assert_int_equal(addr_parse("10.9.9.9", &a), 0);
	fold_open(path, sizeof(path), "random");
	fake_ms = 1;
	for (i = 0; i < 4000; i++) {
		struct audit_event ev = { .proto = "http" };
		unsigned r;

		seed = seed * 1103515245u + 12345u;
		r = seed >> 8;
		ev.sandbox = sbs[r % 4];
		ev.src_addr = ev.sandbox ? NULL : &a;
		ev.name = names[(r >> 4) % 5 < 3 ? 0 : (r >> 4) % 5];
		ev.reason = reasons[(r >> 8) % 2];
		ev.decision = (r >> 10) % 10 < 3 ? "allow" : "deny";
		if (!strcmp(ev.decision, "allow"))
			allows++;
		else
			refusals++;
		audit_log(&ev);
		fake_ms += (r >> 12) % 10; /* about 18 s in all: over the rate */
		if ((r >> 20) % 50 == 0)
			audit_tick();
	}
	audit_close();
	read_lines(path, &got);
	for (i = 0; i < got.n; i++) {
		const char *r = strstr(got.s[i], " r="), *d = strstr(got.s[i], " d=");

		if (strstr(got.s[i], " allow ")) {
			n_allow++;
			continue;
		}
		counted += r ? strtoull(r + 3, NULL, 10) : d ? strtoull(d + 3, NULL, 10) : 1;
		for (k = 0; k < 3; k++)
			if (!strncmp(got.s[i], sbs[k], 2) && got.s[i][2] == ' ')
				break;
		if (!d)
			n_ref_lines[k]++;
	}
	assert_int_equal(n_allow, allows);
	assert_int_equal(counted, refusals);
	/* a bucket: burst plus rate x time (about 18 s) */
	for (k = 0; k < 4; k++)
		assert_true(n_ref_lines[k] <=
			    AUDIT_REFUSAL_BURST + AUDIT_REFUSAL_RATE * (fake_ms / 1000 + 1));
	free(got.s);
	audit_set_clock(NULL);
}

/* --- batches (audit_defer) ------------------------------------------------ */

static void log_name(const char *name)
{
	struct audit_event ev = { .sandbox = "s1",
				  .proto = "http",
				  .decision = "allow",
				  .reason = "allowed",
				  .name = name };

	audit_log(&ev);
}

/* The names of the lines in @path, in file order, joined by ' '. */
static void names_in(const char *path, char *out, size_t outlen)
{
	size_t len, i = 0, o = 0;
	char *buf = slurp(path, &len);

	out[0] = '\0';
	while (i < len) {
		const char *nl = memchr(buf + i, '\n', len - i), *n;
		size_t k;

		assert_non_null(nl);
		n = strstr(buf + i, "\"name\":\"");
		assert_true(n && n < nl);
		n += 8;
		k = strcspn(n, "\"");
		o += (size_t)snprintf(out + o, outlen - o, "%s%.*s", o ? " " : "", (int)k, n);
		assert_true(o < outlen);
		i = (size_t)(nl - buf) + 1;
	}
	free(buf);
}

static void *log_other(void *arg)
{
	log_name(arg); /* a thread that does not defer */
	return NULL;
}

/* A deferring thread's lines wait for audit_flush(); any other thread's
 * line goes out at once, after them, in the order logged. */
static void test_defer_order(void **state)
{
	char path[256], got[256];
	pthread_t th;

	(void)state;
	snprintf(path, sizeof(path), "%s/defer.log", tmpdir);
	assert_int_equal(audit_open(path, NULL), 0);
	audit_defer(true);
	log_name("d1");
	log_name("d2");
	names_in(path, got, sizeof(got));
	assert_string_equal(got, "");
	audit_flush();
	names_in(path, got, sizeof(got));
	assert_string_equal(got, "d1 d2");
	log_name("d3");
	assert_int_equal(pthread_create(&th, NULL, log_other, "other"), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	names_in(path, got, sizeof(got));
	assert_string_equal(got, "d1 d2 d3 other");
	/* A line older than AUDIT_FLUSH_MS goes with the next one. */
	log_name("d4");
	usleep((AUDIT_FLUSH_MS + 20) * 1000);
	log_name("d5");
	names_in(path, got, sizeof(got));
	assert_string_equal(got, "d1 d2 d3 other d4 d5");
	audit_defer(false);
	audit_close();
}

/* Rotation, a new target and a clean exit write the held lines first: none
 * is lost, none goes to the other file. */
static void test_defer_reopen_and_close(void **state)
{
	char path[256], rotated[256], other[256], got[256];
	uint64_t before = audit_write_failures();

	(void)state;
	snprintf(path, sizeof(path), "%s/drot.log", tmpdir);
	snprintf(rotated, sizeof(rotated), "%s/drot.log.1", tmpdir);
	snprintf(other, sizeof(other), "%s/dother.log", tmpdir);
	assert_int_equal(audit_open(path, NULL), 0);
	audit_defer(true);
	log_name("before");
	assert_int_equal(rename(path, rotated), 0);
	assert_int_equal(audit_reopen(), 0);
	log_name("after");
	audit_flush();
	names_in(rotated, got, sizeof(got));
	assert_string_equal(got, "before");
	names_in(path, got, sizeof(got));
	assert_string_equal(got, "after");

	log_name("switched");
	assert_int_equal(audit_open(other, NULL), 0);
	log_name("new");
	audit_flush();
	names_in(path, got, sizeof(got));
	assert_string_equal(got, "after switched");
	names_in(other, got, sizeof(got));
	assert_string_equal(got, "new");

	log_name("last");
	audit_close();
	names_in(other, got, sizeof(got));
	assert_string_equal(got, "new last");
	assert_int_equal(audit_write_failures(), before);
	audit_defer(false);
}

/* A batch the file takes only in part: every line not written whole is
 * counted, and the lines before it are there. */
static size_t count_char(const char *s, char c)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == c;
	return n;
}

static void test_defer_write_failure_counted(void **state)
{
	char path[256], name[32], *buf;
	struct rlimit old, lim;
	uint64_t before;
	size_t len, whole = 0, i;
	int k;

	(void)state;
	snprintf(path, sizeof(path), "%s/dfull.log", tmpdir);
	assert_int_equal(audit_open(path, NULL), 0);
	before = audit_write_failures();
	audit_defer(true);
	for (k = 0; k < 10; k++) {
		snprintf(name, sizeof(name), "line-%d", k);
		log_name(name);
	}
	/* The file may grow to 1000 bytes: write() comes up short, then
	 * fails with EFBIG (SIGXFSZ ignored). */
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 1000;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	signal(SIGXFSZ, SIG_IGN);
	audit_flush();
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	audit_defer(false);

	/* The write stopped at 1000 bytes, inside a line: the file is cut
	 * back to the end of the last whole line, so that the next line
	 * does not start in the middle of that one. */
	buf = slurp(path, &len);
	assert_true(len > 0 && len < 1000);
	assert_int_equal(buf[len - 1], '\n');
	for (i = 0; i < len; i++)
		whole += buf[i] == '\n';
	free(buf);
	assert_true(whole >= 1 && whole < 10);
	assert_int_equal(audit_write_failures() - before, 10 - whole);
	/* With room again, the next line is a line of its own. */
	log_name("after");
	buf = slurp(path, &len);
	assert_non_null(strstr(buf, "\n{"));
	assert_int_equal(buf[len - 1], '\n');
	assert_non_null(strstr(buf, "\"name\":\"after\""));
	assert_int_equal(count_char(buf, '\n'), whole + 1);
	free(buf);
	audit_close();
}

/* The audit file deleted while open: audit_tick() sees that its path
 * leads nowhere (or elsewhere) and opens it anew. */
static void test_deleted_file_reopened(void **state)
{
	char path[256], *buf;
	size_t len;

	(void)state;
	snprintf(path, sizeof(path), "%s/deleted.log", tmpdir);
	assert_int_equal(audit_open(path, NULL), 0);
	log_name("before");
	assert_int_equal(unlink(path), 0);
	audit_tick();
	log_name("after");
	audit_flush();
	buf = slurp(path, &len);
	assert_non_null(strstr(buf, "\"name\":\"after\""));
	assert_null(strstr(buf, "\"name\":\"before\""));
	free(buf);
	/* Replaced by another file (a rotation without SIGHUP): the same. */
	{
		char other[300];
		FILE *f;

		snprintf(other, sizeof(other), "%s.new", path);
		f = fopen(other, "w");
		assert_non_null(f);
		fclose(f);
		assert_int_equal(rename(other, path), 0);
	}
	audit_tick();
	log_name("third");
	audit_flush();
	buf = slurp(path, &len);
	assert_non_null(strstr(buf, "\"name\":\"third\""));
	assert_null(strstr(buf, "\"name\":\"after\""));
	free(buf);
	audit_close();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_checker_rejects),
		cmocka_unit_test(test_escape_table),
		cmocka_unit_test(test_escape_bound),
		cmocka_unit_test(test_escape_bound_random),
		cmocka_unit_test(test_full_line),
		cmocka_unit_test(test_numbers_and_time),
		cmocka_unit_test(test_omitted_fields),
		cmocka_unit_test(test_path_drops_query),
		cmocka_unit_test(test_target_redacted),
		cmocka_unit_test(test_hostile_strings_escaped),
		cmocka_unit_test(test_control_peer),
		cmocka_unit_test(test_truncation_bound),
		cmocka_unit_test(test_write_file_and_parse_back),
		cmocka_unit_test(test_open_error),
		cmocka_unit_test(test_reopen_after_rotation),
		cmocka_unit_test(test_write_failure_counted),
		cmocka_unit_test(test_stderr_pipe_full_never_blocks),
		cmocka_unit_test(test_stderr_socket_full_never_blocks),
		cmocka_unit_test(test_threads_lines_whole),
		cmocka_unit_test(test_defer_order),
		cmocka_unit_test(test_defer_reopen_and_close),
		cmocka_unit_test(test_defer_write_failure_counted),
		cmocka_unit_test(test_deleted_file_reopened),
		cmocka_unit_test(test_closed_counts),
		cmocka_unit_test(test_fold_table),
		cmocka_unit_test(test_rate_bound),
		cmocka_unit_test(test_flood_of_one_kind),
		cmocka_unit_test(test_fold_off),
		cmocka_unit_test(test_fold_target),
		cmocka_unit_test(test_accounting_random),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
