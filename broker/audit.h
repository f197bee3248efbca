/* SPDX-License-Identifier: MIT */
/* Audit log: one JSON line per broker decision, written from any worker thread.
 */
#ifndef SLUICE_BROKER_AUDIT_H
#define SLUICE_BROKER_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_addr;
struct sl_err;

/*
 * Secrets never reach the audit log: struct audit_event has no field that
 * could hold one. A credential is named (@credential is the policy's
 * `name:`), never shown; @path and @target are cut at the first '?' or
 * '#' by audit_log() itself, because query strings can carry
 * placeholders, and @target loses a URL's userinfo ("user:pass@") too.
 * Callers must not put secret material into any other field.
 *
 * The schema is fixed (docs/audit.schema.json, README "Audit log"): every
 * line has every key, in one order, and a field that is NULL (a string,
 * an address) or 0 (a port, a status) is written as JSON null, so that a
 * reader never has to guess whether a key was left out or never existed.
 *
 * Every string comes out JSON-escaped: '"' and '\' escaped, control bytes
 * and DEL as \u00XX, valid multi-byte UTF-8 kept, anything that is not valid
 * UTF-8 replaced by \ufffd (names come from untrusted clients). Each field
 * is cut, on a character boundary, to a bound of escaped bytes, so that a
 * whole line is always shorter than AUDIT_LINE_MAX.
 */

/* A line, newline included, is always shorter than this (and than PIPE_BUF,
 * so that a line written to a pipe is never split). */
#define AUDIT_LINE_MAX 4096
/* Escaped-byte bound of the longest string fields (name, rule, path, DNS
 * answer); the short ones (sandbox, reason, credential, ...) get less. */
#define AUDIT_FIELD_MAX 512

struct audit_event {
	const char *sandbox;
	const char *proto; /* "http", "connect", "tls", "tcp", "dns", "control" */
	const char *name;  /* the destination's name, as the broker judged it */
	/* The destination as the client wrote it, before any parsing: the
	 * request-line target, CONNECT authority, Host, SNI, DNS question
	 * name, or the address a transparent connection was made to. Every
	 * refusal that read anything from the client carries it. */
	const char *target;
	/* The client (sandbox side) as the broker saw it; NULL/0: not known. */
	const struct sl_addr *src_addr;
	uint16_t src_port;
	/* The destination: the address connected to (or refused); NULL/0:
	 * none (not resolved, or not a connection). */
	const struct sl_addr *dst_addr;
	uint16_t dst_port;
	const char *decision; /* "allow" | "deny" | "error" | SL_DECISION_WOULD_DENY */
	const char *reason;
	const char *rule;
	const char *credential; /* its name only */
	const char *method;
	const char *path; /* request path; anything from '?' on is dropped */
	const char *dns_type;
	const char *dns_answer;
	uint64_t bytes_up, bytes_down;
	uint64_t duration_ms;
	int status; /* HTTP status sent, 0 = none */
	/* A control socket caller (proto "control"), written as "pid" and
	 * "uid" when @has_peer: who asked, as the kernel vouches for it. */
	bool has_peer;
	uint32_t peer_pid, peer_uid;
	/* `sluice update` (reason "policy-update"): the policy files before
	 * and after, and the SHA-256 (hex) of what was compiled from each;
	 * written as "old_policy", "old_sha256", "new_policy", "new_sha256". */
	const char *old_policy, *old_sha256;
	const char *new_policy, *new_sha256;
	/* "audit" for a sandbox in audit mode, written as "mode"; NULL (null)
	 * in enforce mode. */
	const char *mode;
};

/**
 * audit_open() - choose where audit lines go
 * @target: "-" for stderr, else a file path, opened
 *          O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC|O_NONBLOCK, mode 0640
 * @err:    filled with a message naming @target on failure (may be NULL)
 *
 * May be called again to switch targets; lines already in flight in other
 * threads finish on the old target. Until the first audit_open(), lines go
 * to stderr.
 *
 * Return: 0, or a negative errno (the previous target stays in use).
 */
int audit_open(const char *target, struct sl_err *err);

/**
 * audit_reopen() - reopen the current target, for log rotation (SIGHUP)
 *
 * The file descriptor number does not change (the new file is dup3()'d onto
 * it), so threads writing at that moment need no lock.
 *
 * Return: 0, or a negative errno (the old file stays in use).
 */
int audit_reopen(void);

/**
 * audit_close() - stop writing audit lines
 *
 * For shutdown, after the worker threads have stopped: a thread still in
 * audit_log() could otherwise write to a reused descriptor number. Counts
 * not yet written ("repeated", "dropped") are written first, whatever their
 * interval. Later lines are dropped and counted as write failures.
 */
void audit_close(void);

/*
 * Refusals are folded and bounded per source, so that a sandbox cannot fill
 * the disk (and silence the log) with cheap refused requests. A source is
 * the sandbox (@sandbox); events without one share one source. Allowed
 * decisions (@decision "allow") are never folded, bounded or dropped.
 *
 * Kind: same source, @proto, @decision, @reason, @name, @dns_answer,
 * @dst_port, @target when there is no @name (the raw target is then all
 * that tells attempts apart), and for events without a sandbox @src_addr
 * (the only name such a source has). Not @dns_type: a resolver asks A and
 * AAAA in turn. A "repeated" line carries the kind's fields; the others
 * (a named kind's target among them) are null.
 * The first event of a kind is written whole. Each following event of the
 * same kind from that source, within AUDIT_REPEAT_MS of the first, is only
 * counted; the count is written as one more line of that kind carrying
 * "repeated":N when the interval ends or when the source's next refusal is
 * of another kind. Only the source's latest kind is held: refusals of two
 * kinds in turn are all written (and bounded by the rate below).
 *
 * Rate: written refusal lines (first lines and "repeated" lines) take a
 * token from the source's bucket, AUDIT_REFUSAL_RATE a second, burst
 * AUDIT_REFUSAL_BURST. Without a token the event is dropped and counted;
 * one line per source and interval says how many:
 *   {"time":...,"sandbox":S,...,"decision":"deny","reason":"audit-rate-limited",
 *    ...,"dropped":N}   (every other key null)
 * (written when AUDIT_REPEAT_MS have passed since the first drop). So every
 * refusal is a line of its own, or in the "repeated" of a line, or in the
 * "dropped" of a line (once the broker has stopped, or its interval ended).
 */
#define AUDIT_REPEAT_MS 10000
#define AUDIT_REFUSAL_RATE 20
#define AUDIT_REFUSAL_BURST 200

/**
 * audit_log() - write one decision as one JSON line
 * @ev: the decision; NULL and 0 fields are written as null, except
 *      bytes_up, bytes_down, duration_ms, which are numbers (0 included)
 *      when @ev->proto names a connection (http, connect, tls, tcp) and the
 *      line is not a count ("repeated", "dropped")
 *
 * The line goes out in one write(2) (a regular file's in a batch of whole
 * lines, see audit_defer()), so lines from several threads never
 * interleave. It never blocks on a full pipe or socket and never fails the
 * caller: a failed or short write is counted (audit_write_failures()) and
 * the broker goes on. The process is expected to ignore SIGPIPE.
 *
 * A refusal (any @ev->decision but "allow") may be folded or dropped
 * instead, see above.
 */
void audit_log(const struct audit_event *ev);

/**
 * audit_defer() - let this thread's lines wait for audit_flush()
 * @on: true from now on, false to stop (what is held is written first)
 *
 * Where the target is a regular file, the lines of a thread that defers
 * go to one buffer shared by every thread, in the order they were logged,
 * and out in one write(2) per batch: a worker calls audit_flush() before
 * its loop waits (loop_set_idle()), so a line waits at most for the rest
 * of the loop iteration that logged it (and never longer than
 * AUDIT_FLUSH_MS, nor once the buffer is near full). Lines of a thread that
 * does not defer, and of any thread when the target is not a regular file,
 * go out at once, after what the buffer holds. audit_open(), audit_reopen()
 * and audit_close() write the buffer out first: a reload or a clean exit
 * loses no line and moves none to the other file.
 */
void audit_defer(bool on);

/**
 * audit_flush() - write out the lines held for audit_defer()
 *
 * Safe from any thread, in order with every other writer. Never fails the
 * caller: a failed or short write counts its lines in audit_write_failures().
 */
void audit_flush(void);

/* How long a deferred line may wait for a flush, at the most. */
#define AUDIT_FLUSH_MS 50

/**
 * audit_tick() - write the "repeated" and "dropped" lines whose interval
 * has ended, and forget sources idle for an interval
 *
 * Call it about once a second (the broker's main loop does); audit_log()
 * alone writes them only when the source refuses again. It also reopens
 * the audit file when its path no longer leads to the file open (deleted,
 * or rotated without a SIGHUP), and logs that it did.
 */
void audit_tick(void);

/**
 * audit_set_fold() - the window in which repeats of a refusal are folded
 * @ms: milliseconds (AUDIT_REPEAT_MS by default); 0 writes every refusal
 *      on its own line (the per-sandbox rate bound still applies)
 */
void audit_set_fold(uint32_t ms);

/* Refusals counted in a "repeated" field, and dropped over a source's rate,
 * since start. Atomic. */
uint64_t audit_refusals_folded(void);
uint64_t audit_refusals_dropped(void);

/**
 * audit_set_clock() - the clock that intervals and buckets use (tests)
 * @now_ms: a monotonic clock in milliseconds; NULL: CLOCK_MONOTONIC
 *
 * Call it before any thread logs; it also forgets every source.
 */
void audit_set_clock(uint64_t (*now_ms)(void));

/**
 * audit_format() - the line audit_log() would write, without writing it
 * @ev:  the decision
 * @buf: output, at least AUDIT_LINE_MAX bytes
 * @len: size of @buf
 *
 * Return: length of the line (its '\n' included, NUL not counted), or
 * -ENOSPC when @len is smaller than AUDIT_LINE_MAX.
 */
int audit_format(const struct audit_event *ev, char *buf, size_t len);

/*
 * audit_target_userinfo() - where a target's userinfo is
 *
 * In @len bytes at @t: *@a is where the authority begins (after
 * "scheme://", else 0); the return value is just past the last '@' before
 * the authority's end (its first '/'), or *@a when it has none.
 */
size_t audit_target_userinfo(const char *t, size_t len, size_t *a);

/* broker/watch.c: a decision for `sluice watch` (nothing when nobody watches). */
void watch_audit(const struct audit_event *ev);

/* Lines lost since start: failed or short writes, or no target. Atomic. */
uint64_t audit_write_failures(void);

#endif
