// SPDX-License-Identifier: MIT
/* Secret sources: a credential's secret read from its file or environment
 * variable into memory the sandbox never reaches, and wiped from there. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "broker/creds/creds_internal.h"
#include "common/err.h"
#include "common/file.h"
#include "policy/policy.h"

/* ---- secrets ------------------------------------------------------------- */

/* No control character but HTAB: CR, LF or NUL would split a header. */
static bool secret_bytes_ok(const unsigned char *p, size_t len)
{
	size_t i;

	if (len == 0)
		return false;
	for (i = 0; i < len; i++)
		if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f)
			return false;
	return true;
}

void creds_secret_free(struct creds_secret *s)
{
	if (!s)
		return;
	/* Falls back to OPENSSL_cleanse + free for ordinary-heap memory. */
	if (s->buf)
		OPENSSL_secure_clear_free(s->buf, s->len ? s->len : 1);
	s->buf = NULL;
	s->len = 0;
}

int creds_secret_set(struct creds_secret *s, const void *p, size_t len)
{
	s->buf = NULL;
	s->len = 0;
	if (!p || len > CREDS_SECRET_MAX || !secret_bytes_ok(p, len))
		return -EINVAL;
	/* The ordinary heap when no secure heap is initialised. */
	s->buf = OPENSSL_secure_malloc(len);
	if (!s->buf)
		return -ENOMEM;
	memcpy(s->buf, p, len);
	s->len = len;
	return 0;
}

int creds_file_read(const char *path, struct creds_secret *out, struct sl_err *err)
{
	struct stat st;
	unsigned char *b;
	size_t cap, got = 0;
	int fd, ret;

	out->buf = NULL;
	out->len = 0;
	if (!path || path[0] != '/') {
		sl_err_set(err, 0, "secret file `%s` is not an absolute path", path ? path : "");
		return -EINVAL;
	}
	/* O_NONBLOCK: a FIFO must not hang the broker; O_NOFOLLOW: the last
	 * component may not be a symlink someone swapped in. A file only root
	 * may read (0600, the usual) comes through the broker's opener
	 * (broker/isolation.c) once the broker runs as its own user. */
	fd = file_open_read(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		ret = fd;
		if (ret == -ELOOP)
			sl_err_set(err, ELOOP, "secret file `%s`: is a symlink (refused)", path);
		else
			sl_err_sys(err, ret, "secret file `%s`", path);
		return ret;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		sl_err_sys(err, ret, "secret file `%s`", path);
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		sl_err_set(err, 0, "secret file `%s` is not a regular file", path);
		goto fail;
	}
	if (st.st_size > CREDS_SECRET_MAX) {
		ret = -EFBIG;
		sl_err_set(err, 0, "secret file `%s` is larger than %d bytes", path,
			   CREDS_SECRET_MAX);
		goto fail;
	}
	/* One byte more than fstat said, to notice a file that grew. */
	cap = (size_t)st.st_size + 1;
	b = OPENSSL_secure_malloc(cap);
	if (!b) {
		ret = -ENOMEM;
		sl_err_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	while (got < cap) {
		ssize_t r = read(fd, b + got, cap - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			OPENSSL_secure_clear_free(b, cap);
			sl_err_sys(err, ret, "secret file `%s`", path);
			goto fail;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	if (got == cap) {
		ret = -EAGAIN;
		OPENSSL_secure_clear_free(b, cap);
		sl_err_set(err, 0, "secret file `%s` changed while read", path);
		goto fail;
	}
	close(fd);
	/* The allocation may be longer than @got, but nothing was written
	 * past it: wiping @got bytes on free wipes everything read. */
	out->buf = b;
	out->len = got;
	return 0;
fail:
	close(fd);
	return ret;
}

int creds_secret_load(const struct policy_credential *c, struct creds_secret *s, struct sl_err *err)
{
	struct creds_secret raw;
	const char *v;
	size_t len;
	int ret;

	s->buf = NULL;
	s->len = 0;
	if (!c || !c->source) {
		sl_err_set(err, 0, "credential without a source");
		return -EINVAL;
	}
	if (c->source_kind == POLICY_SOURCE_ENV) {
		/* The broker's environment is its operator's, which a
		 * control_group member may not read. */
		if (file_reading_for_other()) {
			sl_err_set(
				err, 0,
				"credential `%s`: an `env` source is read only for a sandbox "
				"registered by root: this one's files are read as a "
				"control_group member, who may not read the broker's environment",
				c->name ? c->name : "");
			return -EACCES;
		}
		v = getenv(c->source);
		if (!v) {
			sl_err_set(err, 0, "credential `%s`: environment variable `%s` is not set",
				   c->name ? c->name : "", c->source);
			return -ENOENT;
		}
		len = strlen(v);
		if (len > CREDS_SECRET_MAX) {
			sl_err_set(err, 0, "credential `%s`: `%s` is longer than %d bytes",
				   c->name ? c->name : "", c->source, CREDS_SECRET_MAX);
			return -EFBIG;
		}
		ret = creds_secret_set(s, v, len);
		if (ret == -EINVAL)
			sl_err_set(
				err, 0,
				"credential `%s`: `%s` is empty or holds a control character (CR, LF, NUL...)",
				c->name ? c->name : "", c->source);
		else if (ret < 0)
			sl_err_set(err, ENOMEM, "out of memory");
		return ret;
	}

	ret = creds_file_read(c->source, &raw, err);
	if (ret < 0)
		return ret;
	len = raw.len;
	if (len && raw.buf[len - 1] == '\n') {
		len--;
		if (len && raw.buf[len - 1] == '\r')
			len--;
	}
	if (len == 0 || !secret_bytes_ok(raw.buf, len)) {
		sl_err_set(
			err, 0,
			"secret file `%s` is empty or holds a control character (CR, LF, NUL...)",
			c->source);
		ret = -EINVAL;
	} else {
		ret = creds_secret_set(s, raw.buf, len);
		if (ret < 0)
			sl_err_set(err, ENOMEM, "out of memory");
	}
	creds_secret_free(&raw);
	return ret;
}
