// SPDX-License-Identifier: MIT
/* Logging to stderr: one line per call, written with one write(2) so that
 * lines from several threads do not interleave.
 *
 * A daemon's stderr is often a pipe to a logger or a journal stream, and
 * its reader can go away (a pipeline ends, the journal restarts). Losing
 * the log must never stop the broker: SIGPIPE is ignored (sluiced's
 * main()), and a write that fails with EPIPE, EIO or EBADF marks stderr
 * dead for good, since no later reader can attach to that pipe again.
 * Lines after that, and lines lost to any other failed or short write,
 * are counted (log_lines_lost()) and not retried, so a dead log costs one
 * atomic load per line, never a spin. */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum log_level log_threshold = LOG_LVL_INFO;

static atomic_bool stderr_dead;
static atomic_uint_fast64_t lines_lost;

bool log_stderr_dead(void)
{
	return atomic_load_explicit(&stderr_dead, memory_order_relaxed);
}

uint64_t log_lines_lost(void)
{
	return atomic_load_explicit(&lines_lost, memory_order_relaxed);
}

/* Writes @line whole, or counts it lost; never blocks longer than stderr
 * itself does, never loops on an error. */
static void write_line(const char *line, size_t n)
{
	ssize_t w = -1;
	int tries, err = 0;

	if (atomic_load_explicit(&stderr_dead, memory_order_relaxed)) {
		atomic_fetch_add_explicit(&lines_lost, 1, memory_order_relaxed);
		return;
	}
	/* EINTR before any byte went out is safe to retry; nothing else is
	 * (a retried tail could interleave with another thread's line). */
	for (tries = 0; tries < 3; tries++) {
		w = write(STDERR_FILENO, line, n);
		if (w >= 0)
			break;
		err = errno;
		if (err != EINTR)
			break;
	}
	if (w == (ssize_t)n)
		return;
	atomic_fetch_add_explicit(&lines_lost, 1, memory_order_relaxed);
	/* Its reader is gone (EPIPE), its terminal hung up (EIO), or it was
	 * closed: nothing will ever read it again. A full disk or a
	 * non-blocking pipe that is full (EAGAIN) may recover: try the next
	 * line. */
	if (w < 0 && (err == EPIPE || err == EIO || err == EBADF || err == ECONNRESET))
		atomic_store_explicit(&stderr_dead, true, memory_order_relaxed);
}

static const char *const level_name[] = {
	[LOG_LVL_ERR] = "error",
	[LOG_LVL_WARN] = "warning",
	[LOG_LVL_INFO] = "info",
	[LOG_LVL_DEBUG] = "debug",
};
_Static_assert(sizeof(level_name) / sizeof(level_name[0]) == LOG_LVL_DEBUG + 1,
	       "level_name covers every level");

static void log_v(enum log_level lvl, const char *fmt, va_list ap)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	int n, m;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line),
		     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s: ", tm.tm_year + 1900, tm.tm_mon + 1,
		     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
		     level_name[lvl]);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	write_line(line, (size_t)n);
}

bool log_every_ok(struct log_every *le, uint64_t now_ms, uint64_t every_ms, uint64_t *held)
{
	uint64_t next = atomic_load_explicit(&le->next_ms, memory_order_relaxed);

	/* One thread wins the interval; the others count themselves held. */
	if (now_ms < next ||
	    !atomic_compare_exchange_strong_explicit(&le->next_ms, &next, now_ms + every_ms,
						     memory_order_relaxed, memory_order_relaxed)) {
		atomic_fetch_add_explicit(&le->held, 1, memory_order_relaxed);
		return false;
	}
	*held = atomic_exchange_explicit(&le->held, 0, memory_order_relaxed);
	return true;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	va_list ap;

	if (lvl > log_threshold)
		return;
	va_start(ap, fmt);
	log_v(lvl, fmt, ap);
	va_end(ap);
}

void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_v(LOG_LVL_ERR, fmt, ap);
	va_end(ap);
	exit(1);
}
