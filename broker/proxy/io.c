// SPDX-License-Identifier: MIT
/* Buffers, epoll interests and the I/O of one connection's two sides. */
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

uint64_t proxy_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/*
 * Spare buffers. A kept-alive connection between requests gives its
 * buffers back (proxy_buf_park()) and takes them again with its next
 * request, so that idle connections hold none: without this, 1,000 idle
 * ones held 14.9 KiB each, mostly the touched pages of three buffers. A
 * thread keeps up to PROXY_SPARE_BUFS of them for the next taker (a busy
 * worker's connections wait between requests most of the time); the rest
 * go back to malloc. A worker whose last connection closes frees them
 * (conn_free()), so that memory goes back once its connections are gone.
 */
static __thread struct buf *spare_bufs[PROXY_SPARE_BUFS];
static __thread unsigned n_spare;

struct buf *proxy_buf_new(size_t cap)
{
	struct buf *b = NULL;
	unsigned i;

	for (i = n_spare; i-- > 0;) {
		if (spare_bufs[i]->cap == cap) {
			b = spare_bufs[i];
			spare_bufs[i] = spare_bufs[--n_spare];
			break;
		}
	}
	if (!b)
		b = malloc(sizeof(*b) + cap);
	if (b) {
		b->pos = b->len = 0;
		b->cap = cap;
	}
	return b;
}

void proxy_buf_park(struct buf **bp)
{
	struct buf *b = *bp;

	*bp = NULL;
	if (!b)
		return;
	if (n_spare < PROXY_SPARE_BUFS) {
		spare_bufs[n_spare++] = b;
		return;
	}
	free(b);
}

void proxy_buf_spare_drop(void)
{
	while (n_spare > 0)
		free(spare_bufs[--n_spare]);
}

/* Moves unread bytes to the front so that reads can append. */
void proxy_buf_compact(struct buf *b)
{
	if (b->pos == 0)
		return;
	memmove(b->data, b->data + b->pos, b->len - b->pos);
	b->len -= b->pos;
	b->pos = 0;
}

/*
 * Sets what @ev waits for. An interest is added at once, but EPOLLIN and
 * EPOLLRDHUP are dropped lazily: they stay registered until an event for
 * them comes (proxy_events_for()), which then drops them. A keep-alive request
 * turns the client's EPOLLIN off and on again and the upstream's from
 * EPOLLRDHUP to EPOLLIN and back, and the events dropped lazily seldom come
 * in between: that saves up to four epoll_ctl() a request. EPOLLOUT, which
 * a socket with room reports at once, is dropped at once.
 */
static void set_mask(struct conn *c, struct ev *ev, uint32_t *cur, uint32_t *wanted, uint32_t want)
{
	uint32_t keep;

	*wanted = want;
	if (ev->fd < 0)
		return;
	if (*cur == PROXY_MASK_PARKED) {
		/* Its hang-up is known: watched again only once the step
		 * wants to read or write it (and then finds what is left, or
		 * the error). */
		if ((want & (EPOLLIN | EPOLLOUT)) && loop_add(c->w->loop, ev, want) == 0)
			*cur = want;
		return;
	}
	keep = *cur & ~want & (EPOLLIN | EPOLLRDHUP);
	if ((*cur & ~keep) == want)
		return;
	loop_mod(c->w->loop, ev, want | keep);
	*cur = want | keep;
}

/*
 * The bits of @events that @ev waits for (its hang-ups and errors always):
 * what the callback would have seen had every interest been dropped at
 * once. An event for an interest kept lazily drops it now, so that it is
 * not reported again.
 */
uint32_t proxy_events_for(struct conn *c, struct ev *ev, uint32_t *cur, uint32_t wanted,
			  uint32_t events)
{
	if ((events & *cur & ~wanted) && ev->fd >= 0 && *cur != wanted) {
		loop_mod(c->w->loop, ev, wanted);
		*cur = wanted;
	}
	return events & (wanted | EPOLLERR | EPOLLHUP);
}

/*
 * Stops watching @ev, which hung up or failed while its connection waits for
 * something else: epoll reports a hang-up or an error whatever the mask, at
 * every wait, and the worker would spin on it until a timeout. set_mask()
 * watches it again when the connection next wants to read or write it.
 */
void proxy_park(struct conn *c, struct ev *ev, uint32_t *cur)
{
	loop_del(c->w->loop, ev);
	*cur = PROXY_MASK_PARKED;
}

void proxy_want(struct conn *c, uint32_t cmask, uint32_t umask)
{
	/* An SSL call may need the other direction (a TLS 1.3 key update, a
	 * handshake message): wait for that one too. */
	if (c->cssl && (cmask & (EPOLLIN | EPOLLOUT)))
		cmask |= c->cssl_want;
	if (c->ussl && (umask & (EPOLLIN | EPOLLOUT)))
		umask |= c->ussl_want;
	set_mask(c, &c->cev, &c->cev_mask, &c->cev_want, cmask);
	set_mask(c, &c->uev, &c->uev_mask, &c->uev_want, umask);
	/* Plaintext OpenSSL holds already is not in the socket: epoll will
	 * not report it. */
	if ((c->cssl && (cmask & EPOLLIN) && SSL_pending(c->cssl) > 0) ||
	    (c->ussl && (umask & EPOLLIN) && SSL_pending(c->ussl) > 0))
		loop_timer_arm(c->w->loop, &c->resume, 0);
}

/*
 * One side of a connection: the sandbox's (@up false) or upstream's, plain
 * or inside TLS. Both calls return bytes moved (> 0), 0 at EOF (io_recv),
 * -EAGAIN when the side must wait (what for is in cssl_want/ussl_want), or
 * another negative errno.
 */
ssize_t proxy_ssl_result(struct conn *c, bool up, SSL *ssl, int k)
{
	uint8_t *w = up ? &c->ussl_want : &c->cssl_want;

	*w = 0;
	if (k > 0)
		return k;
	switch (SSL_get_error(ssl, k)) {
	case SSL_ERROR_WANT_READ:
		*w = EPOLLIN;
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		*w = EPOLLOUT;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	default:
		ERR_clear_error();
		return -EPROTO;
	}
}

static ssize_t io_recv(struct conn *c, bool up, void *p, size_t n)
{
	SSL *ssl = up ? c->ussl : c->cssl;
	ssize_t k;

	if (ssl) {
		ERR_clear_error();
		return proxy_ssl_result(c, up, ssl,
					SSL_read(ssl, p, n > INT_MAX ? INT_MAX : (int)n));
	}
	do
		k = recv(up ? c->uev.fd : c->cev.fd, p, n, 0);
	while (k < 0 && errno == EINTR);
	return k < 0 ? -errno : k;
}

ssize_t proxy_io_send(struct conn *c, bool up, const void *p, size_t n)
{
	SSL *ssl = up ? c->ussl : c->cssl;
	ssize_t k;

	if (ssl) {
		ERR_clear_error();
		return proxy_ssl_result(c, up, ssl,
					SSL_write(ssl, p, n > INT_MAX ? INT_MAX : (int)n));
	}
	do
		k = send(up ? c->uev.fd : c->cev.fd, p, n, MSG_NOSIGNAL);
	while (k < 0 && errno == EINTR);
	return k < 0 ? -errno : k;
}

/* Reads at most @max bytes into @b; returns bytes read, 0 at EOF, -EAGAIN,
 * or another -errno. */
ssize_t proxy_read_into_max(struct conn *c, bool up, struct buf *b, size_t max)
{
	ssize_t k;

	proxy_buf_compact(b);
	if (b->len == b->cap)
		return -ENOBUFS;
	k = io_recv(c, up, b->data + b->len, b->cap - b->len < max ? b->cap - b->len : max);
	if (k < 0)
		return k;
	b->len += (size_t)k;
	return k;
}

ssize_t proxy_read_into(struct conn *c, bool up, struct buf *b)
{
	return proxy_read_into_max(c, up, b, SIZE_MAX);
}

/*
 * Has nothing arrived on socket @fd, not even an EOF? One byte is peeked,
 * never taken; any answer but "would block" (a byte, an EOF, an error)
 * means the peer has spoken. Used where bytes nobody asked for must not
 * pass for the next answer, and where a server may speak first.
 */
bool proxy_fd_quiet(int fd)
{
	char b;
	ssize_t k = -1;

	for (int i = 0; i < 4; i++) {
		k = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (k != -1 || errno != EINTR)
			break;
	}
	return k == -1 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Are both sides plain sockets (no TLS ends here), so that bytes can go
 * from one to the other by splice? */
bool proxy_plain_both(const struct conn *c)
{
	return !c->cssl && !c->ussl && c->uev.fd >= 0;
}

/* Writes what @b holds from pos; returns 1 when all is written, 0 if it
 * would block, -errno on error. */
int proxy_write_out(struct conn *c, bool up, struct buf *b, size_t upto, uint64_t *count)
{
	while (b->pos < upto) {
		ssize_t k = proxy_io_send(c, up, b->data + b->pos, upto - b->pos);

		if (k < 0) {
			if (k == -EAGAIN)
				return 0;
			return (int)k;
		}
		b->pos += (size_t)k;
		if (count)
			*count += (uint64_t)k;
	}
	return 1;
}
