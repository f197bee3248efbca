// SPDX-License-Identifier: MIT
/* Audit log: one JSON line per broker decision, written from any worker thread.
 *
 * Theory of operation: the target is one file descriptor number, kept in an
 * atomic and never changed while the broker runs. A line is formatted on
 * the caller's stack, bounded below AUDIT_LINE_MAX, and written with one
 * write(2): O_APPEND makes that atomic for files, and a line shorter than
 * PIPE_BUF is atomic for pipes, so threads need no lock to keep lines whole.
 * Rotation (audit_reopen) and a new target (audit_open) open the new file
 * and dup3() it onto the same number, so a thread that loaded the number a
 * moment before writes to either the old or the new file, never to some
 * unrelated descriptor. Only open/reopen/close take a mutex.
 *
 * Nothing here may stall a worker: targets are opened O_NONBLOCK where that
 * is per-target (files, and pipes and terminals reopened through
 * /proc/self/fd/2), sockets get MSG_DONTWAIT, and a write that fails or
 * comes up short is counted and dropped, never retried (a retry could
 * interleave with another thread's line).
 *
 * Batches: where the target is a regular file, a line of a thread that
 * defers (audit_defer(), the proxy workers) is appended to one buffer under
 * batch_lock, and the buffer goes out in one write(2) when that thread's
 * loop is about to wait (audit_flush()), when it is near full, or when its
 * oldest line is AUDIT_FLUSH_MS old; other threads' lines are appended too,
 * then flushed at once, so that the file keeps the order lines were logged
 * in. Two buffers: a flush swaps them under batch_lock and writes under
 * flush_lock, which orders the writes (a later batch never overtakes an
 * earlier one) without making appenders wait for the disk. A file takes a
 * write of any length whole (O_APPEND); pipes and sockets keep one write
 * per line, the atomic unit there. open/reopen/close flush under
 * flush_lock before they switch, so no line is lost or goes to the other
 * file. A crash loses what the buffer holds: at most one loop iteration's
 * lines, or AUDIT_FLUSH_MS of them. A batch that goes out short (a full
 * disk) is cut back to its last whole line (write_batch()), so that a line
 * is in the file whole or not at all, and the rest is counted as lost.
 * audit_tick() reopens a file deleted or replaced under the broker.
 *
 * Refusals (see audit.h) go through a table of sources, each with its
 * latest kind, the count of its repeats, a token bucket and a count of
 * drops, under one mutex (agg_lock). Their lines are written under that
 * mutex too, so that a "repeated" line never comes before the line it
 * counts for; allowed decisions never take it. The table is bounded
 * (AGG_SOURCES); a source idle for an interval with nothing to write is
 * forgotten, and when every slot is busy the rest share one more.
 */
#include "broker/audit.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "broker/creds/creds.h"
#include "common/addr.h"
#include "common/err.h"
#include "common/json.h"
#include "common/log.h"
#include "common/reason.h"

/* audit_fd values besides a real descriptor. */
#define AUDIT_FD_DEFAULT (-1) /* never opened: plain stderr */
#define AUDIT_FD_CLOSED (-2)  /* audit_close(): drop lines */

enum audit_sink {
	AUDIT_SINK_WRITE, /* file, pipe, terminal: write(2) */
	AUDIT_SINK_SEND,  /* socket shared with stderr: send(MSG_DONTWAIT) */
};

/*
 * The sink is process-wide on purpose, not a member of struct broker: the
 * broker has one audit log (audit_log, or stderr), every thread writes to
 * it (each worker, the main thread, from deep in the proxy, the DNS
 * filter, the sandbox table and the control handler), and its lines are
 * batched and folded across all of them, which is what one log needs. An
 * object passed around would be this one instance reached through more
 * pointers; its state here is atomics and locks of its own, set up by
 * audit_open() before the workers start.
 */
static atomic_int audit_fd = AUDIT_FD_DEFAULT;
static atomic_int audit_kind = AUDIT_SINK_WRITE;
static atomic_uint_fast64_t audit_failures;
static atomic_bool audit_warned;
static atomic_bool audit_on_stderr = true;

/* Held by open/reopen/close only, never by audit_log(). */
static pthread_mutex_t audit_lock = PTHREAD_MUTEX_INITIALIZER;
static char *audit_target; /* under audit_lock */

/*
 * Escaped-byte bound of each string field. Names are at most 253 bytes in
 * DNS but a Host header or SNI may be longer garbage; the short fields come
 * from our own tables or from policy names.
 */
enum {
	CAP_SANDBOX = 128,
	CAP_PROTO = 16,
	CAP_NAME = AUDIT_FIELD_MAX,
	CAP_DECISION = 16,
	CAP_REASON = 64,
	CAP_RULE = AUDIT_FIELD_MAX,
	CAP_CREDENTIAL = 128,
	CAP_METHOD = 32,
	/* The proxy keeps at most 255 bytes of a path; the whole request
	 * target is in "target". */
	CAP_PATH = 256,
	CAP_TARGET = AUDIT_FIELD_MAX,
	CAP_DNS_TYPE = 16,
	CAP_DNS_ANSWER = AUDIT_FIELD_MAX,
	/* Policy paths of an update: the broker takes at most 255 bytes. */
	CAP_POLICY = 256,
	CAP_SHA256 = 72,
	CAP_MODE = 16,
	CAPS_TOTAL = CAP_SANDBOX + CAP_PROTO + CAP_NAME + CAP_TARGET + CAP_DECISION + CAP_REASON +
		     CAP_RULE + CAP_CREDENTIAL + CAP_METHOD + CAP_PATH + CAP_DNS_TYPE +
		     CAP_DNS_ANSWER + 2 * (CAP_POLICY + CAP_SHA256) + CAP_MODE,
	/* The 30 keys with their quotes, colons and commas (334 bytes), the
	 * quotes of 20 strings (40), the time (28), two addresses
	 * (2 * ADDR_STRLEN), ten numbers of at most 20 digits (200), "{}\n":
	 * 697 bytes. test_audit's line with every field at its bound checks
	 * it. */
	LINE_OVERHEAD = 712,
};
_Static_assert(CAPS_TOTAL + LINE_OVERHEAD < AUDIT_LINE_MAX,
	       "an audit line with every field at its bound fits AUDIT_LINE_MAX");
_Static_assert(AUDIT_LINE_MAX <= 4096, "a line stays within PIPE_BUF");

/* A bounded line under construction; ->overflow sticks once set. */
struct line {
	char *buf;
	size_t len, pos;
	bool overflow;
};

static void put_raw(struct line *l, const char *s, size_t n)
{
	if (l->overflow || n >= l->len - l->pos) {
		l->overflow = true;
		return;
	}
	memcpy(l->buf + l->pos, s, n);
	l->pos += n;
	l->buf[l->pos] = '\0';
}

static void put_key(struct line *l, const char *key)
{
	put_raw(l, ",\"", 2);
	put_raw(l, key, strlen(key));
	put_raw(l, "\":", 2);
}

/*
 * The digits of anything shaped like a placeholder ("sluice-ph-" and hex,
 * whole or cut short by a bound) as "***": a sandbox's placeholder never
 * reaches the log, in whatever field it wrote it (a path, a Host header, an
 * SNI, a CONNECT authority). Writes at most 2 * @n bytes to @out. Return:
 * the bytes written.
 */
static size_t mask_placeholders(const char *s, size_t n, char *out)
{
	const char *p = s, *end = s + n, *q;
	size_t o = 0, k;

	while ((q = memmem(p, (size_t)(end - p), CREDS_PLACEHOLDER_PREFIX,
			   CREDS_PLACEHOLDER_PREFIX_LEN))) {
		q += CREDS_PLACEHOLDER_PREFIX_LEN;
		memcpy(out + o, p, (size_t)(q - p));
		o += (size_t)(q - p);
		for (k = 0; q + k < end && isxdigit((unsigned char)q[k]); k++)
			;
		if (k) {
			memset(out + o, '*', 3);
			o += 3;
		}
		p = q + k;
	}
	memcpy(out + o, p, (size_t)(end - p));
	return o + (size_t)(end - p);
}

static void put_strn(struct line *l, const char *key, const char *val, size_t vlen, size_t cap)
{
	/* "sluice-ph-" and one digit (11 bytes) become 13: under twice. */
	char masked[2 * AUDIT_FIELD_MAX];
	size_t room;

	/* Escaping only lengthens it: no byte past @cap is shown. */
	if (vlen > cap)
		vlen = cap;
	if (memmem(val, vlen, CREDS_PLACEHOLDER_PREFIX, CREDS_PLACEHOLDER_PREFIX_LEN)) {
		vlen = mask_placeholders(val, vlen, masked);
		val = masked;
	}
	put_key(l, key);
	put_raw(l, "\"", 1);
	if (l->overflow)
		return;
	room = l->len - l->pos;
	if (room > cap + 1)
		room = cap + 1;
	l->pos += sl_json_escape(l->buf + l->pos, room, val, vlen);
	put_raw(l, "\"", 1);
}

static void put_null(struct line *l, const char *key)
{
	put_key(l, key);
	put_raw(l, "null", 4);
}

/* null when @val is NULL: every line has every key. */
static void put_str(struct line *l, const char *key, const char *val, size_t cap)
{
	if (val)
		put_strn(l, key, val, strlen(val), cap);
	else
		put_null(l, key);
}

/* Decimal digits, without printf: a line has up to eight numbers. */
static void put_dec(struct line *l, uint64_t v)
{
	char num[24];
	size_t i = sizeof(num);

	do {
		num[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put_raw(l, num + i, sizeof(num) - i);
}

static void put_u64(struct line *l, const char *key, uint64_t v)
{
	put_key(l, key);
	put_dec(l, v);
}

/* A number, or null when @known is false. */
static void put_u64_if(struct line *l, const char *key, bool known, uint64_t v)
{
	if (known)
		put_u64(l, key, v);
	else
		put_null(l, key);
}

static void put_addr(struct line *l, const char *key, const struct sl_addr *a)
{
	char tmp[64];

	if (!a) {
		put_null(l, key);
		return;
	}
	addr_format(a, tmp, sizeof(tmp));
	put_str(l, key, tmp, ADDR_STRLEN);
}

size_t audit_target_userinfo(const char *t, size_t len, size_t *a)
{
	const char *sep = memmem(t, len, "://", 3), *slash = memchr(t, '/', len);
	size_t e, at;

	*a = 0;
	/* A scheme only before the first '/' ("/x?u=http://..." has none). */
	if (sep && slash == sep + 1)
		*a = (size_t)(sep - t) + 3;
	/* The authority ends at a '/' only: a '?' or '#' before the last '@'
	 * is in the userinfo as the client wrote it, not a query. */
	e = *a;
	while (e < len && t[e] != '/')
		e++;
	for (at = e; at > *a && t[at - 1] != '@'; at--)
		;
	return at;
}

/* Appends @n bytes of @s to @buf (@o bytes so far), up to @cap in all. */
static void append_cut(char *buf, size_t *o, size_t cap, const char *s, size_t n)
{
	if (*o >= cap)
		return;
	if (n > cap - *o)
		n = cap - *o;
	memcpy(buf + *o, s, n);
	*o += n;
}

/*
 * put_target() - the raw target, without what may carry a secret
 *
 * A URL's userinfo ("user:pass@" after "scheme://", or before the host of an
 * authority) left out, found on the whole target (a '?' or '#' inside a
 * password does not end it, nor does the field's bound); then cut at the
 * first '?' or '#' (a query string can carry a placeholder, as for "path").
 * The rest is as the client wrote it, escaped and bounded like any string
 * (put_strn() masks a placeholder's digits).
 */
static void put_target(struct line *l, const char *t)
{
	char tmp[CAP_TARGET];
	size_t len, a, at, o = 0;

	if (!t) {
		put_null(l, "target");
		return;
	}
	len = strlen(t);
	at = audit_target_userinfo(t, len, &a);
	append_cut(tmp, &o, sizeof(tmp), t, a);
	if (at > a) /* userinfo from a to at-1: dropped with its '@' */
		append_cut(tmp, &o, sizeof(tmp), "***@", 4);
	append_cut(tmp, &o, sizeof(tmp), t + at, strcspn(t + at, "?#"));
	put_strn(l, "target", tmp, o, CAP_TARGET);
}

/*
 * put_time() - the line's start, {"time":"YYYY-MM-DDTHH:MM:SS.mmmZ"
 *
 * The part up to the second is formatted once a second per thread (gmtime
 * and printf were a tenth of what a line cost), the milliseconds each time.
 */
static void put_time(struct line *l, const struct timespec *ts)
{
	static __thread time_t sec = -1;
	static __thread char head[64];
	static __thread size_t head_len;
	long ms = ts->tv_nsec / 1000000;
	char tail[6];

	if (ts->tv_sec != sec) {
		struct tm tm;
		int n;

		gmtime_r(&ts->tv_sec, &tm);
		n = snprintf(head, sizeof(head), "{\"time\":\"%04d-%02d-%02dT%02d:%02d:%02d.",
			     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			     tm.tm_sec);
		head_len = n < 0 ? 0 : (size_t)n < sizeof(head) ? (size_t)n : sizeof(head) - 1;
		sec = ts->tv_sec;
	}
	put_raw(l, head, head_len);
	tail[0] = (char)('0' + ms / 100);
	tail[1] = (char)('0' + ms / 10 % 10);
	tail[2] = (char)('0' + ms % 10);
	tail[3] = 'Z';
	tail[4] = '"';
	put_raw(l, tail, 5);
}

static bool proto_is_connection(const char *proto)
{
	static const char *const conn[] = { "http", "connect", "tls", "tcp" };
	size_t i;

	if (!proto)
		return false;
	for (i = 0; i < sizeof(conn) / sizeof(conn[0]); i++)
		if (!strcmp(proto, conn[i]))
			return true;
	return false;
}

/* audit_format(), plus the folding counts when not 0 (see audit.h). */
static int format_line(const struct audit_event *ev, uint64_t repeated, uint64_t dropped, char *buf,
		       size_t len)
{
	struct line l = { .buf = buf, .len = len };
	struct timespec ts;
	char tmp[64];
	bool conn;
	int n;

	/* The keys and their order are the schema (docs/audit.schema.json):
	 * a key added here goes there and into README's table too. */
	if (len < AUDIT_LINE_MAX)
		return -ENOSPC;
	clock_gettime(CLOCK_REALTIME, &ts);
	put_time(&l, &ts);

	put_str(&l, "sandbox", ev->sandbox, CAP_SANDBOX);
	put_str(&l, "proto", ev->proto, CAP_PROTO);
	put_str(&l, "name", ev->name, CAP_NAME);
	put_target(&l, ev->target);
	put_addr(&l, "src_addr", ev->src_addr);
	put_u64_if(&l, "src_port", ev->src_port, ev->src_port);
	put_addr(&l, "dst_addr", ev->dst_addr);
	put_u64_if(&l, "dst_port", ev->dst_port, ev->dst_port);
	put_str(&l, "decision", ev->decision, CAP_DECISION);
	put_str(&l, "reason", ev->reason, CAP_REASON);
	put_str(&l, "mode", ev->mode, CAP_MODE);
	put_str(&l, "rule", ev->rule, CAP_RULE);
	put_str(&l, "credential", ev->credential, CAP_CREDENTIAL);
	put_str(&l, "method", ev->method, CAP_METHOD);
	if (ev->path)
		/* The query string can carry a placeholder: never log it. */
		put_strn(&l, "path", ev->path, strcspn(ev->path, "?#"), CAP_PATH);
	else
		put_null(&l, "path");
	if (ev->status > 0) {
		put_u64(&l, "status", (uint64_t)ev->status);
	} else if (ev->status) {
		put_key(&l, "status");
		n = snprintf(tmp, sizeof(tmp), "%d", ev->status);
		put_raw(&l, tmp, (size_t)n);
	} else {
		put_null(&l, "status");
	}
	put_str(&l, "dns_type", ev->dns_type, CAP_DNS_TYPE);
	put_str(&l, "dns_answer", ev->dns_answer, CAP_DNS_ANSWER);
	put_u64_if(&l, "pid", ev->has_peer, ev->peer_pid);
	put_u64_if(&l, "uid", ev->has_peer, ev->peer_uid);
	put_str(&l, "old_policy", ev->old_policy, CAP_POLICY);
	put_str(&l, "old_sha256", ev->old_sha256, CAP_SHA256);
	put_str(&l, "new_policy", ev->new_policy, CAP_POLICY);
	put_str(&l, "new_sha256", ev->new_sha256, CAP_SHA256);
	/* A count line stands for refusals, not for one connection. */
	conn = proto_is_connection(ev->proto) && !repeated && !dropped;
	put_u64_if(&l, "bytes_up", conn || ev->bytes_up, ev->bytes_up);
	put_u64_if(&l, "bytes_down", conn || ev->bytes_down, ev->bytes_down);
	put_u64_if(&l, "duration_ms", conn || ev->duration_ms, ev->duration_ms);
	put_u64_if(&l, "repeated", repeated, repeated);
	put_u64_if(&l, "dropped", dropped, dropped);
	put_raw(&l, "}\n", 2);

	/* The caps above make this unreachable; never emit half a line. */
	if (l.overflow)
		return -ENOSPC;
	return (int)l.pos;
}

int audit_format(const struct audit_event *ev, char *buf, size_t len)
{
	return format_line(ev, 0, 0, buf, len);
}

/* Counts @n lines lost, and warns once (see below). */
static void count_failures(uint64_t n, int err)
{
	atomic_fetch_add_explicit(&audit_failures, n, memory_order_relaxed);
	/*
	 * Say it once, so that an operator who reads the logs knows; the
	 * count is in the metrics. Not when the audit target is stderr itself:
	 * the log write would block on the same full pipe.
	 */
	if (!atomic_load_explicit(&audit_on_stderr, memory_order_relaxed) &&
	    !atomic_exchange_explicit(&audit_warned, true, memory_order_relaxed))
		log_warn("audit: a line could not be written (%s); "
			 "further losses are only counted",
			 err ? strerror(err) : "short write");
}

static void count_failure(int err)
{
	count_failures(1, err);
}

/* Writes one formatted line (or counts why not); never blocks. */
static void write_line(const char *buf, int len)
{
	int fd, kind, tries, err = 0;
	ssize_t n = -1;

	fd = atomic_load_explicit(&audit_fd, memory_order_acquire);
	kind = atomic_load_explicit(&audit_kind, memory_order_relaxed);
	if (fd == AUDIT_FD_CLOSED) {
		/* Shutting down: counted, not worth a warning. */
		atomic_fetch_add_explicit(&audit_failures, 1, memory_order_relaxed);
		return;
	}
	if (len < 0) {
		count_failure(-len);
		return;
	}
	if (fd == AUDIT_FD_DEFAULT) {
		fd = STDERR_FILENO;
		kind = AUDIT_SINK_WRITE;
	}
	/* EINTR before any byte went out is safe to retry; nothing else is. */
	for (tries = 0; tries < 3; tries++) {
		if (kind == AUDIT_SINK_SEND)
			n = send(fd, buf, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL);
		else
			n = write(fd, buf, (size_t)len);
		if (n >= 0)
			break;
		err = errno;
		if (err == ENOTSOCK && kind == AUDIT_SINK_SEND) {
			/* Target switched under us (audit_open): fine. */
			kind = AUDIT_SINK_WRITE;
			continue;
		}
		if (err != EINTR)
			break;
	}
	if (n != len)
		count_failure(n < 0 ? err : 0);
}

/* --- batches (audit_defer) ------------------------------------------------ */

#define BATCH_CAP (64 * 1024)
_Static_assert(BATCH_CAP >= 4 * AUDIT_LINE_MAX, "a batch holds several lines");

/* Lock order: audit_lock, agg_lock, flush_lock, batch_lock. */
static pthread_mutex_t flush_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t batch_lock = PTHREAD_MUTEX_INITIALIZER;
static char batch_buf[2][BATCH_CAP];
static int batch_cur;		   /* the buffer being filled; under batch_lock */
static size_t batch_len;	   /* under batch_lock */
static uint64_t batch_t0;	   /* ms when its oldest line came; under batch_lock */
static atomic_size_t batch_held;   /* batch_len, for a flush with nothing to do */
static atomic_bool audit_batching; /* the target is a regular file */
static __thread bool defer_here;

static uint64_t coarse_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t count_lines(const char *buf, size_t len)
{
	uint64_t n = 0;
	const char *p = buf, *end = buf + len;

	while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		n++;
		p++;
	}
	return n;
}

/*
 * Writes a batch of whole lines (or counts those that did not go out);
 * under flush_lock, which orders batch writes. A write that comes up
 * short (a full disk) would leave half a line for the next batch to be
 * glued to: the file is cut back to the end of the last whole line that
 * went out (ftruncate to the size it had plus those bytes), so that each
 * line is in the file whole or not at all. The size is taken before the
 * write: every line bound for a regular file goes through here, under
 * flush_lock, so no other line of ours lands in between; a writer outside
 * the broker appending to its audit log meanwhile is not provided for.
 */
static void write_batch(const char *buf, size_t len)
{
	int fd = atomic_load_explicit(&audit_fd, memory_order_acquire);
	size_t done = 0, keep;
	const char *nl;
	struct stat st;
	off_t size0 = -1;
	int tries, err = 0;

	if (fd == AUDIT_FD_CLOSED) {
		atomic_fetch_add_explicit(&audit_failures, count_lines(buf, len),
					  memory_order_relaxed);
		return;
	}
	if (fd == AUDIT_FD_DEFAULT)
		fd = STDERR_FILENO;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		size0 = st.st_size;
	for (tries = 0; done < len && tries < 4; tries++) {
		ssize_t n = write(fd, buf + done, len - done);

		if (n < 0) {
			err = errno;
			if (err == EINTR)
				continue;
			break;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	if (done == len)
		return;
	/* What went out up to its last newline stays; the rest is cut. */
	nl = done ? memrchr(buf, '\n', done) : NULL;
	keep = nl ? (size_t)(nl - buf) + 1 : 0;
	/* Cannot cut it (not a file, or the size is unknown): the torn line
	 * at least ends, if a byte fits, and the next one starts a line. */
	if (keep < done && (size0 < 0 || ftruncate(fd, size0 + (off_t)keep) < 0))
		(void)!write(fd, "\n", 1);
	/* Every line not whole in the file is lost, the torn one included. */
	count_failures(count_lines(buf + keep, len - keep), err);
}

/* Writes what the buffer holds; under flush_lock. */
static void flush_locked(void)
{
	const char *buf;
	size_t len;

	pthread_mutex_lock(&batch_lock);
	buf = batch_buf[batch_cur];
	len = batch_len;
	batch_cur ^= 1;
	batch_len = 0;
	atomic_store_explicit(&batch_held, 0, memory_order_relaxed);
	pthread_mutex_unlock(&batch_lock);
	if (len)
		write_batch(buf, len);
}

void audit_flush(void)
{
	if (!atomic_load_explicit(&batch_held, memory_order_relaxed))
		return;
	pthread_mutex_lock(&flush_lock);
	flush_locked();
	pthread_mutex_unlock(&flush_lock);
}

void audit_defer(bool on)
{
	defer_here = on;
	if (!on)
		audit_flush();
}

/* Appends a formatted line to the batch; flushes unless this thread defers
 * and the batch is young and has room. */
static void batch_line(const char *line, size_t n)
{
	uint64_t now = coarse_ms();
	bool flush;
	int tries;

	for (tries = 0;; tries++) {
		pthread_mutex_lock(&batch_lock);
		if (batch_len + n <= BATCH_CAP)
			break;
		pthread_mutex_unlock(&batch_lock);
		if (tries == 3) {
			/* Others keep filling it faster than it is written:
			 * this line goes alone, perhaps out of order, but as
			 * batches do (whole or not at all). */
			pthread_mutex_lock(&flush_lock);
			write_batch(line, n);
			pthread_mutex_unlock(&flush_lock);
			return;
		}
		audit_flush();
	}
	if (batch_len == 0)
		batch_t0 = now;
	memcpy(batch_buf[batch_cur] + batch_len, line, n);
	batch_len += n;
	atomic_store_explicit(&batch_held, batch_len, memory_order_relaxed);
	flush = !defer_here || batch_len > BATCH_CAP - AUDIT_LINE_MAX ||
		now - batch_t0 >= AUDIT_FLUSH_MS;
	pthread_mutex_unlock(&batch_lock);
	if (flush)
		audit_flush();
}

static void emit(const struct audit_event *ev, uint64_t repeated, uint64_t dropped)
{
	char buf[AUDIT_LINE_MAX];
	int n = format_line(ev, repeated, dropped, buf, sizeof(buf));

	if (n > 0 && atomic_load_explicit(&audit_batching, memory_order_relaxed)) {
		batch_line(buf, (size_t)n);
		return;
	}
	audit_flush(); /* what was held before the target changed goes first */
	write_line(buf, n);
}

/* --- refusals: folded per kind, bounded per source ------------------------ */

#define AGG_SOURCES 2048 /* sources held at once; beyond, they share one */
#define AGG_HASH 4096	 /* chains */
#define AGG_NAME 256	 /* a longer name (no DNS name is) is never folded */
#define AGG_ANSWER 32	 /* nor a longer DNS answer (no refusal's is) */

/* What makes two refusals the same (see audit.h), as bounded copies. */
struct agg_kind {
	bool has_sandbox, has_proto, has_name, has_target, has_addr, has_answer;
	char sandbox[CAP_SANDBOX];
	char proto[CAP_PROTO];
	char decision[CAP_DECISION];
	char reason[CAP_REASON];
	char name[AGG_NAME];
	char target[AGG_NAME];
	char dns_answer[AGG_ANSWER]; /* a refusal's: NXDOMAIN, REFUSED ... */
	struct sl_addr addr;	     /* src_addr, of events without a sandbox only */
	uint16_t port;		     /* dst_port */
};

struct agg_source {
	int next; /* its hash chain, or the free list; -1 ends either */
	bool used;
	char key[CAP_SANDBOX]; /* the sandbox; "" for events without one */
	uint64_t last_ms;      /* its latest refusal */
	uint64_t milli;	       /* tokens, in thousandths of a line */
	uint64_t refill_ms;    /* when the bucket was last filled */
	bool has_kind;	       /* its latest kind, written at kind_ms */
	struct agg_kind kind;
	uint64_t kind_ms;
	uint64_t repeated; /* of that kind, since its line */
	uint64_t dropped;  /* over the rate, since dropped_ms */
	uint64_t dropped_ms;
};

static pthread_mutex_t agg_lock = PTHREAD_MUTEX_INITIALIZER;
/* Under agg_lock. The last slot is for every source the table cannot hold. */
static struct agg_source agg_src[AGG_SOURCES + 1];
static int agg_head[AGG_HASH];
static int agg_free;
static bool agg_ready;
static uint64_t (*agg_clock)(void);
static atomic_uint_fast64_t agg_folded, agg_dropped;

static uint64_t agg_now(void)
{
	struct timespec ts;

	if (agg_clock)
		return agg_clock();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Empties the table; under agg_lock. */
static void agg_reset(void)
{
	int i;

	memset(agg_src, 0, sizeof(agg_src));
	for (i = 0; i < AGG_HASH; i++)
		agg_head[i] = -1;
	for (i = 0; i < AGG_SOURCES; i++)
		agg_src[i].next = i + 1 < AGG_SOURCES ? i + 1 : -1;
	agg_free = 0;
	agg_src[AGG_SOURCES].used = true; /* the shared one: never freed */
	agg_src[AGG_SOURCES].next = -1;
	agg_src[AGG_SOURCES].milli = (uint64_t)AUDIT_REFUSAL_BURST * 1000;
	agg_ready = true;
}

static unsigned agg_hash(const char *key)
{
	uint32_t h = 2166136261u; /* FNV-1a: keys are sandbox names */

	while (*key) {
		h ^= (unsigned char)*key++;
		h *= 16777619u;
	}
	return h % AGG_HASH;
}

/* Copies @src into @dst (@len bytes) if it fits whole. */
static bool copy_fits(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);

	if (n >= len)
		return false;
	memcpy(dst, src, n + 1);
	return true;
}

/* The kind of @ev into @k; false when a field is too long to be held. */
static bool kind_make(const struct audit_event *ev, struct agg_kind *k)
{
	memset(k, 0, sizeof(*k));
	k->has_sandbox = ev->sandbox != NULL;
	k->has_proto = ev->proto != NULL;
	k->has_name = ev->name != NULL;
	/* A refusal with a name folds by it: "http://a.test/1" and "/2" are
	 * one kind. Without one (a disguised literal, say), what the client
	 * wrote is all there is to tell attempts apart. */
	k->has_target = !ev->name && ev->target;
	k->has_answer = ev->dns_answer != NULL;
	if (!copy_fits(k->sandbox, sizeof(k->sandbox), ev->sandbox ? ev->sandbox : "") ||
	    !copy_fits(k->proto, sizeof(k->proto), ev->proto ? ev->proto : "") ||
	    !copy_fits(k->decision, sizeof(k->decision), ev->decision ? ev->decision : "") ||
	    !copy_fits(k->reason, sizeof(k->reason), ev->reason ? ev->reason : "") ||
	    !copy_fits(k->name, sizeof(k->name), ev->name ? ev->name : "") ||
	    !copy_fits(k->target, sizeof(k->target), k->has_target ? ev->target : "") ||
	    !copy_fits(k->dns_answer, sizeof(k->dns_answer), ev->dns_answer ? ev->dns_answer : ""))
		return false;
	k->port = ev->dst_port;
	if (!ev->sandbox && ev->src_addr) {
		/* Without a sandbox the client's address is the source's only
		 * name; its port changes with each connection: not kept. */
		k->has_addr = true;
		k->addr = *ev->src_addr;
	}
	return true;
}

static bool kind_eq(const struct agg_kind *a, const struct agg_kind *b)
{
	return a->has_sandbox == b->has_sandbox && a->has_proto == b->has_proto &&
	       a->has_name == b->has_name && a->has_target == b->has_target &&
	       !strcmp(a->target, b->target) && a->has_addr == b->has_addr &&
	       a->has_answer == b->has_answer && a->port == b->port &&
	       !strcmp(a->dns_answer, b->dns_answer) && !strcmp(a->sandbox, b->sandbox) &&
	       !strcmp(a->proto, b->proto) && !strcmp(a->decision, b->decision) &&
	       !strcmp(a->reason, b->reason) && !strcmp(a->name, b->name) &&
	       (!a->has_addr || !memcmp(&a->addr, &b->addr, sizeof(a->addr)));
}

/* The source @key names, made if new (its bucket full). */
static struct agg_source *source_get(const char *key)
{
	unsigned h = agg_hash(key);
	struct agg_source *s;
	int i;

	for (i = agg_head[h]; i >= 0; i = agg_src[i].next)
		if (!strcmp(agg_src[i].key, key))
			return &agg_src[i];
	if (agg_free < 0)
		return &agg_src[AGG_SOURCES];
	i = agg_free;
	s = &agg_src[i];
	agg_free = s->next;
	memset(s, 0, sizeof(*s));
	s->used = true;
	/* A key too long for a sandbox name is cut: sources may then share. */
	snprintf(s->key, sizeof(s->key), "%s", key);
	s->milli = (uint64_t)AUDIT_REFUSAL_BURST * 1000;
	s->next = agg_head[h];
	agg_head[h] = i;
	return s;
}

static void source_free(struct agg_source *s)
{
	int i = (int)(s - agg_src), *pp = &agg_head[agg_hash(s->key)];

	while (*pp >= 0 && *pp != i)
		pp = &agg_src[*pp].next;
	if (*pp == i)
		*pp = s->next;
	s->used = false;
	s->next = agg_free;
	agg_free = i;
}

static bool take_token(struct agg_source *s, uint64_t now)
{
	uint64_t cap = (uint64_t)AUDIT_REFUSAL_BURST * 1000;

	if (now > s->refill_ms) {
		uint64_t dt = now - s->refill_ms;

		/* RATE lines a second are RATE thousandths a millisecond. */
		s->milli = dt > cap / AUDIT_REFUSAL_RATE ? cap : s->milli + dt * AUDIT_REFUSAL_RATE;
		if (s->milli > cap)
			s->milli = cap;
		s->refill_ms = now;
	}
	if (s->milli < 1000)
		return false;
	s->milli -= 1000;
	return true;
}

static void add_dropped(struct agg_source *s, uint64_t n, uint64_t now)
{
	if (!s->dropped)
		s->dropped_ms = now;
	s->dropped += n;
	atomic_fetch_add_explicit(&agg_dropped, n, memory_order_relaxed);
}

/* Closes the source's kind: its repeats are written, or dropped. */
static void end_kind(struct agg_source *s, uint64_t now)
{
	const struct agg_kind *k = &s->kind;

	if (s->has_kind && s->repeated) {
		if (take_token(s, now)) {
			struct audit_event ev = {
				.sandbox = k->has_sandbox ? k->sandbox : NULL,
				.proto = k->has_proto ? k->proto : NULL,
				.name = k->has_name ? k->name : NULL,
				.target = k->has_target ? k->target : NULL,
				.src_addr = k->has_addr ? &k->addr : NULL,
				.dst_port = k->port,
				.decision = k->decision,
				.reason = k->reason,
				.dns_answer = k->has_answer ? k->dns_answer : NULL,
			};

			emit(&ev, s->repeated, 0);
			atomic_fetch_add_explicit(&agg_folded, s->repeated, memory_order_relaxed);
		} else {
			add_dropped(s, s->repeated, now);
		}
	}
	s->has_kind = false;
	s->repeated = 0;
}

static void emit_dropped(struct agg_source *s)
{
	struct audit_event ev = {
		.sandbox = s->key[0] ? s->key : NULL,
		.decision = "deny",
		.reason = "audit-rate-limited",
	};

	if (s->dropped)
		emit(&ev, 0, s->dropped);
	s->dropped = 0;
}

static _Atomic uint32_t fold_ms = AUDIT_REPEAT_MS;

void audit_set_fold(uint32_t ms)
{
	atomic_store(&fold_ms, ms);
}

/* Writes what is due at @now; everything when @all. */
static void source_expire(struct agg_source *s, uint64_t now, bool all)
{
	if (s->has_kind && (all || now - s->kind_ms >= atomic_load(&fold_ms)))
		end_kind(s, now);
	if (s->dropped && (all || now - s->dropped_ms >= AUDIT_REPEAT_MS))
		emit_dropped(s);
}

/* A refusal: folded, written or dropped; under agg_lock. */
static void refusal(const struct audit_event *ev)
{
	struct agg_source *s;
	struct agg_kind k;
	bool foldable;
	uint64_t now;

	if (!agg_ready)
		agg_reset();
	now = agg_now();
	s = source_get(ev->sandbox ? ev->sandbox : "");
	s->last_ms = now;
	source_expire(s, now, false);
	foldable = kind_make(ev, &k);
	if (foldable && s->has_kind && kind_eq(&s->kind, &k)) {
		s->repeated++;
		return;
	}
	end_kind(s, now);
	if (!take_token(s, now)) {
		add_dropped(s, 1, now);
		return;
	}
	emit(ev, 0, 0);
	if (foldable) {
		s->kind = k;
		s->has_kind = true;
		s->kind_ms = now;
	}
}

void audit_log(const struct audit_event *ev)
{
	int saved = errno;

	/* Every decision, before the log folds repeats: a watcher sees each. */
	watch_audit(ev);
	/* A would-deny went through, as an allowed one did: each has its own
	 * line (bytes, duration), never folded. */
	if (ev->decision &&
	    (!strcmp(ev->decision, "allow") || !strcmp(ev->decision, SL_DECISION_WOULD_DENY))) {
		emit(ev, 0, 0);
	} else {
		pthread_mutex_lock(&agg_lock);
		refusal(ev);
		pthread_mutex_unlock(&agg_lock);
	}
	errno = saved;
}

/* Writes what is due (everything when @all) and forgets idle sources. */
static void agg_sweep(bool all)
{
	uint64_t now;
	int i;

	pthread_mutex_lock(&agg_lock);
	if (!agg_ready)
		goto out;
	now = agg_now();
	for (i = 0; i <= AGG_SOURCES; i++) {
		struct agg_source *s = &agg_src[i];

		if (!s->used)
			continue;
		source_expire(s, now, all);
		if (i < AGG_SOURCES && !s->has_kind && !s->dropped &&
		    (all || now - s->last_ms >= AUDIT_REPEAT_MS))
			source_free(s);
	}
out:
	pthread_mutex_unlock(&agg_lock);
}

static int install(const char *target, struct sl_err *err);

/* When check_replaced() last said that it could not reopen (under audit_lock). */
static time_t reopen_fail_said;

/*
 * Reopens the audit file when its path no longer leads to the file open
 * (deleted, or moved away by a rotation that did not send SIGHUP): lines
 * written to it would be lost with it. Called once a second (audit_tick);
 * a stat and an fstat, under audit_lock, which no worker takes.
 */
static void check_replaced(void)
{
	struct stat open_st, path_st;
	struct sl_err err = { 0 };
	char *target;
	int fd, r;

	pthread_mutex_lock(&audit_lock);
	fd = atomic_load_explicit(&audit_fd, memory_order_relaxed);
	if (!audit_target || fd < 0 ||
	    atomic_load_explicit(&audit_on_stderr, memory_order_relaxed) ||
	    !atomic_load_explicit(&audit_batching, memory_order_relaxed) || fstat(fd, &open_st) < 0)
		goto out;
	r = stat(audit_target, &path_st);
	if (r < 0 && errno != ENOENT)
		goto out; /* cannot tell (EACCES, say): the file stays */
	if (r == 0 && path_st.st_ino == open_st.st_ino && path_st.st_dev == open_st.st_dev)
		goto out;
	target = strdup(audit_target);
	if (!target)
		goto out;
	r = install(target, &err);
	if (r < 0) {
		/* Tried again every second; said once a minute, so that a
		 * directory the broker's user may not write into (see README,
		 * log rotation) does not fill its log. */
		time_t now = time(NULL);

		if (now - reopen_fail_said >= 60) {
			reopen_fail_said = now;
			log_err("audit: %s was removed or replaced while open, and %s; "
				"still writing to the old file (tried every second, "
				"said once a minute)",
				target, sl_err_msg(&err));
		}
	} else {
		reopen_fail_said = 0;
		log_warn("audit: %s was removed or replaced while open: reopened", target);
	}
	free(target);
out:
	pthread_mutex_unlock(&audit_lock);
}

void audit_tick(void)
{
	agg_sweep(false);
	check_replaced();
}

uint64_t audit_refusals_folded(void)
{
	return atomic_load_explicit(&agg_folded, memory_order_relaxed);
}

uint64_t audit_refusals_dropped(void)
{
	return atomic_load_explicit(&agg_dropped, memory_order_relaxed);
}

void audit_set_clock(uint64_t (*now_ms)(void))
{
	pthread_mutex_lock(&agg_lock);
	agg_clock = now_ms;
	agg_reset();
	pthread_mutex_unlock(&agg_lock);
}

uint64_t audit_write_failures(void)
{
	return atomic_load_explicit(&audit_failures, memory_order_relaxed);
}

/* "audit_log `TARGET`: WHAT: strerror(E)"; returns -E. */
#define set_err(err, what, target, e) sl_err_sys((err), (e), "audit_log `%s`: %s", (target), (what))

/*
 * open_stderr() - a descriptor for stderr that never blocks us
 *
 * Pipes and terminals are reopened through /proc: that makes a new open
 * file description, so O_NONBLOCK is ours alone and does not surprise
 * whoever else writes to stderr. Sockets (journald) cannot be reopened;
 * they get send(MSG_DONTWAIT) instead. Regular files are dup'd, not
 * reopened: a second description would have its own offset and overwrite
 * lines unless the shell opened the file for appending.
 */
static int open_stderr(int *kind)
{
	struct stat st;
	int fd;

	if (fstat(STDERR_FILENO, &st) < 0)
		return -errno;
	*kind = S_ISSOCK(st.st_mode) ? AUDIT_SINK_SEND : AUDIT_SINK_WRITE;
	if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
		fd = open("/proc/self/fd/2",
			  O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		if (fd > STDERR_FILENO)
			return fd;
		if (fd >= 0)
			close(fd); /* 0..2 were closed: not ours to take */
	}
	fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	return fd < 0 ? -errno : fd;
}

/* Opens @target and makes it the audit target; called under audit_lock. */
static int install(const char *target, struct sl_err *err)
{
	int kind = AUDIT_SINK_WRITE, fd, cur, e;
	bool is_stderr = !strcmp(target, "-"), reg;
	struct stat st;
	char *copy;

	if (is_stderr) {
		fd = open_stderr(&kind);
		if (fd < 0)
			return set_err(err, "cannot use stderr", target, fd);
	} else {
		fd = open(target, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
			  0640);
		if (fd < 0)
			return set_err(err, "cannot open", target, errno);
		if (fd <= STDERR_FILENO) {
			/* 0..2 were closed; keep our number off them. */
			int hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);

			e = errno;
			close(fd);
			if (hi < 0)
				return set_err(err, "cannot dup", target, e);
			fd = hi;
		}
	}
	copy = strdup(target);
	if (!copy) {
		close(fd);
		return set_err(err, "cannot open", target, ENOMEM);
	}
	/* Batches for a regular file only (see the theory of operation), and
	 * not for stderr, where they would fall out of step with the log. */
	reg = !is_stderr && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);

	/* What the old target was due goes to it before the switch. */
	pthread_mutex_lock(&flush_lock);
	flush_locked();
	cur = atomic_load_explicit(&audit_fd, memory_order_relaxed);
	if (cur >= 0) {
		/* Same number, new file: see the theory of operation. */
		if (dup3(fd, cur, O_CLOEXEC) < 0) {
			e = errno;
			pthread_mutex_unlock(&flush_lock);
			close(fd);
			free(copy);
			return set_err(err, "cannot switch to", target, e);
		}
		close(fd);
		atomic_store_explicit(&audit_kind, kind, memory_order_relaxed);
	} else {
		atomic_store_explicit(&audit_kind, kind, memory_order_relaxed);
		atomic_store_explicit(&audit_fd, fd, memory_order_release);
	}
	atomic_store_explicit(&audit_batching, reg, memory_order_relaxed);
	pthread_mutex_unlock(&flush_lock);
	atomic_store_explicit(&audit_on_stderr, is_stderr, memory_order_relaxed);
	atomic_store_explicit(&audit_warned, false, memory_order_relaxed);
	free(audit_target);
	audit_target = copy;
	return 0;
}

int audit_open(const char *target, struct sl_err *err)
{
	int ret;

	if (!target || !*target)
		return set_err(err, "empty target", "", EINVAL);
	pthread_mutex_lock(&audit_lock);
	ret = install(target, err);
	pthread_mutex_unlock(&audit_lock);
	return ret;
}

int audit_reopen(void)
{
	struct sl_err err = { 0 };
	char *target;
	int ret = 0;

	pthread_mutex_lock(&audit_lock);
	if (!audit_target || atomic_load_explicit(&audit_fd, memory_order_relaxed) < 0)
		goto out; /* nothing opened, or closed */
	/* install() frees audit_target on success; keep our own copy. */
	target = strdup(audit_target);
	if (!target) {
		ret = -ENOMEM;
		goto out;
	}
	ret = install(target, &err);
	if (ret < 0)
		log_err("%s; still writing to the old file", sl_err_msg(&err));
	free(target);
out:
	pthread_mutex_unlock(&audit_lock);
	return ret;
}

void audit_close(void)
{
	int fd;

	agg_sweep(true); /* counts still held, while there is a target */
	pthread_mutex_lock(&audit_lock);
	pthread_mutex_lock(&flush_lock);
	flush_locked(); /* the lines held, while there is a target */
	atomic_store_explicit(&audit_batching, false, memory_order_relaxed);
	fd = atomic_exchange_explicit(&audit_fd, AUDIT_FD_CLOSED, memory_order_acq_rel);
	pthread_mutex_unlock(&flush_lock);
	if (fd >= 0)
		close(fd);
	free(audit_target);
	audit_target = NULL;
	pthread_mutex_unlock(&audit_lock);
}
