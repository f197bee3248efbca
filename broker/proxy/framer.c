// SPDX-License-Identifier: MIT
/* Framing HTTP bodies with llhttp. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <llhttp.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "broker/proxy/proxy_internal.h"
#include "broker/audit.h"
#include "broker/creds/creds.h"
#include "broker/broker_internal.h"
#include "broker/http.h"
#include "broker/metrics.h"
#include "broker/reflect.h"
#include "broker/tls/tls.h"
#include "dnsfilter/dnsfilter.h"
#include "common/log.h"
#include "policy/policy.h"

void proxy_framer_free(struct framer **f)
{
	free(*f);
	*f = NULL;
}

static int on_msg_complete(llhttp_t *p)
{
	struct framer *f = p->data;

	f->done = true;
	f->in_data = false;
	return HPE_PAUSED;
}

static int on_headers(llhttp_t *p)
{
	struct framer *f = p->data;

	f->in_data = false;
	return f->skip_body ? 1 : 0;
}

/* The payload callbacks tell where the parser is: after on_body (of a
 * Content-Length body or a chunk) or on_chunk_header, the next
 * p.content_length bytes are payload that llhttp only counts. */
static int on_body(llhttp_t *p, const char *at, size_t len)
{
	struct framer *f = p->data;

	(void)at;
	(void)len;
	f->in_data = true;
	return 0;
}

static int on_chunk_header(llhttp_t *p)
{
	struct framer *f = p->data;

	f->in_data = true;
	return 0;
}

static int on_chunk_complete(llhttp_t *p)
{
	struct framer *f = p->data;

	f->in_data = false;
	return 0;
}

static const llhttp_settings_t framer_settings = {
	.on_message_complete = on_msg_complete,
	.on_headers_complete = on_headers,
	.on_body = on_body,
	.on_chunk_header = on_chunk_header,
	.on_chunk_complete = on_chunk_complete,
};

/*
 * Makes *@f ready for a new message: the framer a kept-alive connection
 * used for the last request is started again rather than freed and
 * allocated anew. Return: 0, or -ENOMEM (*@f is then NULL).
 */
int proxy_framer_start(struct framer **f, bool response, bool skip_body)
{
	if (!*f)
		*f = malloc(sizeof(**f));
	if (!*f)
		return -ENOMEM;
	llhttp_init(&(*f)->p, response ? HTTP_RESPONSE : HTTP_REQUEST, &framer_settings);
	(*f)->p.data = *f;
	(*f)->done = false;
	(*f)->in_data = false;
	(*f)->skip_body = skip_body;
	return 0;
}

/*
 * Feeds @len bytes; returns how many belong to the current message (all of
 * them unless it completed inside), or -1 when they do not frame.
 */
ssize_t proxy_framer_feed(struct framer *f, const char *data, size_t len)
{
	llhttp_errno_t e;

	if (f->done || len == 0)
		return 0;
	e = llhttp_execute(&f->p, data, len);
	if (e == HPE_OK)
		return (ssize_t)len;
	if (e == HPE_PAUSED && f->done)
		return llhttp_get_error_pos(&f->p) - data;
	return -1;
}

/*
 * How many of the next bytes are payload the framer needs only to count:
 * the rest of a Content-Length body or of the current chunk. Zero where it
 * must see the bytes (a head, a chunk-size line, a chunk's CRLF, trailers,
 * a body that ends at EOF).
 */
uint64_t proxy_framer_payload_left(const struct framer *f)
{
	if (f->done || !f->in_data || !(f->p.flags & (F_CHUNKED | F_CONTENT_LENGTH)))
		return 0;
	return f->p.content_length;
}

/*
 * Counts @n payload bytes that went past user space (spliced), @n at most
 * proxy_framer_payload_left(). llhttp does not read payload bytes, it subtracts
 * their number; it is handed a buffer of zeros of the right length.
 */
int proxy_framer_skip(struct framer *f, size_t n)
{
	static char zeros[16 * 1024];

	while (n > 0) {
		size_t k = n < sizeof(zeros) ? n : sizeof(zeros);

		if (proxy_framer_feed(f, zeros, k) != (ssize_t)k)
			return -EPROTO;
		n -= k;
	}
	return 0;
}

/* Close-delimited bodies end at EOF. */
bool proxy_framer_finish(struct framer *f)
{
	if (!f->done && llhttp_finish(&f->p) == HPE_OK)
		f->done = true;
	return f->done;
}
