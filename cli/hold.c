// SPDX-License-Identifier: MIT
/* `sluice pending`, `approve`, `refuse` and `watch`: held requests (`unlisted: hold`). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/addr.h"
#include "common/ctlproto.h"
#include "common/err.h"
#include "common/json.h"
#include "common/text.h"
#include "netns/netns.h"
#include "policy/policy.h"

#define PENDING_USAGE "usage: sluice pending [NAME] [--json]\n"
#define APPROVE_USAGE "usage: sluice approve NAME HOST[:PORT] [--for DURATION]\n"
#define REFUSE_USAGE "usage: sluice refuse NAME HOST[:PORT]\n"
#define MAX_FOR_SEC (366ull * 86400)

static bool name_ok(const char *name)
{
	return strlen(name) <= 100 && !strpbrk(name, " \t\n") && name[0] != '-';
}

/*
 * HOST[:PORT] into @host and *@port (0 when not given). A name only: an
 * address is reached by a `cidr` rule, which an approval is not. Return: 0,
 * or -EINVAL after saying why on stderr.
 */
static int parse_target(const char *arg, char *host, size_t hlen, uint16_t *port)
{
	const char *colon = strrchr(arg, ':'), *why = NULL;
	struct sl_addr a;
	size_t n = colon ? (size_t)(colon - arg) : strlen(arg);
	char *end;
	unsigned long v;

	*port = 0;
	if (n >= hlen || (colon && strchr(arg, ':') != colon) || arg[0] == '[') {
		fprintf(stderr,
			"sluice: bad target `%.300s`: write HOST or HOST:PORT with a name\n", arg);
		return -EINVAL;
	}
	memcpy(host, arg, n);
	host[n] = '\0';
	if (colon) {
		errno = 0;
		v = strtoul(colon + 1, &end, 10);
		if (errno || *end || end == colon + 1 || v < 1 || v > 65535 || colon[1] == '-') {
			fprintf(stderr, "sluice: bad port `%.20s` (1 to 65535)\n", colon + 1);
			return -EINVAL;
		}
		*port = (uint16_t)v;
	}
	if (addr_parse(host, &a) == 0) {
		fprintf(stderr,
			"sluice: `%s` is an address: approve and refuse take a name (for an "
			"address, add a `cidr` rule to the policy file)\n",
			host);
		return -EINVAL;
	}
	if (!policy_check_name(host, strlen(host), false, &why)) {
		fprintf(stderr, "sluice: bad host name `%.253s`: %s\n", host,
			why ? why : "invalid");
		return -EINVAL;
	}
	return 0;
}

/* "30s", "15m", "1h30m", "2d": seconds, 1 to MAX_FOR_SEC. Return: 0 or -EINVAL. */
static int parse_for(const char *s, uint64_t *sec)
{
	uint64_t total = 0, v;
	const char *p = s;
	char *end;

	if (!*p)
		return -EINVAL;
	while (*p) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		errno = 0;
		v = strtoull(p, &end, 10);
		if (errno || v > MAX_FOR_SEC)
			return -EINVAL;
		switch (*end) {
		case 's':
			break;
		case 'm':
			v *= 60;
			break;
		case 'h':
			v *= 3600;
			break;
		case 'd':
			v *= 86400;
			break;
		default:
			return -EINVAL;
		}
		total += v;
		if (total > MAX_FOR_SEC)
			return -EINVAL;
		p = end + 1;
	}
	if (total == 0)
		return -EINVAL;
	*sec = total;
	return 0;
}

/* Runs @line; prints the broker's error. Return: the answer (free() it), or NULL. */
static char *ask(const char *line)
{
	struct sl_err e = { 0 };
	char *resp;
	int r = netns_ctl_err(line, &resp, &e);

	if (r < 0 && sl_err_errno(&e) == 0) {
		fprintf(stderr, "sluice: %s\n", resp); /* the broker's, uncut */
		free(resp);
		return NULL;
	}
	if (r < 0) {
		fprintf(stderr, "sluice: %s\n", sl_err_msg(&e));
		return NULL;
	}
	return resp;
}

static void iso_time(uint64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, len, "-");
}

int cmd_pending(int argc, char **argv)
{
	const char *name = NULL;
	char line[200], *resp, *l, *save = NULL;
	bool json = false;
	int i, n = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!name && name_ok(argv[i]))
			name = argv[i];
		else
			goto usage;
	}
	snprintf(line, sizeof(line), CTL_PENDING "%s%s", name ? " " : "", name ? name : "");
	resp = ask(line);
	if (!resp)
		return 1;
	if (json)
		printf("[");
	for (l = strtok_r(resp, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char sb[128], host[256], method[32], path[512], when[32];
		char pw[24], fw[24], cw[24], hw[24];
		unsigned port, count, held;
		unsigned long long first;
		const char *end;

		if (sscanf(l, "%127s %255s %23s %31s %511s %23s %23s %23s", sb, host, pw, method,
			   path, fw, cw, hw) != 8 ||
		    !text_uint(pw, &port) || !text_ull(fw, 10, &end, &first) || *end ||
		    !text_uint(cw, &count) || !text_uint(hw, &held))
			continue;
		iso_time(first, when, sizeof(when));
		if (json) {
			printf("%s{\"sandbox\":", n ? "," : "");
			sl_json_print_string(stdout, sb);
			printf(",\"host\":");
			sl_json_print_string(stdout, host);
			printf(",\"port\":%u,\"method\":", port);
			if (strcmp(method, "-"))
				sl_json_print_string(stdout, method);
			else
				printf("null");
			printf(",\"path\":");
			if (strcmp(path, "-"))
				sl_json_print_string(stdout, path);
			else
				printf("null");
			printf(",\"first_seen\":\"%s\",\"count\":%u,\"held\":%u}", when, count,
			       held);
		} else {
			if (!n)
				printf("%-24s %-32s %-5s %-7s %-24s %-20s %5s %4s\n", "SANDBOX",
				       "HOST", "PORT", "METHOD", "PATH", "FIRST SEEN", "COUNT",
				       "HELD");
			printf("%-24s %-32s %-5u %-7s %-24s %-20s %5u %4u\n", sb, host, port,
			       method, path, when, count, held);
		}
		n++;
	}
	if (json)
		printf("]\n");
	else if (!n)
		printf("nothing pending\n");
	free(resp);
	return 0;
usage:
	fprintf(stderr, PENDING_USAGE);
	return 2;
}

int cmd_approve(int argc, char **argv)
{
	const char *name = NULL, *target = NULL, *for_text = NULL;
	char host[256], line[600], *resp;
	uint64_t secs = 0;
	uint16_t port;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--for") && i + 1 < argc) {
			for_text = argv[++i];
			if (parse_for(for_text, &secs) < 0) {
				fprintf(stderr,
					"sluice: bad duration `%.40s` for --for (write e.g. 30s, 15m, "
					"1h30m, 2d; at most 366d)\n",
					argv[i]);
				return 2;
			}
		} else if (!name && name_ok(argv[i])) {
			name = argv[i];
		} else if (!target && argv[i][0] != '-') {
			target = argv[i];
		} else {
			goto usage;
		}
	}
	if (!name || !target)
		goto usage;
	if (parse_target(target, host, sizeof(host), &port) < 0)
		return 1;
	snprintf(line, sizeof(line), CTL_APPROVE " %s %s %u %llu", name, host, port,
		 (unsigned long long)secs);
	resp = ask(line);
	if (!resp)
		return 1;
	/* The answer is the rule, as the policy file would say it. */
	if (port)
		printf("approved %s:%u in sandbox %s", host, port, name);
	else
		printf("approved %s (ports 80, 443) in sandbox %s", host, name);
	if (for_text)
		printf(" for %s", for_text);
	printf("; to keep it, add this under egress.allow in its policy file:\n%s", resp);
	free(resp);
	return 0;
usage:
	fprintf(stderr, APPROVE_USAGE);
	return 2;
}

int cmd_refuse(int argc, char **argv)
{
	char host[256], line[600], *resp;
	uint16_t port;

	if (argc != 3 || !name_ok(argv[1]) || argv[2][0] == '-') {
		fprintf(stderr, REFUSE_USAGE);
		return 2;
	}
	if (parse_target(argv[2], host, sizeof(host), &port) < 0)
		return 1;
	snprintf(line, sizeof(line), CTL_REFUSE " %s %s %u", argv[1], host, port);
	resp = ask(line);
	if (!resp)
		return 1;
	free(resp);
	return 0;
}

/*
 * The value of "@key" in the JSON object @line (a string unescaped as far
 * as a person reads it, or a number or null as written) into @out; "-"
 * when absent. Enough for the broker's own flat lines, not a parser.
 */
static void field(const char *line, const char *key, char *out, size_t len)
{
	char pat[64];
	const char *p;
	size_t o = 0;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(line, pat);
	if (!p || len < 2) {
		snprintf(out, len, "-");
		return;
	}
	p += strlen(pat);
	if (*p == '"') {
		for (p++; *p && *p != '"' && o + 1 < len; p++) {
			if (*p == '\\' && p[1])
				p++;
			out[o++] = *p;
		}
	} else {
		while (*p && *p != ',' && *p != '}' && o + 1 < len)
			out[o++] = *p++;
	}
	out[o] = '\0';
	/* The audit schema writes every key, null when it does not apply. */
	if (!strcmp(out, "null"))
		snprintf(out, len, "-");
}

/* One line of the stream, for a person. */
static void print_event(const char *l)
{
	char ev[32], time[40], sb[128], name[256], port[8], method[32], path[256], dec[16], why[64];

	field(l, "event", ev, sizeof(ev));
	field(l, "time", time, sizeof(time));
	field(l, "sandbox", sb, sizeof(sb));
	field(l, "name", name, sizeof(name));
	field(l, "dst_port", port, sizeof(port));
	if (!strcmp(port, "-"))
		field(l, "port", port,
		      sizeof(port)); /* a pending event, or an older broker's line */
	field(l, "method", method, sizeof(method));
	field(l, "path", path, sizeof(path));
	if (!strcmp(ev, "pending")) {
		field(l, "host", name, sizeof(name));
		printf("%s %s PENDING %s:%s %s %s  (sluice approve %s %s:%s | sluice refuse %s "
		       "%s:%s)\n",
		       time, sb, name, port, method, strcmp(path, "-") ? path : "", sb, name, port,
		       sb, name, port);
	} else if (!strcmp(ev, "decision")) {
		field(l, "decision", dec, sizeof(dec));
		field(l, "reason", why, sizeof(why));
		printf("%s %s %s %s %s:%s%s%s%s%s\n", time, sb, dec, why, name, port,
		       method[0] != '-' ? " " : "", method[0] != '-' ? method : "",
		       path[0] != '-' ? " " : "", path[0] != '-' ? path : "");
	} else {
		printf("%s", l);
	}
	fflush(stdout);
}

int cmd_watch(int argc, char **argv)
{
	struct timeval none = { 0 };
	bool json = argc == 2 && !strcmp(argv[1], "--json");
	char line[8192];
	FILE *f;
	int fd;

	if (argc > 2 || (argc == 2 && !json)) {
		fprintf(stderr, "usage: sluice watch [--json]\n");
		return 2;
	}
	fd = netns_ctl_send(CTL_WATCH);
	if (fd < 0) {
		fprintf(stderr, "sluice: cannot reach sluiced at %s: %s\n", netns_socket_path,
			strerror(-fd));
		return 1;
	}
	/* A stream: it may be quiet for as long as the sandboxes are. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return 1;
	}
	if (!fgets(line, sizeof(line), f) || strcmp(line, CTL_OK)) {
		const char *msg = strncmp(line, CTL_ERR, strlen(CTL_ERR)) ? "no answer"
									  : line + strlen(CTL_ERR);

		fprintf(stderr, "sluice: %s%s", msg, strchr(msg, '\n') ? "" : "\n");
		fclose(f);
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		if (json) {
			fputs(line, stdout);
			fflush(stdout);
		} else {
			print_event(line);
		}
		if (strstr(line, "{\"event\":\"dropped\"")) {
			fprintf(stderr,
				"sluice: the broker dropped this watcher: it read too slowly\n");
			fclose(f);
			return 1;
		}
	}
	fclose(f);
	return 0;
}
