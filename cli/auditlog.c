// SPDX-License-Identifier: MIT
/* Reading audit lines back: the JSON object of broker/audit.c, the time,
 * --since, and a terminal-safe printer (see auditlog.h). */
#include "cli/auditlog.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json.h"
#include "common/obuf.h"

/* Reads a string value into @buf (size @cap); marks @r suspect when it
 * holds a NUL or does not fit. */
static int read_str(struct json *j, char *buf, size_t cap, struct auditlog_rec *r)
{
	struct obuf o = { .p = buf, .cap = cap - 1 };
	size_t i;

	if (j->i >= j->len || j->s[j->i] != '"')
		return -EINVAL;
	if (sl_json_string(j, &o) < 0)
		return -EINVAL;
	if (o.full)
		r->suspect = true;
	for (i = 0; i < o.len; i++) {
		if (buf[i] == '\0') {
			buf[i] = '?'; /* never let a NUL cut a name short */
			r->suspect = true;
		}
	}
	buf[o.len] = '\0';
	return 0;
}

static int read_u64(struct json *j, uint64_t *v)
{
	bool is_int;

	if (sl_json_number(j, v, &is_int) < 0 || !is_int)
		return -EINVAL;
	return 0;
}

int cli_auditlog_parse(const char *s, size_t len, struct auditlog_rec *r)
{
	struct json j = { .s = s, .len = len };
	bool have_time = false, have_dst = false, have_old = false;
	char old_addr[sizeof(r->addr)] = "";
	uint16_t old_port = 0;

	memset(r, 0, sizeof(*r));
	sl_json_ws(&j);
	if (j.i >= j.len || j.s[j.i] != '{')
		return -EINVAL;
	j.i++;
	sl_json_ws(&j);
	if (j.i < j.len && j.s[j.i] == '}') {
		j.i++;
		goto end;
	}
	for (;;) {
		char key[32];
		struct obuf k = { .p = key, .cap = sizeof(key) - 1 };
		uint64_t v;

		sl_json_ws(&j);
		if (sl_json_string(&j, &k) < 0)
			return -EINVAL;
		key[k.full ? 0 : k.len] = '\0';
		sl_json_ws(&j);
		if (j.i >= j.len || j.s[j.i] != ':')
			return -EINVAL;
		j.i++;
		sl_json_ws(&j);
		if (j.len - j.i >= 4 && !memcmp(j.s + j.i, "null", 4)) {
			/* Not known, or not for this line: as if absent. */
			j.i += 4;
			goto next;
		}
#define STR(field) (read_str(&j, r->field, sizeof(r->field), r))
		if (!strcmp(key, "time")) {
			if (STR(time) < 0 || cli_auditlog_time(r->time, &r->t_ms) < 0)
				return -EINVAL;
			have_time = true;
		} else if (!strcmp(key, "sandbox")) {
			if (STR(sandbox) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "proto")) {
			if (STR(proto) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "name")) {
			if (STR(name) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "target")) {
			if (STR(target) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "dst_addr")) {
			if (STR(addr) < 0)
				return -EINVAL;
			have_dst = true;
		} else if (!strcmp(key, "src_addr")) {
			if (STR(src_addr) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "addr")) {
			struct obuf o = { .p = old_addr, .cap = sizeof(old_addr) - 1 };

			/* The old schema's: what it means is known at the end. */
			if (j.i >= j.len || j.s[j.i] != '"' || sl_json_string(&j, &o) < 0)
				return -EINVAL;
			old_addr[o.full ? 0 : o.len] = '\0';
			have_old = true;
		} else if (!strcmp(key, "decision")) {
			if (STR(decision) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "reason")) {
			if (STR(reason) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "credential")) {
			if (STR(credential) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "dst_port")) {
			if (read_u64(&j, &v) < 0 || v > 65535)
				return -EINVAL;
			r->port = (uint16_t)v;
			have_dst = true;
		} else if (!strcmp(key, "src_port")) {
			if (read_u64(&j, &v) < 0 || v > 65535)
				return -EINVAL;
			r->src_port = (uint16_t)v;
		} else if (!strcmp(key, "port")) {
			if (read_u64(&j, &v) < 0 || v > 65535)
				return -EINVAL;
			old_port = (uint16_t)v;
			have_old = true;
		} else if (!strcmp(key, "bytes_up")) {
			if (read_u64(&j, &r->bytes_up) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "bytes_down")) {
			if (read_u64(&j, &r->bytes_down) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "repeated")) {
			if (read_u64(&j, &r->repeated) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "dropped")) {
			if (read_u64(&j, &r->dropped) < 0)
				return -EINVAL;
		} else if (sl_json_value(&j, 1) < 0) {
			return -EINVAL;
		}
#undef STR
next:
		sl_json_ws(&j);
		if (j.i >= j.len)
			return -EINVAL;
		if (j.s[j.i] == ',') {
			j.i++;
			continue;
		}
		if (j.s[j.i] != '}')
			return -EINVAL;
		j.i++;
		break;
	}
end:
	sl_json_ws(&j);
	if (j.i != j.len || !have_time)
		return -EINVAL;
	if (have_old && !have_dst) {
		/* An old line: without a sandbox (unknown-source) it named the
		 * client, else the destination. */
		bool client = !r->sandbox[0];

		snprintf(client ? r->src_addr : r->addr, sizeof(r->addr), "%s", old_addr);
		if (client)
			r->src_port = old_port;
		else
			r->port = old_port;
	}
	return 0;
}

/* Reads exactly @n digits at *@p. */
static int digits(const char **p, int n, int *out)
{
	int v = 0;

	while (n--) {
		if (**p < '0' || **p > '9')
			return -EINVAL;
		v = v * 10 + (**p - '0');
		(*p)++;
	}
	*out = v;
	return 0;
}

int cli_auditlog_time(const char *s, int64_t *ms)
{
	const char *p = s;
	int y, mo, d, h, mi, sec, oh = 0, om = 0, frac = 0, scale = 100;
	struct tm tm = { 0 };
	time_t t;

	if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
	    digits(&p, 2, &d) || (*p != 'T' && *p != 't') || !*p++ || digits(&p, 2, &h) ||
	    *p++ != ':' || digits(&p, 2, &mi) || *p++ != ':' || digits(&p, 2, &sec))
		return -EINVAL;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return -EINVAL;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		for (; *p >= '0' && *p <= '9'; p++) {
			frac += (*p - '0') * scale;
			scale /= 10;
		}
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p++ == '-' ? -1 : 1;

		if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om) || oh > 23 || om > 59)
			return -EINVAL;
		oh *= sign;
		om *= sign;
	} else {
		return -EINVAL;
	}
	if (*p)
		return -EINVAL;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	*ms = ((int64_t)t - (int64_t)oh * 3600 - (int64_t)om * 60) * 1000 + frac;
	return 0;
}

int cli_auditlog_since(const char *arg, int64_t now_ms, int64_t *ms)
{
	const char *p = arg;
	int64_t total = 0;

	if (cli_auditlog_time(arg, ms) == 0)
		return 0;
	if (!*p)
		return -EINVAL;
	while (*p) {
		int64_t n = 0, unit;

		if (*p < '0' || *p > '9')
			return -EINVAL;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (n > 1000000000)
				return -EINVAL; /* over 30 years of seconds */
			n = n * 10 + (*p - '0');
		}
		switch (*p++) {
		case 's':
			unit = 1000;
			break;
		case 'm':
			unit = 60 * 1000;
			break;
		case 'h':
			unit = 3600 * 1000;
			break;
		case 'd':
			unit = 86400 * 1000;
			break;
		default:
			return -EINVAL;
		}
		total += n * unit;
	}
	*ms = now_ms - total;
	return 0;
}

/*
 * Reads one line into @buf (AUDITLOG_LINE_MAX + 2 bytes) without its
 * newline; a longer one is consumed to its end and reported as too long,
 * so that a hostile file cannot make the reader allocate without bound.
 * Return: the length, -E2BIG for a line too long, -1 at the end.
 */
static ssize_t read_line(FILE *f, char *buf)
{
	size_t len;
	int c;

	if (!fgets(buf, AUDITLOG_LINE_MAX + 2, f))
		return -1;
	len = strlen(buf); /* a NUL in the line only cuts it: it then fails to parse */
	if (len && buf[len - 1] == '\n')
		return (ssize_t)len - 1;
	if (len <= AUDITLOG_LINE_MAX)
		return (ssize_t)len; /* the last line, without a newline */
	while ((c = fgetc(f)) != EOF && c != '\n')
		;
	return -E2BIG;
}

int cli_auditlog_read(FILE *f, const struct auditlog_filter *flt,
		      int (*fn)(const struct auditlog_rec *r, void *ctx), void *ctx,
		      struct auditlog_stats *st)
{
	char *line = malloc(AUDITLOG_LINE_MAX + 2);
	struct auditlog_rec *rec = malloc(sizeof(*rec));
	ssize_t n;
	int ret = 0;

	if (!line || !rec) {
		free(line);
		free(rec);
		return -ENOMEM;
	}
	while ((n = read_line(f, line)) != -1) {
		if (n == 0)
			continue; /* an empty line is no line */
		st->lines++;
		if (n < 0 || cli_auditlog_parse(line, (size_t)n, rec) < 0) {
			st->skipped++;
			continue;
		}
		if ((flt->sandbox && strcmp(flt->sandbox, rec->sandbox) != 0) ||
		    rec->t_ms < flt->since_ms) {
			st->filtered++;
			continue;
		}
		ret = fn(rec, ctx);
		if (ret)
			break;
	}
	if (!ret && ferror(f))
		ret = -EIO;
	free(line);
	free(rec);
	return ret;
}

void cli_auditlog_put_safe(FILE *out, const char *s, size_t max)
{
	size_t i;

	for (i = 0; i < max && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c > 0x20 && c < 0x7f && c != '\\')
			fputc(c, out);
		else
			fprintf(out, "\\x%02x", c);
	}
	if (s[i])
		fputs("...", out);
}
