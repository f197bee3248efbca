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
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "broker/audit.h"
#include "common/addr.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* --- a tiny, strict checker for the flat JSON objects audit writes ------- */

#define JMAX_FIELDS 32

struct jfield {
	char key[32];
	const char *val; /* raw JSON text of the value, in the line */
	size_t vlen;
	bool is_str; /* val/vlen exclude the quotes */
};

struct jobj {
	struct jfield f[JMAX_FIELDS];
	unsigned n;
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
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
	    (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
	       (c >= 'A' && c <= 'F');
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
	if (len < 3 || s[0] != '{' || s[len - 1] != '\n' || s[len - 2] != '}')
		return false;
	len -= 1; /* drop the newline */
	i = 1;
	for (;;) {
		struct jfield *f;

		if (o->n == JMAX_FIELDS || i >= len || s[i] != '"')
			return false;
		end = parse_jstring(s, len, i + 1);
		if (!end || end - i - 1 >= sizeof(o->f[0].key))
			return false;
		f = &o->f[o->n];
		memcpy(f->key, s + i + 1, end - i - 1);
		f->key[end - i - 1] = '\0';
		for (j = 0; j < o->n; j++)
			if (!strcmp(o->f[j].key, f->key))
				return false;
		i = end + 1;
		if (i >= len || s[i] != ':')
			return false;
		i++;
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

static void format_and_parse(const struct audit_event *ev, char *line,
			     struct jobj *o)
{
	int n = audit_format(ev, line, AUDIT_LINE_MAX);

	assert_true(n > 0);
	assert_true(n < AUDIT_LINE_MAX);
	assert_int_equal(strlen(line), (size_t)n);
	assert_true(parse_line(line, (size_t)n, o));
}

/* The checker itself must refuse what a broken writer would produce. */
static void test_checker_rejects(void **state)
{
	static const char *const bad[] = {
	    "{\"a\":1}",	      /* no newline */
	    "{\"a\":1\n",	      /* unbalanced */
	    "{\"a\":\"x}\n",	      /* unterminated string */
	    "{\"a\":\"\x01\"}\n",     /* raw control byte */
	    "{\"a\":\"\xff\"}\n",     /* invalid UTF-8 */
	    "{\"a\":\"\\x\"}\n",      /* bad escape */
	    "{\"a\":1,\"a\":2}\n",    /* duplicate key */
	    "{\"a\":1}{\"b\":2}\n",   /* two objects on a line */
	    "{\"a\":1}\n{\"b\":2}\n", /* two lines */
	};
	struct jobj o;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		assert_false(parse_line(bad[i], strlen(bad[i]), &o));
	{
		static const char good[] =
		    "{\"a\":1,\"b\":\"\\u00e9\xc3\xa9\"}\n";

		assert_true(parse_line(good, strlen(good), &o));
	}
	assert_int_equal(o.n, 2);
}

/* --- escaping ------------------------------------------------------------ */

static void test_escape_table(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
	    {"api.github.com", "api.github.com"},
	    {"", ""},
	    {"a\"b", "a\\\"b"},
	    {"a\\b", "a\\\\b"},
	    {"\"\\", "\\\"\\\\"},
	    {"\n\t\r", "\\u000a\\u0009\\u000d"},
	    {"\x01\x1f", "\\u0001\\u001f"},
	    {"\x1b[31mred", "\\u001b[31mred"}, /* terminal escapes */
	    {"\x7f", "\\u007f"},
	    {"/ok/", "/ok/"},
	    /* valid multi-byte UTF-8 is kept as it is */
	    {"caf\xc3\xa9", "caf\xc3\xa9"},
	    {"\xe2\x82\xac!", "\xe2\x82\xac!"},
	    {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
	    {"\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf"}, /* U+10FFFF */
	    {"\xed\x9f\xbf", "\xed\x9f\xbf"},	      /* U+D7FF */
	    /* invalid UTF-8: one U+FFFD per maximal bad subpart */
	    {"\xff", "\\ufffd"},
	    {"a\x80z", "a\\ufffdz"},		       /* lone continuation */
	    {"\xc3", "\\ufffd"},		       /* cut at the end */
	    {"\xe2\x82x", "\\ufffdx"},		       /* cut in the middle */
	    {"\xc0\xaf", "\\ufffd\\ufffd"},	       /* overlong '/' */
	    {"\xe0\x80\xaf", "\\ufffd\\ufffd\\ufffd"}, /* overlong '/' */
	    {"\xed\xa0\x80", "\\ufffd\\ufffd\\ufffd"}, /* surrogate */
	    {"\xf4\x90\x80\x80",
	     "\\ufffd\\ufffd\\ufffd\\ufffd"}, /* > U+10FFFF */
	    {"\xf8\x88\x80\x80\x80", "\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd"},
	    {"\xc3\xa9\xff\xc3\xa9", "\xc3\xa9\\ufffd\xc3\xa9"},
	};
	char out[256];
	size_t i, n;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		n = audit_json_escape(out, sizeof(out), cases[i].in);
		if (strcmp(out, cases[i].out))
			fail_msg("case %zu: got `%s`, want `%s`", i, out,
				 cases[i].out);
		assert_int_equal(n, strlen(cases[i].out));
	}
}

/* The bound is in escaped bytes, and never splits an escape or a character. */
static void test_escape_bound(void **state)
{
	char out[16];

	(void)state;
	memset(out, 'X', sizeof(out));
	assert_int_equal(audit_json_escape(out, 5, "abc\"def"), 3);
	assert_string_equal(out, "abc");
	assert_int_equal(out[4], 'X'); /* nothing past the bound */
	assert_int_equal(audit_json_escape(out, 6, "abc\"def"), 5);
	assert_string_equal(out, "abc\\\"");
	assert_int_equal(audit_json_escape(out, 5, "ab\xe2\x82\xac"), 2);
	assert_string_equal(out, "ab");
	assert_int_equal(audit_json_escape(out, 6, "ab\xe2\x82\xac"), 5);
	assert_string_equal(out, "ab\xe2\x82\xac");
	assert_int_equal(audit_json_escape(out, 6, "\x01\x02"), 0);
	assert_string_equal(out, "");
	assert_int_equal(audit_json_escape(out, 7, "\x01\x02"), 6);
	assert_string_equal(out, "\\u0001");
	assert_int_equal(audit_json_escape(out, 12, "\xff"), 6);
	assert_string_equal(out, "\\ufffd");
	assert_int_equal(audit_json_escape(out, 6, "\xff"), 0);
	assert_int_equal(audit_json_escape(out, 1, "abc"), 0);
	assert_string_equal(out, "");
	out[0] = 'X';
	assert_int_equal(audit_json_escape(out, 0, "abc"), 0);
	assert_int_equal(out[0], 'X');
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
	    .addr = &a,
	    .port = 443,
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
	    "time",   "sandbox",    "proto",	  "name",
	    "addr",   "port",	    "decision",	  "reason",
	    "rule",   "credential", "method",	  "path",
	    "status", "bytes_up",   "bytes_down", "duration_ms",
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
	assert_string_equal(jstr(&o, "addr"), "140.82.112.5");
	assert_string_equal(jstr(&o, "port"), "443");
	assert_false(jget(&o, "port")->is_str);
	assert_string_equal(jstr(&o, "credential"), "github");
	assert_string_equal(jstr(&o, "status"), "200");
	assert_string_equal(jstr(&o, "bytes_up"), "123");
	assert_string_equal(jstr(&o, "bytes_down"), "4567");
	assert_string_equal(jstr(&o, "duration_ms"), "12");
	/* 2026-11-30T04:05:06.123Z */
	t = jstr(&o, "time");
	assert_int_equal(strlen(t), 24);
	assert_true(t[4] == '-' && t[7] == '-' && t[10] == 'T' &&
		    t[13] == ':' && t[16] == ':' && t[19] == '.' &&
		    t[23] == 'Z');
	assert_true(!strncmp(t, "20", 2));
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
	struct audit_event empty = {0};

	(void)state;
	format_and_parse(&dns, line, &o);
	assert_int_equal(o.n, 7);
	assert_string_equal(o.f[0].key, "time");
	assert_string_equal(jstr(&o, "dns_type"), "A");
	assert_null(jget(&o, "addr"));
	assert_null(jget(&o, "port"));
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

	/* decision and reason are always there */
	format_and_parse(&empty, line, &o);
	assert_int_equal(o.n, 3);
	assert_string_equal(jstr(&o, "decision"), "");
	assert_string_equal(jstr(&o, "reason"), "");
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
	assert_string_equal(
	    jstr(&o, "name"),
	    "a\\\",\\\"decision\\\":\\\"allow\\u000a\\ufffd\\ufffd");
	assert_int_equal(strchr(line, '\n') - line, (long)strlen(line) - 1);
}

/* Every field at its worst: the line stays short, whole and parseable. */
static void test_truncation_bound(void **state)
{
	static const char fill[] = {'"', '\x01', '\xff', 'a'};
	char line[AUDIT_LINE_MAX], *big;
	struct sl_addr a;
	struct jobj o;
	size_t i, k;

	(void)state;
	big = malloc(20001);
	assert_non_null(big);
	assert_int_equal(
	    addr_parse("2001:db8:1234:5678:9abc:def0:1234:5678", &a), 0);
	for (k = 0; k < ARRAY_SIZE(fill); k++) {
		struct audit_event ev = {
		    .sandbox = big,
		    .proto = big,
		    .name = big,
		    .addr = &a,
		    .port = 65535,
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
		};

		memset(big, fill[k], 20000);
		big[20000] = '\0';
		format_and_parse(&ev, line, &o);
		assert_int_equal(o.n, 18);
		for (i = 0; i < o.n; i++)
			assert_true(o.f[i].vlen <= AUDIT_FIELD_MAX);
		assert_true(jget(&o, "name")->vlen > AUDIT_FIELD_MAX - 6);
		assert_true(jget(&o, "path")->vlen > AUDIT_FIELD_MAX - 6);
		assert_string_equal(jstr(&o, "bytes_up"),
				    "18446744073709551615");
		assert_string_equal(jstr(&o, "status"), "-2147483648");
	}
	free(big);
	/* a caller's buffer that could not hold the worst line is refused */
	{
		struct audit_event ev = {.decision = "allow",
					 .reason = "allowed"};

		assert_int_equal(audit_format(&ev, line, AUDIT_LINE_MAX - 1),
				 -ENOSPC);
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
static size_t for_each_line(const char *buf, size_t len,
			    void (*fn)(const char *, size_t, void *), void *arg)
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
	    "time",	"sandbox", "proto",    "name",	     "port",
	    "decision", "reason",  "bytes_up", "bytes_down", "duration_ms",
	};
	size_t i;

	(void)arg;
	if (!parse_line(s, len, &o))
		fail_msg("malformed line: %.*s", (int)len, s);
	for (i = 0; i < ARRAY_SIZE(keys); i++)
		if (!jget(&o, keys[i]))
			fail_msg("key `%s` missing: %.*s", keys[i], (int)len,
				 s);
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
	char path[256], err[256], *buf;
	struct stat st;
	size_t len;
	struct audit_event ev = {
	    .sandbox = "s1",
	    .proto = "connect",
	    .name = "api.github.com",
	    .port = 443,
	    .decision = "allow",
	    .reason = "allowed",
	    .bytes_up = 10,
	    .bytes_down = 20,
	    .duration_ms = 3,
	};

	(void)state;
	snprintf(path, sizeof(path), "%s/audit.log", tmpdir);
	assert_int_equal(audit_open(path, err, sizeof(err)), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	audit_log(&ev);
	ev.decision = "deny";
	ev.reason = "not-allowlisted";
	audit_log(&ev);
	buf = slurp(path, &len);
	assert_int_equal(for_each_line(buf, len, check_line, NULL), 2);
	assert_non_null(
	    strstr(buf, "\"decision\":\"allow\",\"reason\":\"allowed\""));
	assert_non_null(strstr(
	    buf, "\"decision\":\"deny\",\"reason\":\"not-allowlisted\""));
	free(buf);

	/* O_APPEND: a second open adds, never truncates */
	assert_int_equal(audit_open(path, err, sizeof(err)), 0);
	audit_log(&ev);
	buf = slurp(path, &len);
	assert_int_equal(for_each_line(buf, len, check_line, NULL), 3);
	free(buf);
}

static void test_open_error(void **state)
{
	char path[256], err[512];

	(void)state;
	snprintf(path, sizeof(path), "%s/no/such/dir/audit.log", tmpdir);
	err[0] = '\0';
	assert_int_equal(audit_open(path, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, path));
	assert_non_null(strchr(err, '`'));
	assert_int_equal(audit_open("", err, sizeof(err)), -EINVAL);
}

static void test_reopen_after_rotation(void **state)
{
	char path[256], rotated[256], err[256], *buf;
	size_t len;
	struct audit_event ev = {.proto = "dns",
				 .decision = "allow",
				 .reason = "allowed",
				 .name = "before"};

	(void)state;
	snprintf(path, sizeof(path), "%s/rot.log", tmpdir);
	snprintf(rotated, sizeof(rotated), "%s/rot.log.1", tmpdir);
	assert_int_equal(audit_open(path, err, sizeof(err)), 0);
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
	char err[256];
	uint64_t before;
	struct audit_event ev = {
	    .proto = "tcp", .decision = "allow", .reason = "allowed"};

	(void)state;
	assert_int_equal(audit_open("/dev/full", err, sizeof(err)), 0);
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
	char err[256], buf[AUDIT_LINE_MAX + 1], junk[4096];
	int p[2], saved, wfd;
	uint64_t before;
	ssize_t n;
	unsigned i;
	struct audit_event ev = {.proto = "dns",
				 .decision = "deny",
				 .reason = "not-allowlisted",
				 .name = "x.example"};

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_int_equal(dup2(p[1], STDERR_FILENO), STDERR_FILENO);

	/* A line goes through while there is room. */
	assert_int_equal(audit_open("-", err, sizeof(err)), 0);
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
	char err[256], buf[AUDIT_LINE_MAX + 1], junk[4096];
	int sv[2], saved;
	uint64_t before;
	ssize_t n;
	unsigned i;
	struct audit_event ev = {.proto = "dns",
				 .decision = "deny",
				 .reason = "not-allowlisted",
				 .name = "y.example"};

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_int_equal(dup2(sv[1], STDERR_FILENO), STDERR_FILENO);

	assert_int_equal(audit_open("-", err, sizeof(err)), 0);
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
	    .port = 443,
	    .method = "POST",
	    .path = w->path,
	    .sandbox = "sbx",
	};

	for (i = 0; i < NLINES; i++) {
		/* "tN-SEQ" plus hostile bytes, so escaping runs concurrently */
		snprintf(name, sizeof(name), "t%u-%u\"\xff", w->id, i);
		ev.name = name;
		ev.bytes_up = i;
		audit_log(&ev);
	}
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
	char path[256], err[256], *buf, *reqpath;
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
	assert_int_equal(audit_open(path, err, sizeof(err)), 0);
	before = audit_write_failures();
	for (i = 0; i < NTHREADS; i++) {
		w[i].id = (unsigned)i;
		w[i].path = reqpath;
		assert_int_equal(
		    pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
	}
	for (i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(audit_write_failures(), before);

	t = calloc(1, sizeof(*t));
	assert_non_null(t);
	buf = slurp(path, &len);
	assert_int_equal(for_each_line(buf, len, tally_line, t),
			 NTHREADS * NLINES);
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
	struct audit_event ev = {.decision = "error", .reason = "internal"};
	uint64_t before;

	(void)state;
	audit_close();
	before = audit_write_failures();
	audit_log(&ev);
	assert_int_equal(audit_write_failures(), before + 1);
	assert_int_equal(audit_reopen(), 0); /* nothing to reopen */
	audit_close();			     /* twice is fine */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_checker_rejects),
	    cmocka_unit_test(test_escape_table),
	    cmocka_unit_test(test_escape_bound),
	    cmocka_unit_test(test_full_line),
	    cmocka_unit_test(test_omitted_fields),
	    cmocka_unit_test(test_path_drops_query),
	    cmocka_unit_test(test_hostile_strings_escaped),
	    cmocka_unit_test(test_truncation_bound),
	    cmocka_unit_test(test_write_file_and_parse_back),
	    cmocka_unit_test(test_open_error),
	    cmocka_unit_test(test_reopen_after_rotation),
	    cmocka_unit_test(test_write_failure_counted),
	    cmocka_unit_test(test_stderr_pipe_full_never_blocks),
	    cmocka_unit_test(test_stderr_socket_full_never_blocks),
	    cmocka_unit_test(test_threads_lines_whole),
	    cmocka_unit_test(test_closed_counts),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
