// SPDX-License-Identifier: MIT
/* The spliced tunnel, and the CONNECT's "200 Connection established". */
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

/* The size of the pipe of @rfd when it is smaller than PIPE_CAP; else 0. */
static int pipe_small(int rfd)
{
	int size = fcntl(rfd, F_GETPIPE_SZ);

	return size > 0 && size < PIPE_CAP ? size : 0;
}

/* How often a line may say that pipes come out small, at the most. */
#define PIPE_SMALL_LOG_MS 10000

/* A pipe just made for @w is small (@size bytes): counted, and said in the
 * log (once per PIPE_SMALL_LOG_MS): nothing else tells an operator why
 * bytes cost more CPU than they did. */
static void pipe_small_made(struct worker *w, int size)
{
	static struct log_every small_log;
	uint64_t held;

	w->small_pipes++;
	metrics_pipe_small();
	if (log_every_ok(&small_log, loop_now_ms(w->loop), PIPE_SMALL_LOG_MS, &held))
		log_warn("proxy: a splice pipe came out at %d bytes, not %d: the broker's user "
			 "(uid %u) is over its pipe pages (fs.pipe-user-pages-soft), so "
			 "transfers move bytes a few pages at a time until pipes are freed "
			 "(%llu more since the last line; sluice_splice_pipes_small_total)",
			 size, PIPE_CAP, (unsigned)geteuid(), (unsigned long long)held);
}

/*
 * Pipes are a worker's, not a connection's: a connection holds one only
 * while bytes wait in it (a tunnel gives each back at the end of every
 * wakeup that drained it; a spliced body at its end), and takes one from
 * the worker's few empty ones when bytes come. The kernel counts a pipe's
 * 16 pages against the broker user's fs.pipe-user-pages-soft (16,384 pages
 * by default) while it exists, full or empty; past that an unprivileged
 * user's new pipes get 2 pages, and splice moves 8 KiB a call at twice the
 * CPU per byte. With a pair per connection, 512 live tunnels (a
 * long-poll, a chat) were enough for every later one to pay that; now it
 * takes 512 whose peers do not read. A pipe is given back only empty: one
 * connection's bytes never reach another's (a read that finds nothing,
 * besides the count). A pipe made while the user was over its pages (2
 * pages: F_GETPIPE_SZ says so) serves its connection and is closed: kept,
 * it would make every later transfer splice 8 KiB at a time, long after
 * the pages are free again.
 */
int proxy_pipe_get(struct worker *w, int p[2])
{
	int small;

	if (w->n_pipes > 0) {
		w->n_pipes--;
		p[0] = w->pipes[w->n_pipes][0];
		p[1] = w->pipes[w->n_pipes][1];
		metrics_pipes(1, -1);
		return 0;
	}
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0) {
		p[0] = p[1] = -1;
		return -errno;
	}
	small = pipe_small(p[0]);
	if (small)
		pipe_small_made(w, small);
	metrics_pipes(1, 0);
	return 0;
}

/*
 * Gives @p back to @w's pipes when it is empty and full size, else closes
 * it; @p is then -1, -1. Empty by the count (@inpipe 0) and, when bytes
 * went through it since it was taken (@used), by the kernel too: a read
 * finds nothing (a byte it did find is lost with the pipe, which is
 * closed). A pipe nothing entered is as empty as when it was given back.
 */
static void pipe_put(struct worker *w, int p[2], size_t inpipe, bool used)
{
	bool small = false;
	char byte;

	if (p[0] < 0)
		return;
	/* Looked at only while some small pipe is out: none, as a rule. */
	if (w->small_pipes > 0 && pipe_small(p[0]) > 0) {
		small = true;
		w->small_pipes--;
	}
	if (!small && inpipe == 0 && w->n_pipes < WORKER_PIPES_MAX &&
	    (!used || (read(p[0], &byte, 1) < 0 && errno == EAGAIN))) {
		w->pipes[w->n_pipes][0] = p[0];
		w->pipes[w->n_pipes][1] = p[1];
		w->n_pipes++;
		metrics_pipes(-1, 1);
	} else {
		close(p[0]);
		close(p[1]);
		metrics_pipes(-1, 0);
	}
	p[0] = p[1] = -1;
}

void proxy_pipes_drop(struct worker *w)
{
	while (w->n_pipes > 0) {
		w->n_pipes--;
		close(w->pipes[w->n_pipes][0]);
		close(w->pipes[w->n_pipes][1]);
		metrics_pipes(0, -1);
	}
}

/*
 * PIPE_CAP counts bytes, but a pipe holds at most 16 buffers (2 once the
 * broker's user is over fs.pipe-user-pages-soft), and a splice from a
 * socket makes one of each segment it takes: 16 small segments fill it
 * long before PIPE_CAP. Asking for read readiness of a side whose pipe is
 * full would wake the loop at once, for ever (level triggered), while the
 * other side does not read: one such tunnel kept a worker at 100% of a CPU.
 * So when a splice into a pipe that holds bytes is refused (EAGAIN), the
 * pipe is full if @from still has a byte to give; its side is then not
 * read until bytes leave the pipe (whose writability is waited for). An
 * empty pipe is never full. One peek, only at such a refusal.
 */
bool proxy_pipe_full(int from, size_t inpipe)
{
	char byte;

	return inpipe > 0 && recv(from, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
}

/*
 * Moves what it can one way: @from -> pipe -> @to. Returns -1 on a hard
 * error. Sets *eof when @from has ended and the pipe is drained (then the
 * write side of @to is shut), *full as proxy_pipe_full() says.
 */
static int splice_dir(struct conn *c, int from, int to, int p[2], size_t *inpipe, bool *eof,
		      bool *shut, bool *full, uint64_t *count)
{
	bool refused = false;
	int rounds;

	for (rounds = 0; rounds < 16; rounds++) {
		bool progress = false;
		ssize_t k;

		refused = false;
		if (!*eof && *inpipe < PIPE_CAP && !*full) {
			k = splice(from, NULL, p[1], NULL, PIPE_CAP - *inpipe,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k > 0) {
				*inpipe += (size_t)k;
				progress = true;
			} else if (k == 0) {
				*eof = true;
			} else if (errno == EAGAIN) {
				refused = true;
			} else if (errno != EINTR) {
				return -1;
			}
		}
		if (*inpipe > 0) {
			k = splice(p[0], NULL, to, NULL, *inpipe,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k > 0) {
				*inpipe -= (size_t)k;
				*count += (uint64_t)k;
				*full = false;
				progress = true;
			} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
				return -1;
			}
		}
		if (!progress)
			break;
	}
	if (refused && !*full)
		*full = proxy_pipe_full(from, *inpipe);
	if (*eof && *inpipe == 0 && !*shut) {
		shutdown(to, SHUT_WR);
		*shut = true;
	}
	(void)c;
	return 0;
}

/* Puts the splice pipes back: an idle kept-alive connection holds none. */
void proxy_pipes_close(struct conn *c)
{
	pipe_put(c->w, c->pu, c->pu_n, true);
	pipe_put(c->w, c->pd, c->pd_n, true);
	c->pu_n = c->pd_n = 0;
	c->pu_full = c->pd_full = false;
}

/* Between wakeups a tunnel holds a pipe only with bytes in it (a drained
 * one went back in proxy_tunnel()), so its timer has only the idle timeout
 * to look after. */
uint64_t proxy_tunnel_quiet(const struct conn *c, uint64_t now, uint64_t idle_ms)
{
	uint64_t quiet = now - c->t_last;

	return quiet >= idle_ms ? 0 : idle_ms - quiet;
}

/* The pipes of a tunnel for one wakeup: those it holds (bytes wait in
 * them), else the worker's (every wakeup of a tunnel passes here). */
static int tunnel_pipes(struct conn *c)
{
	if ((c->pu[0] < 0 && proxy_pipe_get(c->w, c->pu) < 0) ||
	    (c->pd[0] < 0 && proxy_pipe_get(c->w, c->pd) < 0))
		return -1;
	return 0;
}

enum step proxy_tunnel(struct conn *c)
{
	uint64_t up0 = c->up, down0 = c->down;
	uint32_t cm = 0, um = 0;

	if (tunnel_pipes(c) < 0)
		return proxy_conn_end(c, PROXY_ERROR, SL_REASON_OUT_OF_PIPES);
	if (splice_dir(c, c->cev.fd, c->uev.fd, c->pu, &c->pu_n, &c->c_eof, &c->u_shut, &c->pu_full,
		       &c->up) < 0 ||
	    splice_dir(c, c->uev.fd, c->cev.fd, c->pd, &c->pd_n, &c->u_eof, &c->c_shut, &c->pd_full,
		       &c->down) < 0) {
		return proxy_conn_end(c, PROXY_ALLOW, SL_REASON_RESET);
	}
	/* A drained pipe goes back to the worker: the tunnel holds one only
	 * while bytes wait in it for a side that does not read. */
	if (c->pu_n == 0)
		pipe_put(c->w, c->pu, 0, c->up != up0);
	if (c->pd_n == 0)
		pipe_put(c->w, c->pd, 0, c->down != down0);
	metrics_bytes(c->up - up0, c->down - down0);
	if (c->up != up0 || c->down != down0)
		c->t_last = loop_now_ms(c->w->loop);
	if (c->u_shut && c->c_shut) {
		return proxy_conn_end(c, PROXY_ALLOW, SL_REASON_ALLOWED);
	}
	/* Backpressure: read a side only while its pipe has room; wait for
	 * writability only while a pipe holds bytes. */
	if (!c->c_eof && c->pu_n < PIPE_CAP && !c->pu_full)
		cm |= EPOLLIN;
	if (c->pd_n > 0)
		cm |= EPOLLOUT;
	if (!c->u_eof && c->pd_n < PIPE_CAP && !c->pd_full)
		um |= EPOLLIN;
	if (c->pu_n > 0)
		um |= EPOLLOUT;
	/* A side's half-close is looked for until its EOF is read: after it,
	 * epoll would report it at every wait. */
	if (!c->c_eof)
		cm |= EPOLLRDHUP;
	if (!c->u_eof)
		um |= EPOLLRDHUP;
	proxy_want(c, cm, um);
	return STEP_AGAIN;
}

static enum step start_tunnel(struct conn *c)
{
	uint64_t idle_ms = policy_limits(c->pol)->idle_timeout_sec * 1000;

	free(c->in);
	c->in = NULL;
	proxy_pipes_close(c); /* a body's, if one was left */
	c->t_last = loop_now_ms(c->w->loop);
	if (tunnel_pipes(c) < 0)
		return proxy_conn_end(c, PROXY_ERROR, SL_REASON_OUT_OF_PIPES);
	loop_timer_arm(c->w->loop, &c->timer, idle_ms);
	c->st = CS_TUNNEL;
	return STEP_NEXT;
}

/* The tunnel, once its first bytes are examined: those the client sent
 * before the 200 are written first (proxy_establish()). */
enum step proxy_tunnel_after_peek(struct conn *c)
{
	if (!c->early)
		return start_tunnel(c);
	c->st = CS_ESTABLISH;
	return STEP_NEXT;
}

/* After "200 Connection established": bytes the client sent early go first. */
enum step proxy_establish(struct conn *c)
{
	int r = c->out ? proxy_write_out(c, false, c->out, c->out->len, NULL) : 1;

	if (r < 0) {
		return proxy_conn_end(c, PROXY_ALLOW, SL_REASON_CLIENT_GONE);
	}
	if (r == 0) {
		proxy_want(c, EPOLLOUT, 0);
		return STEP_AGAIN;
	}
	proxy_out_drop(c);
	if (c->transparent && !c->silent) {
		/* proxy_sniff() has examined the first bytes already. */
		if (c->intercept)
			return proxy_start_tls(c);
		return start_tunnel(c);
	}
	if (!c->transparent && c->in && c->in->len > c->in->pos && !c->early) {
		/* The client did not wait for the 200: what it sent is examined
		 * as a tunnel's first bytes are (proxy_peek()), from c->in and then
		 * from the socket, and goes first if the tunnel is spliced. */
		proxy_buf_compact(c->in);
		c->early = true;
		c->head_started = false;
		c->st = CS_PEEK;
		return STEP_NEXT;
	}
	if (c->in && c->in->len > c->in->pos) {
		/* Examined: the bytes sent before the 200 go first. */
		r = proxy_write_out(c, true, c->in, c->in->len, &c->up);
		if (r < 0) {
			return proxy_conn_end(c, PROXY_ALLOW, SL_REASON_UPSTREAM_GONE);
		}
		if (r == 0) {
			proxy_want(c, 0, EPOLLOUT);
			return STEP_AGAIN;
		}
		return start_tunnel(c);
	}
	if (!c->in) {
		c->in = proxy_buf_new(c->w->b->cfg.max_head_bytes);
		if (!c->in)
			return proxy_conn_end(c, PROXY_ERROR, SL_REASON_OUT_OF_MEMORY);
	}
	c->in->pos = c->in->len = 0;
	c->head_started = false;
	/* The client owes its first bytes within head_timeout; where raw TCP
	 * is allowed, an idle tunnel may wait as long as any tunnel. */
	loop_timer_arm(c->w->loop, &c->timer,
		       c->raw_ok ? policy_limits(c->pol)->idle_timeout_sec * 1000
				 : c->w->limits->head_timeout_ms);
	c->st = CS_PEEK;
	return STEP_NEXT;
}
