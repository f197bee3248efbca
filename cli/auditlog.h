/* SPDX-License-Identifier: MIT */
/* Reading the broker's audit log (JSON lines, broker/audit.c) after the
 * fact: the reader `sluice report` and `sluice policy suggest` share, and
 * the aggregations behind each.
 *
 * A header of its own, not netns.h: this is CLI code that needs no broker
 * and no namespace, and it moves to cli/ with the re-lay (DESIGN.md,
 * "Modules") without taking the netns library's header with it.
 *
 * Every field of an audit line may come from a hostile sandbox (a Host
 * header, an SNI, a DNS name, a path): the reader bounds each string,
 * never trusts it to be a host name, and the printers escape what they
 * print. */
#ifndef SLUICE_CLI_AUDITLOG_H
#define SLUICE_CLI_AUDITLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Longest audit line read; the broker writes less than 4096 bytes. A
 * longer line is not the broker's: it is skipped and counted. */
#define AUDITLOG_LINE_MAX 16384

/**
 * struct auditlog_rec - the fields of one audit line that the readers use
 *
 * Strings are unescaped, NUL-terminated and cut to their buffer; a string
 * that held a NUL or did not fit sets @suspect (its name is then never
 * taken for a host name). Absent or null strings are "", absent or null
 * numbers 0.
 *
 * @addr and @port are the destination's ("dst_addr", "dst_port"), @src_addr
 * and @src_port the client's. A line of a broker before the fixed schema
 * had "addr" and "port" instead, the client's in a line without a sandbox
 * (unknown-source) and the destination's in any other: read so.
 */
struct auditlog_rec {
	int64_t t_ms; /* the line's "time", ms since the epoch */
	char time[40];
	char sandbox[129];
	char proto[17];
	char name[300];
	char target[300]; /* as the client wrote it; never taken for a host name */
	char addr[64];
	char src_addr[64];
	uint16_t src_port;
	char decision[17];
	char reason[65];
	char credential[129];
	uint16_t port;
	uint64_t bytes_up, bytes_down;
	uint64_t repeated, dropped;
	bool suspect;
};

/**
 * cli_auditlog_parse() - read one audit line
 * @s:   the line, without its newline; untrusted
 * @len: its length
 * @r:   filled on success
 *
 * The line must be one JSON object with a "time" this reader understands
 * (RFC 3339). Unknown keys are skipped (the broker adds keys over time).
 *
 * Return: 0, or -EINVAL for a line that is not an audit line.
 */
int cli_auditlog_parse(const char *s, size_t len, struct auditlog_rec *r);

/**
 * cli_auditlog_time() - parse an RFC 3339 time
 * @s:  "2026-12-01T21:00:00Z", with an optional fraction and a Z or
 *      +HH:MM / -HH:MM offset ('t' and 'z' accepted as well)
 * @ms: milliseconds since the epoch
 *
 * Return: 0 or -EINVAL.
 */
int cli_auditlog_time(const char *s, int64_t *ms);

/**
 * cli_auditlog_since() - the start of a --since window
 * @arg:    an RFC 3339 time, or a duration back from @now_ms: a sequence
 *          of NUMBER UNIT with units s, m, h, d ("90s", "1h30m", "2d")
 * @now_ms: the present, ms since the epoch
 * @ms:     the window's start
 *
 * Return: 0 or -EINVAL.
 */
int cli_auditlog_since(const char *arg, int64_t now_ms, int64_t *ms);

/* What a pass over the files saw, for the "skipped" note on stderr. */
struct auditlog_stats {
	uint64_t lines;	   /* lines read */
	uint64_t skipped;  /* not audit lines (malformed, too long) */
	uint64_t filtered; /* audit lines outside --sandbox / --since */
};

struct auditlog_filter {
	const char *sandbox; /* NULL: every sandbox */
	int64_t since_ms;    /* INT64_MIN: from the start */
};

/**
 * cli_auditlog_read() - feed each audit line of @f that passes @flt to @fn
 * @f:    an open file; read to its end
 * @flt:  the filter
 * @fn:   called with each kept line; a non-zero return stops the pass
 * @ctx:  passed to @fn
 * @st:   counts added to
 *
 * Return: 0, @fn's non-zero return, or -errno of a read error.
 */
int cli_auditlog_read(FILE *f, const struct auditlog_filter *flt,
		      int (*fn)(const struct auditlog_rec *r, void *ctx), void *ctx,
		      struct auditlog_stats *st);

/* Writes @s for a person's terminal: printable ASCII as is, every other
 * byte (and a backslash) as \xHH, so that no name can move the cursor, end
 * a line or a YAML comment. At most @max bytes of @s. */
void cli_auditlog_put_safe(FILE *out, const char *s, size_t max);

/* --- sluice policy suggest --------------------------------------------------- */

struct suggest;

/* Return: an empty aggregation, or NULL (ENOMEM). */
struct suggest *cli_suggest_new(void);
void cli_suggest_free(struct suggest *s); /* accepts NULL */

/* Counts one audit line; never fails the caller (a full table is counted). */
void cli_suggest_add(struct suggest *s, const struct auditlog_rec *r);

/**
 * cli_suggest_print() - write the suggested policy
 * @s:         the aggregation
 * @wildcards: 0 for exact names only; else N: N or more names one label
 *             under one suffix become one `*.suffix` rule (never over a
 *             suffix of one label or a known public suffix)
 * @out:       where to write (YAML that `sluice policy check` accepts)
 *
 * Return: the number of rules written, or -errno.
 */
int cli_suggest_print(struct suggest *s, unsigned wildcards, FILE *out);

/* Is @suffix (a name without "*.") too public to put a wildcard over? */
bool cli_suggest_public_suffix(const char *suffix);

/* --- sluice report -------------------------------------------------------- */

struct report;

struct report *cli_report_new(void);
void cli_report_free(struct report *r); /* accepts NULL */
void cli_report_add(struct report *r, const struct auditlog_rec *rec);

/* The per-sandbox figures the tests and the printers read. */
struct report_totals {
	uint64_t requests, bytes_up, bytes_down;
	uint64_t refused;
	uint64_t dns_answered, dns_refused;
	uint64_t hosts;
};

/* Totals for @sandbox; -ENOENT when it has no line. */
int cli_report_totals(const struct report *r, const char *sandbox, struct report_totals *t);

/* Requests and bytes to HOST:PORT in @sandbox (0s when never seen). */
void cli_report_host(const struct report *r, const char *sandbox, const char *host, uint16_t port,
		     uint64_t *requests, uint64_t *up, uint64_t *down);

/* Refusals of @reason (NULL: any) for @host (NULL: any) in @sandbox. */
uint64_t cli_report_refused(const struct report *r, const char *sandbox, const char *reason,
			    const char *host);

/* Writes the report as tables (@json false) or one JSON document. */
int cli_report_print(const struct report *r, bool json, const struct auditlog_stats *st, FILE *out);

int cmd_report(int argc, char **argv);
int cmd_policy_suggest(int argc, char **argv);

#endif
