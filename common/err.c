// SPDX-License-Identifier: MIT
/* The error type of common/err.h: setting, wrapping and reading it. Needs
 * nothing but libc (the static sluice-probe links it). */
#include "common/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/*
 * A message cut at the end of the buffer may have cut a UTF-8 sequence in
 * two (a path, a host name); its head would make the message invalid UTF-8
 * where it is shown in JSON. Drop the head of a sequence the cut left
 * incomplete.
 */
static void trim_cut_utf8(char *s, size_t len)
{
	size_t i = len, cont = 0;
	unsigned char c;
	size_t need;

	while (i > 0 && cont < 4 && ((unsigned char)s[i - 1] & 0xc0) == 0x80) {
		i--;
		cont++;
	}
	if (i == 0)
		return;
	c = (unsigned char)s[i - 1];
	if (c < 0x80)
		return; /* ASCII: nothing was cut */
	if ((c & 0xe0) == 0xc0)
		need = 1;
	else if ((c & 0xf0) == 0xe0)
		need = 2;
	else if ((c & 0xf8) == 0xf0)
		need = 3;
	else
		return; /* not UTF-8 anyway: leave it as given */
	if (cont < need)
		s[i - 1] = '\0';
}

/* vsnprintf into @buf at @off, cutting safely; returns the new length, or
 * SL_ERR_MSG_MAX - 1 once the buffer is full. */
static size_t put(char *buf, size_t off, const char *fmt, va_list ap)
{
	int n;

	if (off >= SL_ERR_MSG_MAX - 1)
		return off;
	n = vsnprintf(buf + off, SL_ERR_MSG_MAX - off, fmt, ap);
	if (n < 0) {
		buf[off] = '\0';
		return off;
	}
	if ((size_t)n >= SL_ERR_MSG_MAX - off) {
		/* Cut: nothing more goes after it (a suffix after a cut
		 * would read as if it belonged there). */
		trim_cut_utf8(buf, SL_ERR_MSG_MAX - 1);
		return SL_ERR_MSG_MAX - 1;
	}
	return off + (size_t)n;
}

static size_t putf(char *buf, size_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static size_t putf(char *buf, size_t off, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	off = put(buf, off, fmt, ap);
	va_end(ap);
	return off;
}

static int set_at(struct sl_err *err, const char *file, unsigned line, const char *func, int errnum,
		  bool sys, const char *fmt, va_list ap)
{
	size_t off;

	if (errnum < 0)
		errnum = -errnum;
	if (err) {
		err->errnum = errnum;
		err->file = file;
		err->line = line;
		err->func = func;
		off = put(err->msg, 0, fmt, ap);
		if (sys) {
			/* strerror_r (GNU): the same words as strerror(),
			 * without its shared buffer (errors are set on any
			 * thread). */
			char buf[128];

			putf(err->msg, off, ": %s", strerror_r(errnum, buf, sizeof(buf)));
		}
	}
	return errnum ? -errnum : -EINVAL;
}

int sl_err_set_at(struct sl_err *err, const char *file, unsigned line, const char *func, int errnum,
		  const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = set_at(err, file, line, func, errnum, false, fmt, ap);
	va_end(ap);
	return r;
}

int sl_err_sys_at(struct sl_err *err, const char *file, unsigned line, const char *func, int errnum,
		  const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = set_at(err, file, line, func, errnum, true, fmt, ap);
	va_end(ap);
	return r;
}

void sl_err_wrap(struct sl_err *err, const char *fmt, ...)
{
	char inner[SL_ERR_MSG_MAX];
	va_list ap;
	size_t off;

	if (!err)
		return;
	memcpy(inner, err->msg, sizeof(inner));
	inner[sizeof(inner) - 1] = '\0';
	va_start(ap, fmt);
	off = put(err->msg, 0, fmt, ap);
	va_end(ap);
	if (inner[0])
		putf(err->msg, off, ": %s", inner);
}

void sl_err_clear(struct sl_err *err)
{
	if (!err)
		return;
	err->errnum = 0;
	err->file = NULL;
	err->func = NULL;
	err->line = 0;
	err->msg[0] = '\0';
}

const char *sl_err_msg(const struct sl_err *err)
{
	return err ? err->msg : "";
}

int sl_err_errno(const struct sl_err *err)
{
	return err ? err->errnum : 0;
}
