// SPDX-License-Identifier: MIT
/* Resolving and connecting to an address the guard checked. */
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

void proxy_on_resolved(struct resolve_req *req, int status, const struct sl_addr *addrs,
			size_t n, void *arg)
{
	struct conn *c = arg;
	struct guard_result g = { .verdict = GUARD_ALLOW };
	const char *first_refusal = NULL;
	size_t i;

	(void)req;
	if (c->st != CS_RESOLVE)
		return; /* refused meanwhile (proxy_reply() cancels, this is a backstop) */
	c->naddrs = 0;
	c->ai = 0;
	/* Each refusal below leaves @c to proxy_conn_run(), which frees it if it
	 * ended (a reset on a raw tunnel): nothing here uses @c after it. */
	if (status < 0) {
		if (status == -ETIMEDOUT)
			proxy_reply(c, 504, "error", "dns-timeout");
		else
			proxy_reply(c, 502, "error", "dns-failure");
		proxy_conn_run(c);
		return;
	}
	for (i = 0; i < n; i++) {
		policy_guard(c->pol, &addrs[i], c->port, GUARD_FROM_NAME, &g);
		if (g.verdict == GUARD_ALLOW && broker_is_local(&addrs[i], c->port)) {
			if (!first_refusal) {
				first_refusal = "broker-address";
				c->dst = addrs[i];
			}
			continue;
		}
		if (g.verdict != GUARD_ALLOW) {
			if (!first_refusal) {
				first_refusal = g.reason;
				c->dst = addrs[i];
			}
			continue;
		}
		c->addrs[c->naddrs++] = addrs[i];
	}
	if (c->naddrs == 0) {
		c->literal = true; /* so the audit line shows the refused address */
		proxy_deny(c, first_refusal ? first_refusal : "address-denied");
		proxy_conn_run(c);
		return;
	}
	c->st = CS_RESOLVE;
	c->deny_reason = NULL;
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
			c->deny_reason = "connect-failed";
			continue;
		}
		c->uev.fd = fd;
		c->uev_mask = c->uev_want = EPOLLOUT;
		if (loop_add(c->w->loop, &c->uev, EPOLLOUT) < 0) {
			close(fd);
			c->uev.fd = -1;
			continue;
		}
		loop_timer_arm(c->w->loop, &c->timer, broker.cfg.connect_timeout_ms);
		c->st = CS_CONNECT;
		proxy_want(c, 0, EPOLLOUT);
		return STEP_AGAIN;
	}
	if (c->deny_reason && !strcmp(c->deny_reason, "connect-timeout"))
		return proxy_reply(c, 504, "error", "connect-timeout");
	return proxy_reply(c, 502, "error", "connect-failed");
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
		c->deny_reason = "connect-failed";
		c->st = CS_RESOLVE;
		return STEP_NEXT;
	}
	metrics_connect_latency_us(proxy_now_us() - c->connect_start_us);
	loop_timer_cancel(c->w->loop, &c->timer);
	snprintf(c->conn_host, sizeof(c->conn_host), "%s", c->host);
	c->conn_port = c->port;
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
			return proxy_conn_end(c, "error", "out-of-memory");
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
