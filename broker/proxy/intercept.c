// SPDX-License-Identifier: MIT
/* TLS interception: the sandbox's handshake and the upstream one. */
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

/* Intercepting: the sandbox's TLS ends here, with a leaf for c->host
 * signed by the sandbox's CA. */
enum step proxy_start_tls(struct conn *c)
{
	SSL_CTX *ctx = c->sb->ca ? tls_leaf_ctx(c->sb->ca, c->host) : NULL;

	c->raw = true; /* until the handshake is done, refusals are resets */
	if (!ctx)
		return proxy_reply(c, 0, PROXY_ERROR, SL_REASON_TLS_LEAF_FAILED);
	c->cssl = SSL_new(ctx);
	SSL_CTX_free(ctx);
	if (!c->cssl || SSL_set_fd(c->cssl, c->cev.fd) != 1) {
		ERR_clear_error();
		return proxy_reply(c, 0, PROXY_ERROR, SL_REASON_OUT_OF_MEMORY);
	}
	SSL_set_mode(c->cssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* In-TLS requests get a fresh head buffer from proxy_read_head(). */
	free(c->in);
	c->in = NULL;
	c->head_started = false;
	loop_timer_arm(c->w->loop, &c->timer, c->w->limits->head_timeout_ms);
	c->st = CS_TLS_ACCEPT;
	proxy_want(c, EPOLLIN, 0);
	return STEP_NEXT;
}

enum step proxy_tls_accept(struct conn *c)
{
	ssize_t r;
	int k;

	ERR_clear_error();
	k = SSL_accept(c->cssl);
	if (k != 1) {
		r = proxy_ssl_result(c, false, c->cssl, k);
		if (r == -EAGAIN) {
			proxy_want(c, c->cssl_want, 0);
			return STEP_AGAIN;
		}
		/* Most often the sandbox does not trust its CA (a client with
		 * its own trust store): nothing was sent upstream. */
		return proxy_reply(c, 0, PROXY_DENY, SL_REASON_CLIENT_TLS);
	}
	c->raw = false;
	c->is_connect = false;
	c->tls_first = true;
	c->st = CS_TLS_CONNECT;
	return STEP_NEXT;
}

/* The upstream side of an intercepted connection: TLS verified against
 * upstream_ca (or the system store) and c->host. */
enum step proxy_tls_connect(struct conn *c)
{
	ssize_t r;
	int k;

	if (!c->ussl) {
		c->ussl = SSL_new(c->w->b->upstream_ctx);
		if (!c->ussl || SSL_set_fd(c->ussl, c->uev.fd) != 1 ||
		    tls_upstream_prepare(c->ussl, c->host) < 0) {
			ERR_clear_error();
			return proxy_reply(c, 502, PROXY_ERROR, SL_REASON_UPSTREAM_TLS);
		}
		SSL_set_mode(c->ussl,
			     SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
		loop_timer_arm(c->w->loop, &c->timer, c->w->limits->connect_timeout_ms);
	}
	ERR_clear_error();
	k = SSL_connect(c->ussl);
	if (k != 1) {
		long vr = SSL_get_verify_result(c->ussl);

		r = proxy_ssl_result(c, true, c->ussl, k);
		if (r == -EAGAIN) {
			proxy_want(c, 0, c->ussl_want);
			return STEP_AGAIN;
		}
		log_info("proxy: %s: %s:%u: upstream TLS failed: %s", c->sb->name, c->host, c->port,
			 vr != X509_V_OK ? X509_verify_cert_error_string(vr) : "handshake failed");
		return proxy_reply(c, 502, PROXY_ERROR, SL_REASON_UPSTREAM_TLS);
	}
	loop_timer_cancel(c->w->loop, &c->timer);
	c->upstream_reusable = true;
	if (!c->tls_first)
		return proxy_start_request(c);
	/* The CONNECT (or the transparent connection) is one audit line;
	 * each request inside is one more. */
	c->tls_first = false;
	if (!c->transparent)
		c->proto = "connect";
	proxy_audit(c, PROXY_ALLOW, SL_REASON_INTERCEPTED);
	c->proto = "https";
	c->up = c->down = 0;
	c->method[0] = c->path[0] = '\0';
	c->head_started = false;
	c->st = CS_HEAD;
	loop_timer_arm(c->w->loop, &c->timer, policy_limits(c->pol)->idle_timeout_sec * 1000);
	return STEP_NEXT;
}
