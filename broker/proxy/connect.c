// SPDX-License-Identifier: MIT
/* From a request head to a connected upstream: the decision acted on,
 * resolution, and a connect to an address the guard checked. */
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

static void copy_slice(char *dst, size_t dlen, const struct http_slice *s)
{
	size_t n = s->len < dlen - 1 ? s->len : dlen - 1;

	memcpy(dst, s->ptr, n);
	dst[n] = '\0';
}

static enum proxy_mode mode_of(const struct conn *c)
{
	if (c->cssl)
		return PROXY_MODE_IN_TLS;
	if (c->inner)
		return PROXY_MODE_IN_TUNNEL;
	return c->transparent ? PROXY_MODE_TRANSPARENT : PROXY_MODE_EXPLICIT;
}

/*
 * Decides on the head in @ps (decide.c's checks, in the contract's order),
 * acts on a refusal (proxy_refuse()), and goes on to resolve or connect
 * (proxy_decide_target()). The head is kept in c->parsed (for
 * proxy_start_request()) unless the request is refused for its
 * placeholders, when it is freed.
 */
enum step proxy_decide(struct conn *c, struct parsed *ps)
{
	struct http_request *req = &ps->req;
	const struct http_authority *a = &req->authority;
	const char *head = c->in->data + c->in->pos;
	enum proxy_mode mode = mode_of(c);
	struct proxy_bound bound = { .host = c->host, .port = c->port };
	struct proxy_verdict v;
	enum step s;

	c->is_connect = req->method_id == HTTP_METHOD_CONNECT;
	/* A CONNECT head is consumed here; an HTTP head is consumed when it is
	 * rewritten for upstream (proxy_start_request). */
	if (c->is_connect)
		c->in->pos += (size_t)c->head_len;
	c->client_keepalive = req->keep_alive && !c->is_connect;
	c->head_req = req->method_id == HTTP_METHOD_HEAD;
	copy_slice(c->method, sizeof(c->method), &req->method);
	if (!c->is_connect)
		copy_slice(c->path, sizeof(c->path), &req->path);
	else
		c->path[0] = '\0';
	/* The audit line of a refusal below names the host asked for. */
	if (mode == PROXY_MODE_EXPLICIT) {
		if (req->has_authority)
			memcpy(c->host, a->host, a->host_len + 1);
		else
			c->host[0] = '\0'; /* not the last request's */
	}
	/* Placeholders first: one on its way outside its scope is an
	 * exfiltration attempt, and is logged as that whatever else is wrong
	 * with the request. */
	s = proxy_check_credentials(c, req, head, (size_t)c->head_len, &ps->plan);
	if (s != STEP_NEXT || proxy_ending(c)) {
		proxy_parsed_free(ps);
		return s; /* refused: the reply is under way */
	}
	c->parsed = ps; /* @req stays valid; proxy_read_head() drops a CONNECT's */
	if (proxy_check_form(mode, req, &v) != PROXY_ALLOW)
		return proxy_refuse(c, &v);
	if (mode == PROXY_MODE_EXPLICIT) {
		memcpy(c->host, a->host, a->host_len + 1);
		c->port = a->port;
		c->literal = a->is_literal;
		if (c->literal)
			c->dst = a->addr;
		return proxy_decide_target(c);
	}
	if (mode == PROXY_MODE_TRANSPARENT) {
		/* The destination is what the sandbox connected to. */
		bound.port = c->orig_port;
		if (!c->orig_synthetic) {
			/* The address is judged first (proxy_decide_target()
			 * does no I/O for a literal): one no cidr rule allows is
			 * refused as that, whatever the Host says. */
			s = proxy_decide_target(c);
			if (s != STEP_NEXT || proxy_ending(c))
				return s;
			bound.addr = &c->orig_dst;
		}
	}
	if (proxy_check_host(mode, req, &bound, &v) != PROXY_ALLOW)
		return proxy_refuse(c, &v);
	if (mode == PROXY_MODE_TRANSPARENT && !c->orig_synthetic)
		return STEP_NEXT; /* decided above */
	return proxy_decide_target(c);
}

/* What @c asks for, as the checks take it, judged on policy @p. */
struct proxy_target proxy_target_of(const struct conn *c, const struct policy *p)
{
	struct proxy_target t = {
		.host = c->host,
		.addr = &c->dst,
		.port = c->port,
		.literal = c->literal,
		.need_raw = c->need_raw,
		.audit = sandbox_audit(c->sb, p),
	};

	return t;
}

/*
 * Has the kept-alive upstream said nothing since its last answer? Bytes it
 * sent while the connection idled (an answer nobody asked for) would pass
 * for the next request's answer; an EOF means it is gone. A TLS upstream
 * may send records of its own between requests (a session ticket, a key
 * update): what is waiting is read through OpenSSL, which takes those in
 * and says WANT_READ when no application data came with them (a key
 * update that asks for one back too: OpenSSL sends the broker's with the
 * next request; tests/world/tlsidle.c). A byte of application data (it is
 * dropped with the connection), a close_notify, an alert, or anything
 * OpenSSL must write before it can read on, all mean a new connection.
 */
static bool upstream_quiet(struct conn *c)
{
	bool watched = c->u_watched;
	char b;
	int k;

	c->u_watched = false; /* once per response */
	if (c->ussl && SSL_pending(c->ussl) > 0)
		return false;
	/* Watched for EPOLLIN since its last answer ended, and the loop's
	 * last look (epoll_wait(), at least one after that end) found nothing
	 * for it: nothing had come, and no recv() is needed to know it. What
	 * comes after that look is not seen, as what comes after a peek would
	 * not be: both pass before the request is written. */
	if (watched && proxy_upstream_watched_in(c) &&
	    loop_unreported_since(c->w->loop, &c->uev, c->u_quiet_seq))
		return true;
	if (proxy_fd_quiet(c->uev.fd))
		return true;
	if (!c->ussl)
		return false;
	ERR_clear_error();
	k = SSL_read(c->ussl, &b, 1);
	if (k > 0 || SSL_get_error(c->ussl, k) != SSL_ERROR_WANT_READ) {
		ERR_clear_error();
		return false;
	}
	return SSL_pending(c->ussl) == 0;
}

/*
 * May the next request go over the kept-alive upstream? It must be quiet
 * (upstream_quiet()), and its address, judged when it was connected on the
 * policy of that time, is judged again by the policy now in force (an
 * update, a reload), so that a range it denies is not reached over a
 * connection kept from before. Refused, the caller connects anew: resolved
 * again, the usual checks refuse or pick another address.
 */
static bool upstream_still_usable(struct conn *c)
{
	struct proxy_verdict v;

	if (!upstream_quiet(c))
		return false;
	return proxy_check_address(c->pol, &c->conn_dst, c->conn_port, GUARD_FROM_NAME,
				   broker_is_local(c->w->b, &c->conn_dst, c->conn_port),
				   &v) == PROXY_ALLOW;
}

/*
 * The policy's verdict on c->host:c->port (a name, or a literal in c->dst),
 * acted on: a refusal, else resolution or, for a literal allowed by a cidr
 * rule, a connect.
 */
enum step proxy_decide_target(struct conn *c)
{
	struct proxy_target t = proxy_target_of(c, c->pol);
	struct proxy_verdict v;

	if (c->literal) {
		c->naddrs = 0;
		t.local = broker_is_local(c->w->b, &c->dst, c->port);
	}
	proxy_check_target(c->pol, &t, &v);
	c->rule = v.rule;
	if (v.decision == PROXY_ALLOW || v.decision == PROXY_WOULD_DENY ||
	    v.reason == SL_REASON_RAW_TCP_NOT_ALLOWED)
		c->raw_ok = v.raw_ok;
	/* Audit mode: it goes on, to the resolver and the address guard
	 * like an allowed name, and its audit line says what it would have
	 * got. */
	c->would_deny = v.decision == PROXY_WOULD_DENY ? v.reason : SL_REASON_ALLOWED;
	/* ... but not with a credential: refused before anything is
	 * resolved or connected (proxy_start_request() checks again, for a
	 * head planned anew). */
	if (v.decision == PROXY_WOULD_DENY && !c->is_connect && c->parsed &&
	    proxy_check_audit_credentials(c->would_deny, &c->parsed->plan, &v) != PROXY_ALLOW)
		c->would_deny = SL_REASON_ALLOWED;
	/* `unlisted: hold` (not in audit mode, where it goes on): it waits
	 * for approve, refuse or its timeout (hold.c). */
	if (v.decision != PROXY_ALLOW && v.decision != PROXY_WOULD_DENY && proxy_hold_wanted(c, &v))
		return proxy_hold(c);
	if (v.decision != PROXY_ALLOW && v.decision != PROXY_WOULD_DENY)
		return proxy_refuse(c, &v);
	if (c->literal) {
		/* A kept-alive connection's upstream goes: the new one takes
		 * its place (uev) and must not leave the old fd registered. */
		proxy_close_upstream(c);
		c->addrs[0] = c->dst;
		c->naddrs = 1;
		c->ai = 0;
		c->st = CS_RESOLVE;
		return STEP_NEXT;
	}
	if (c->is_connect)
		c->intercept = (!c->transparent || !strcmp(c->proto, "tls")) &&
			       proxy_intercepted(c->pol, c->host);
	if (!c->is_connect && c->uev.fd >= 0 && c->upstream_reusable &&
	    strcmp(c->conn_host, c->host) == 0 && c->conn_port == c->port &&
	    upstream_still_usable(c))
		return STEP_NEXT; /* st is set by the caller */
	proxy_close_upstream(c);
	c->st = CS_RESOLVE;
	c->naddrs = 0;
	if (resolver_lookup(c->w->resolver, c->host, &c->rr, proxy_on_resolved, c) < 0)
		return proxy_reply(c, 502, PROXY_ERROR, SL_REASON_DNS_FAILURE);
	return STEP_AGAIN;
}

void proxy_on_resolved(struct resolve_req *req, int status, const struct sl_addr *addrs, size_t n,
		       void *arg)
{
	struct conn *c = arg;
	struct proxy_verdict v, first = { .decision = PROXY_DENY,
					  .reason = SL_REASON_ADDRESS_DENIED,
					  .status = 403,
					  .rule = -1 };
	bool refused = false;
	size_t i;

	(void)req;
	if (c->st != CS_RESOLVE)
		return; /* refused meanwhile (proxy_end() cancels, this is a backstop) */
	c->naddrs = 0;
	c->ai = 0;
	/* Each refusal below leaves @c to proxy_conn_run(), which frees it if it
	 * ended (a reset on a raw tunnel): nothing here uses @c after it. */
	if (status < 0) {
		if (status == -ETIMEDOUT)
			proxy_reply(c, 504, PROXY_ERROR, SL_REASON_DNS_TIMEOUT);
		else
			proxy_reply(c, 502, PROXY_ERROR, SL_REASON_DNS_FAILURE);
		proxy_conn_run(c);
		return;
	}
	/* Every answer passes the guard; the first refused one is the one the
	 * audit line names if none is left. */
	for (i = 0; i < n; i++) {
		if (proxy_check_address(c->pol, &addrs[i], c->port, GUARD_FROM_NAME,
					broker_is_local(c->w->b, &addrs[i], c->port),
					&v) != PROXY_ALLOW) {
			if (!refused) {
				refused = true;
				first = v;
				c->dst = addrs[i];
			}
			continue;
		}
		c->addrs[c->naddrs++] = addrs[i];
	}
	if (c->naddrs == 0) {
		c->literal = true; /* so the audit line shows the refused address */
		proxy_refuse(c, &first);
		proxy_conn_run(c);
		return;
	}
	c->st = CS_RESOLVE;
	c->connect_error = SL_REASON_CONNECT_FAILED;
	proxy_conn_run(c);
}

/* CS_RESOLVE with addresses: connect to the next checked one. */
enum step proxy_begin_connect(struct conn *c)
{
	struct sockaddr_storage ss;
	unsigned sl;
	int fd, one = 1;

	if (c->naddrs == 0) {
		proxy_want(c, 0, 0); /* the resolver has not answered yet */
		return STEP_AGAIN;
	}
	/* One upstream at a time: uev is about to take a new fd. */
	if (c->uev.fd >= 0)
		proxy_close_upstream(c);
	for (; c->ai < c->naddrs; c->ai++) {
		c->dst = c->addrs[c->ai];
		sl = addr_to_sockaddr(&c->dst, c->port, &ss);
		fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->connect_start_us = proxy_now_us();
		if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
			close(fd);
			c->connect_error = SL_REASON_CONNECT_FAILED;
			continue;
		}
		c->uev.fd = fd;
		c->uev_mask = c->uev_want = EPOLLOUT;
		if (loop_add(c->w->loop, &c->uev, EPOLLOUT) < 0) {
			close(fd);
			c->uev.fd = -1;
			continue;
		}
		loop_timer_arm(c->w->loop, &c->timer, c->w->limits->connect_timeout_ms);
		c->st = CS_CONNECT;
		proxy_want(c, 0, EPOLLOUT);
		return STEP_AGAIN;
	}
	if (c->connect_error == SL_REASON_CONNECT_TIMEOUT)
		return proxy_reply(c, 504, PROXY_ERROR, SL_REASON_CONNECT_TIMEOUT);
	return proxy_reply(c, 502, PROXY_ERROR, SL_REASON_CONNECT_FAILED);
}

enum step proxy_connected(struct conn *c)
{
	int err = 0;
	socklen_t el = sizeof(err);

	if (getsockopt(c->uev.fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		err = errno;
	if (err == EINPROGRESS || err == EALREADY)
		return STEP_AGAIN;
	if (err) {
		proxy_close_upstream(c);
		c->ai++;
		c->connect_error = SL_REASON_CONNECT_FAILED;
		c->st = CS_RESOLVE;
		return STEP_NEXT;
	}
	metrics_connect_latency_us(proxy_now_us() - c->connect_start_us);
	loop_timer_cancel(c->w->loop, &c->timer);
	snprintf(c->conn_host, sizeof(c->conn_host), "%s", c->host);
	c->conn_port = c->port;
	c->conn_dst = c->dst;
	if (c->is_connect && c->transparent) {
		c->st = CS_ESTABLISH; /* the peeked bytes are still in the socket */
		return STEP_NEXT;
	}
	if (c->is_connect) {
		static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

		/* What the client sent after the head (an early ClientHello)
		 * moves to the tunnel; a kept-alive connection's request buffer
		 * (a GET before this CONNECT) goes. */
		proxy_out_drop(c);
		c->out = proxy_buf_new(sizeof(ok));
		if (!c->out)
			return proxy_conn_end(c, PROXY_ERROR, SL_REASON_OUT_OF_MEMORY);
		memcpy(c->out->data, ok, sizeof(ok) - 1);
		c->out->len = sizeof(ok) - 1;
		c->status = 200;
		c->st = CS_ESTABLISH;
		return STEP_NEXT;
	}
	if (c->intercept) {
		c->st = CS_TLS_CONNECT; /* a new upstream connection inside TLS */
		return STEP_NEXT;
	}
	return proxy_start_request(c);
}
