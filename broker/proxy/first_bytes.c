// SPDX-License-Identifier: MIT
/* First bytes: the request head, a tunnel's first bytes, the transparent sniff. */
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

/* A worker has one request head between proxy_read_head() and proxy_start_request()
 * at a time, mostly: one spare struct parsed (4 KiB) per thread saves a
 * malloc() and a free() per request. proxy_close_all() frees it. */
static __thread struct parsed *spare_parsed;

struct parsed *proxy_parsed_new(void)
{
	struct parsed *ps = spare_parsed;

	if (ps) {
		spare_parsed = NULL;
		return ps;
	}
	return malloc(sizeof(*ps));
}

void proxy_parsed_free(struct parsed *ps)
{
	if (ps && !spare_parsed) {
		spare_parsed = ps;
		return;
	}
	free(ps);
}

/* The worker's spare, when it stops (proxy_close_all()). */
void proxy_parsed_spare_drop(void)
{
	free(spare_parsed);
	spare_parsed = NULL;
}

static int looks_like_http(const char *p, size_t n, bool raw_ok);
static enum step start_inner_http(struct conn *c);

/* What a connection's first bytes are (see peek_first()). */
enum first_bytes { FB_WAIT, FB_GONE, FB_HTTP, FB_OTHER, FB_HELLO, FB_BAD_HELLO };

/*
 * Peeks (never consumes) the first bytes from the sandbox: an HTTP request,
 * a TLS ClientHello (FB_HELLO: parsed into *@hp, which the caller frees),
 * or anything else. Bytes the client sent before a CONNECT's 200 were
 * consumed with its head; they are in c->in (c->in->len of them) and come
 * first. Until the bytes proxy_decide (a ClientHello is whole, or a request line
 * has its method and a space) it waits for more, edge-triggered: the
 * peeked bytes stay in the socket, so level-triggered readiness would
 * spin. The first byte arms the head timeout.
 */
static enum first_bytes peek_first(struct conn *c, struct tls_hello **hp)
{
	size_t off = c->in->len, n;
	ssize_t k = recv(c->cev.fd, c->in->data + off, c->in->cap - off, MSG_PEEK);
	bool ended = k == 0 || (k < 0 && errno != EAGAIN);
	int r;

	*hp = NULL;
	n = off + (k > 0 ? (size_t)k : 0);
	if (n == 0) {
		if (ended)
			return FB_GONE;
		/* A server that speaks first ends the wait too (server_spoke()). */
		proxy_want(c, EPOLLIN | EPOLLET,
			   c->raw_ok && c->uev.fd >= 0 ? EPOLLIN | EPOLLRDHUP : 0);
		return FB_WAIT;
	}
	if (!c->head_started) {
		c->head_started = true;
		loop_timer_arm(c->w->loop, &c->timer, c->w->limits->head_timeout_ms);
	}
	if ((uint8_t)c->in->data[0] != 0x16) {
		r = looks_like_http(c->in->data, n, c->raw_ok);
		if (r >= 0)
			return r ? FB_HTTP : FB_OTHER;
		if (n == c->in->cap)
			return FB_OTHER; /* a token longer than a head: not HTTP */
	} else {
		*hp = malloc(sizeof(**hp));
		if (!*hp)
			return FB_GONE;
		r = tls_parse_client_hello((const uint8_t *)c->in->data, n, *hp);
		if (r == 1)
			return FB_HELLO;
		free(*hp);
		*hp = NULL;
		if (r != 0 || n == c->in->cap)
			return FB_BAD_HELLO;
	}
	/* Not decided yet: a part of a ClientHello or of a method. */
	if (ended)
		return FB_GONE;
	proxy_want(c, EPOLLIN | EPOLLET, 0);
	return FB_WAIT;
}

/*
 * Plain HTTP inside a CONNECT tunnel goes through the HTTP path, request by
 * request, each bound to the tunnel's host like a request inside
 * intercepted TLS: a tunnel to an allowed host is no way to reach another
 * one by its Host header.
 */
static enum step start_inner_http(struct conn *c)
{
	c->proto = "connect";
	proxy_audit(c, PROXY_ALLOW, SL_REASON_HTTP_IN_TUNNEL);
	c->proto = "http";
	c->inner = true;
	c->intercept = false;
	c->is_connect = false;
	c->raw = false;
	c->upstream_reusable = true;
	c->up = c->down = 0;
	c->method[0] = c->path[0] = '\0';
	c->head_started = false;
	/* The peeked bytes are still in the socket; those sent before the 200
	 * (c->in->len of them) are read first. */
	c->in->pos = 0;
	c->st = CS_HEAD;
	proxy_want(c, EPOLLIN, 0);
	loop_timer_arm(c->w->loop, &c->timer, c->w->limits->head_timeout_ms);
	return STEP_NEXT;
}

/*
 * Has the server spoken first (or hung up) while the client said nothing?
 * Only where the rule allows raw TCP: there a server-first protocol (SMTP,
 * SSH banners) is spliced once the server has spoken. Elsewhere, and once
 * the client has begun, only the client's first bytes decide.
 */
static bool server_spoke(struct conn *c)
{
	if (!c->raw_ok || c->head_started || c->uev.fd < 0)
		return false;
	return !proxy_fd_quiet(c->uev.fd);
}

/*
 * A tunnel's first bytes, peeked (never consumed) once the upstream is
 * connected: after a CONNECT's "200 Connection established", or on the
 * transparent path after the client stayed silent (c->silent). A TLS
 * ClientHello must name the tunnel's host in its SNI (no domain fronting)
 * and is intercepted when the host is in a credential's scope; HTTP goes
 * request by request through the HTTP path, bound to the host; anything
 * else passes only where the rule allows raw TCP. Silence is never a
 * reason to splice: the wait ends when the client speaks, when the server
 * speaks first (raw TCP rules only), or at the timer (proxy_on_timer()).
 */
enum step proxy_peek(struct conn *c)
{
	struct tls_hello *h;
	bool sni_ok, ech;

	switch (peek_first(c, &h)) {
	case FB_WAIT:
		if (server_spoke(c))
			return proxy_tunnel_after_peek(c);
		return STEP_AGAIN;
	case FB_GONE:
		return proxy_conn_end(c, PROXY_ALLOW, SL_REASON_CLIENT_GONE);
	case FB_HTTP:
		return start_inner_http(c);
	case FB_OTHER:
		c->raw = true; /* past the 200: a refusal is a reset */
		if (!c->raw_ok)
			return proxy_reply(c, 0, PROXY_DENY, SL_REASON_RAW_TCP_NOT_ALLOWED);
		return proxy_tunnel_after_peek(c);
	case FB_BAD_HELLO:
		c->raw = true;
		return proxy_reply(c, 0, PROXY_DENY, SL_REASON_BAD_CLIENT_HELLO);
	case FB_HELLO:
		break;
	}
	c->raw = true;
	if (h->sni_present)
		proxy_note_target(c, h->sni_raw, h->sni_raw_len);
	if (c->transparent) {
		/* Connected as "tcp" after silence: now it is TLS. */
		c->proto = "tls";
		c->intercept = proxy_intercepted(c->pol, c->host);
	}
	/* A literal destination has no name for an SNI to match. */
	sni_ok = (c->transparent && !c->orig_synthetic) || !h->sni_present ||
		 (!h->sni_invalid && proxy_host_same(h->sni, c->host));
	ech = h->has_ech;
	free(h);
	if (!sni_ok)
		return proxy_reply(c, 0, PROXY_DENY, SL_REASON_SNI_MISMATCH);
	if (ech && !c->intercept)
		/* The inner, encrypted ClientHello would pick the site. */
		return proxy_reply(c, 0, PROXY_DENY, SL_REASON_ECH_REFUSED);
	if (c->intercept && c->early) {
		/* Part of its ClientHello is consumed: the TLS library cannot
		 * have it. A client of a credential's host waits for the 200. */
		return proxy_reply(c, 0, PROXY_DENY, SL_REASON_EARLY_CLIENT_HELLO);
	}
	if (c->intercept)
		return proxy_start_tls(c);
	return proxy_tunnel_after_peek(c);
}

/* Is the client to be waited for before it is read (see c_idle)? Once. */
static bool c_idle_wait(struct conn *c)
{
	bool idle = c->c_idle;

	c->c_idle = false;
	return idle;
}

enum step proxy_read_head(struct conn *c)
{
	struct http_request *req;
	struct parsed *ps;
	ssize_t got = 0;
	int hl;
	enum step s;

	if (!c->in) {
		c->in = proxy_buf_new(c->w->b->cfg.max_head_bytes);
		if (!c->in)
			return proxy_conn_end(c, PROXY_ERROR, SL_REASON_OUT_OF_MEMORY);
	}
	if (c->in->len == c->in->pos) {
		got = c_idle_wait(c) ? -EAGAIN : proxy_read_into(c, false, c->in);
		if (got == -EAGAIN) {
			proxy_want(c, EPOLLIN, c->uev.fd >= 0 ? EPOLLRDHUP : 0);
			return STEP_AGAIN;
		}
		if (got <= 0) {
			return proxy_close(c);
		}
	}
	if (!c->head_started) {
		c->head_started = true;
		c->t_req = loop_now_ms(c->w->loop);
		loop_timer_arm(c->w->loop, &c->timer, c->w->limits->head_timeout_ms);
		/* Each request meets the policy in force when it begins: a
		 * reload reaches kept-alive connections too. */
		proxy_refresh_policy(c);
	}
	ps = c->parsed ? c->parsed : proxy_parsed_new();
	c->parsed = NULL;
	if (!ps)
		return proxy_conn_end(c, PROXY_ERROR, SL_REASON_OUT_OF_MEMORY);
	req = &ps->req;
	hl = http_parse_request(c->in->data + c->in->pos, c->in->len - c->in->pos,
				c->w->b->cfg.max_head_bytes, req);
	/* Whatever the parser made of it, the audit line shows what was asked
	 * (once a head is whole or refused: a slow head is not rescanned). */
	if (hl != 0)
		proxy_note_head_target(c, c->in->data + c->in->pos, c->in->len - c->in->pos);
	if (hl == 0) {
		c->parsed = ps; /* reused for the next try */
		proxy_buf_compact(c->in);
		if (c->in->len == c->in->cap) {
			proxy_note_head_target(c, c->in->data + c->in->pos,
					       c->in->len - c->in->pos);
			return proxy_reply(c, 400, PROXY_DENY, SL_REASON_HEAD_TOO_LARGE);
		}
		got = proxy_read_into(c, false, c->in);
		if (got == -EAGAIN) {
			proxy_want(c, EPOLLIN, 0);
			return STEP_AGAIN;
		}
		if (got <= 0) {
			return proxy_close(c);
		}
		return STEP_NEXT;
	}
	if (hl < 0) {
		/* The parser says why in the contract's words (http.h). */
		int why = req->error ? sl_reason_from_name(req->error) : SL_REASON_BAD_REQUEST;

		proxy_parsed_free(ps);
		c->method[0] = c->path[0] = '\0';
		if (why == SL_REASON_NUMERIC_HOST) {
			/* Not a kept-alive connection's last host: "target" has
			 * what this request named. */
			if (!c->transparent && !c->inner && !c->cssl) {
				c->host[0] = '\0';
				c->literal = false;
				c->naddrs = 0;
			}
			return proxy_deny(c, SL_REASON_ADDRESS_LITERAL);
		}
		if (hl == -EMSGSIZE)
			why = SL_REASON_HEAD_TOO_LARGE;
		return proxy_reply(c, 400, PROXY_DENY, why < 0 ? SL_REASON_BAD_REQUEST : why);
	}
	/* From here the resolver and connect deadlines bound the wait. */
	loop_timer_arm(c->w->loop, &c->timer,
		       c->w->limits->connect_timeout_ms + c->w->limits->resolve_timeout_ms);
	c->head_len = hl;
	ps->pos = c->in->pos;
	ps->len = hl;
	s = proxy_decide(c, ps);
	if (c->is_connect && c->parsed) {
		/* Nothing of a CONNECT's head is written upstream. */
		proxy_parsed_free(c->parsed);
		c->parsed = NULL;
	}
	if (s == STEP_NEXT && c->st == CS_HEAD)
		return proxy_start_request(c); /* reused upstream connection */
	return s;
}

/*
 * Can the first bytes be an HTTP request? Return: 1 when they are, 0 when
 * they cannot be, -1 when they may yet (a method split over segments).
 *
 * Where the rule does not allow raw TCP (@raw_ok false), the test is what
 * a lenient server would take for a request line: empty lines, then a
 * token of any case and length, then a space or a tab. Such bytes go to
 * the strict parser, which forwards or refuses them; nothing that some
 * server reads as HTTP is spliced unexamined. Where raw TCP is allowed,
 * only an upper-case method and a space count, so that a banner such as
 * "SSH-2.0-OpenSSH_9.2p1 Debian" is not taken for a request.
 */
static int looks_like_http(const char *p, size_t n, bool raw_ok)
{
	size_t i = 0, t;

	if (raw_ok) {
		for (i = 0; i < n && i < 16; i++) {
			if (p[i] == ' ')
				return i > 0;
			if (p[i] < 'A' || p[i] > 'Z')
				return 0;
		}
		return i < 16 ? -1 : 0;
	}
	while (i < n && (p[i] == '\r' || p[i] == '\n'))
		i++;
	for (t = i; t < n; t++) {
		unsigned char ch = (unsigned char)p[t];

		if (ch == ' ' || ch == '\t')
			return t > i;
		if (!http_is_tchar(ch))
			return 0;
	}
	return -1;
}

static enum step as_tunnel(struct conn *c, const char *proto)
{
	c->proto = proto;
	c->raw = true;
	c->is_connect = true;
	c->method[0] = c->path[0] = '\0';
	loop_timer_arm(c->w->loop, &c->timer,
		       c->w->limits->connect_timeout_ms + c->w->limits->resolve_timeout_ms);
	return proxy_decide_target(c);
}

/*
 * Peeks (never consumes) the first bytes: a TLS ClientHello is matched by its
 * SNI, an HTTP request goes through the HTTP path with its Host checked, and
 * anything else is tunnelled by name where the rule allows raw TCP. After
 * SNIFF_MS of silence the broker connects and proxy_peek() waits for either side
 * (a protocol where the server speaks first). Edge-triggered while
 * waiting: the peeked bytes stay in the socket, so level-triggered
 * readiness would spin.
 */
enum step proxy_sniff(struct conn *c, bool timed_out)
{
	struct tls_hello *h;
	bool sni_ok, ech;

	if (timed_out) {
		c->silent = true;
		return as_tunnel(c, "tcp");
	}
	switch (peek_first(c, &h)) {
	case FB_WAIT:
		return STEP_AGAIN;
	case FB_GONE:
		return proxy_close(c);
	case FB_HTTP:
		c->proto = "http";
		c->st = CS_HEAD;
		c->head_started = false;
		proxy_want(c, EPOLLIN, 0);
		return STEP_NEXT;
	case FB_OTHER:
		c->need_raw = true; /* proxy_decide_target() refuses it unless raw_tcp */
		return as_tunnel(c, "tcp");
	case FB_BAD_HELLO:
		c->proto = "tls";
		c->raw = true;
		return proxy_reply(c, 0, PROXY_DENY, SL_REASON_BAD_CLIENT_HELLO);
	case FB_HELLO:
		break;
	}
	c->proto = "tls";
	c->raw = true;
	if (h->sni_present)
		proxy_note_target(c, h->sni_raw, h->sni_raw_len);
	sni_ok = !c->orig_synthetic || !h->sni_present ||
		 (!h->sni_invalid && proxy_host_same(h->sni, c->host));
	ech = h->has_ech;
	free(h);
	if (!sni_ok)
		return proxy_reply(c, 0, PROXY_DENY, SL_REASON_SNI_MISMATCH);
	if (ech && !proxy_intercepted(c->pol, c->host))
		/* The inner, encrypted ClientHello would pick the site. */
		return proxy_reply(c, 0, PROXY_DENY, SL_REASON_ECH_REFUSED);
	return as_tunnel(c, "tls");
}
