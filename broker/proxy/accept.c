// SPDX-License-Identifier: MIT
/* Accepting connections, and what the rest of the broker asks of them. */
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

static __thread struct worker *cur_worker;

static void refuse_now(int fd, int status, const char *reason)
{
	char msg[300];
	int n = snprintf(msg, sizeof(msg),
			 "HTTP/1.1 %d %s\r\nX-Sluice-Reason: %s\r\nContent-Type: text/plain\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\nsluice: refused (%s)\n",
			 status, proxy_status_text(status), reason, strlen(reason) + 19, reason);

	if (send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* The client is gone; nothing to tell it. */
	}
	shutdown(fd, SHUT_WR);
	close(fd);
}

static void reset_now(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

static void sniff_raw_ok(struct conn *c);
/* "ADDR:PORT" ("[ADDR]:PORT" for IPv6), the target of a connection that
 * has named nothing yet. Return: @buf. */
static const char *addr_port_text(const struct sl_addr *a, uint16_t port, char *buf, size_t len)
{
	char t[ADDR_STRLEN];

	addr_format(a, t, sizeof(t));
	snprintf(buf, len, addr_is_v4(a) ? "%s:%u" : "[%s]:%u", t, port);
	return buf;
}

/*
 * A redirected connection: where was it going? A synthetic address stands
 * for the name the DNS filter gave it; anything else is a literal that only
 * a cidr rule allows. Return: 0, or -1 when it cannot go anywhere (then @c
 * is refused and ended: the caller runs it, which frees it).
 */
static int transparent_setup(struct conn *c)
{
	struct sockaddr_in od;
	socklen_t ol = sizeof(od);

	c->transparent = true;
	c->st = CS_SNIFF;
	c->proto = "tcp";
	c->raw = true;
	if (getsockopt(c->cev.fd, SOL_IP, SO_ORIGINAL_DST, &od, &ol) < 0) {
		proxy_reply(c, 0, PROXY_ERROR, SL_REASON_NO_ORIGINAL_DESTINATION);
		return -1;
	}
	addr_from_sockaddr((struct sockaddr *)&od, &c->orig_dst, &c->orig_port);
	{
		char t[64];

		/* Until a ClientHello or a request head names one. */
		addr_port_text(&c->orig_dst, c->orig_port, t, sizeof(t));
		proxy_note_target(c, t, strlen(t));
	}
	c->port = c->orig_port;
	c->dst = c->orig_dst;
	if (addr_in_prefix(&c->orig_dst, &c->w->b->cfg.synthetic_net,
			   c->w->b->cfg.synthetic_plen)) {
		c->orig_synthetic = true;
		if (!c->sb->synth ||
		    dns_synth_name(c->sb->synth, &c->orig_dst, c->host, sizeof(c->host)) < 0) {
			c->literal = true;
			proxy_reply(c, 0, PROXY_DENY, SL_REASON_UNKNOWN_SYNTHETIC);
			return -1;
		}
	} else {
		c->literal = true;
		addr_format(&c->orig_dst, c->host, sizeof(c->host));
	}
	c->in = proxy_buf_new(c->w->b->cfg.max_head_bytes);
	if (!c->in) {
		proxy_reply(c, 0, PROXY_ERROR, SL_REASON_OUT_OF_MEMORY);
		return -1;
	}
	sniff_raw_ok(c);
	c->raw = false;
	return 0;
}

/* How strictly the first bytes are read depends on the rule that would
 * allow the destination (looks_like_http()); proxy_decide_target() makes
 * the decision itself later. */
static void sniff_raw_ok(struct conn *c)
{
	struct proxy_target t = {
		.host = c->host, .addr = &c->dst, .port = c->port, .literal = c->literal
	};
	struct proxy_verdict v;

	c->raw_ok = false;
	if (proxy_check_target(c->pol, &t, &v) == PROXY_ALLOW)
		c->raw_ok = v.raw_ok;
}

void proxy_transparent_restart(struct conn *c)
{
	c->st = CS_SNIFF;
	c->proto = "tcp";
	c->raw = false;
	c->is_connect = false;
	c->intercept = false;
	c->need_raw = false;
	c->silent = false;
	c->head_started = false;
	c->method[0] = c->path[0] = '\0';
	c->port = c->orig_port;
	c->dst = c->orig_dst;
	c->naddrs = 0;
	c->rule = -1;
	sniff_raw_ok(c);
	loop_timer_arm(c->w->loop, &c->timer, SNIFF_MS);
}

/*
 * Refuses a connection before it has a struct conn: one audit line, then a
 * 403/429/503 on the explicit port, a reset on the transparent one (where
 * the client may speak TLS or anything else, not HTTP).
 */
static void refuse_early(int fd, bool transparent, const char *sandbox, const struct sl_addr *src,
			 uint16_t sport, int status, enum proxy_decision d, enum sl_reason r)
{
	const char *decision = proxy_decision_name(d), *reason = sl_reason_name(r);
	struct audit_event ev = { .sandbox = sandbox,
				  .proto = transparent ? "tcp" : "connect",
				  .src_addr = src,
				  .src_port = sport,
				  .decision = decision,
				  .reason = reason,
				  .status = transparent ? 0 : status };
	struct sockaddr_in od;
	socklen_t ol = sizeof(od);
	struct sl_addr dst;
	char target[64];

	/* Nothing is read before this refusal; on the transparent port the
	 * destination is what the sandbox connected to. */
	if (transparent && getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &od, &ol) == 0) {
		addr_from_sockaddr((struct sockaddr *)&od, &dst, &ev.dst_port);
		ev.dst_addr = &dst;
		ev.target = addr_port_text(&dst, ev.dst_port, target, sizeof(target));
	}
	audit_log(&ev);
	metrics_decision(ev.proto, decision, reason);
	if (transparent)
		reset_now(fd);
	else
		refuse_now(fd, status, reason);
}

/* A warning that can come with every accept is logged once per this. */
#define ACCEPT_LOG_MS 10000
/* How long the listeners rest when accept() finds no descriptor. */
#define ACCEPT_RETRY_MS 100

/* The connections one sandbox may hold: its policy's limit, or fewer when
 * the descriptors would not hold that many (@lim's sandbox_conn_cap). */
static unsigned sandbox_conn_limit(const struct broker_limits *lim, const struct policy *pol)
{
	unsigned want = policy_limits(pol)->connections;
	unsigned cap = lim->sandbox_conn_cap;

	return cap && cap < want ? cap : want;
}

static void accept_one(struct worker *w, int fd, const struct sockaddr_storage *peer,
		       bool transparent)
{
	struct sandbox *sb;
	struct policy *pol = NULL;
	struct conn *c;
	struct sl_addr src;
	uint16_t sport;
	int one = 1;

	addr_from_sockaddr((const struct sockaddr *)peer, &src, &sport);
	sb = sandbox_lookup(w->b->sandboxes, &src, &pol);
	if (!sb) {
		refuse_early(fd, transparent, NULL, &src, sport, 403, PROXY_DENY,
			     SL_REASON_UNKNOWN_SOURCE);
		return;
	}
	if (atomic_load(&w->b->draining)) {
		refuse_early(fd, transparent, sb->name, &src, sport, 503, PROXY_ERROR,
			     SL_REASON_BROKER_DRAINING);
		goto drop;
	}
	if (atomic_fetch_add(&w->b->total_conns, 1) >= w->limits->max_connections) {
		static struct log_every limit_log;
		uint64_t held;

		atomic_fetch_sub(&w->b->total_conns, 1);
		refuse_early(fd, transparent, sb->name, &src, sport, 503, PROXY_ERROR,
			     SL_REASON_BROKER_CONNECTION_LIMIT);
		/* Each refusal is audited; the log only needs to know it goes on. */
		if (log_every_ok(&limit_log, loop_now_ms(w->loop), ACCEPT_LOG_MS, &held))
			log_warn("proxy: total connection limit %u reached (%llu more times since "
				 "the last line)",
				 w->limits->max_connections, (unsigned long long)held);
		goto drop;
	}
	if (atomic_fetch_add(&sb->conns, 1) >= sandbox_conn_limit(w->limits, pol)) {
		atomic_fetch_sub(&sb->conns, 1);
		atomic_fetch_sub(&w->b->total_conns, 1);
		refuse_early(fd, transparent, sb->name, &src, sport, 429, PROXY_DENY,
			     SL_REASON_CONNECTION_LIMIT);
		goto drop;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		atomic_fetch_sub(&sb->conns, 1);
		atomic_fetch_sub(&w->b->total_conns, 1);
		refuse_early(fd, transparent, sb->name, &src, sport, 503, PROXY_ERROR,
			     SL_REASON_OUT_OF_MEMORY);
		goto drop;
	}
	c->counted = true;
	c->w = w;
	c->sb = sb;
	c->pol = pol;
	c->cev.fd = fd;
	c->src = src;
	c->src_port = sport;
	c->cev.cb = proxy_on_client;
	c->uev.fd = -1;
	c->uev.cb = proxy_on_upstream;
	c->pu[0] = c->pu[1] = c->pd[0] = c->pd[1] = -1;
	c->timer.cb = proxy_on_timer;
	c->resume.cb = proxy_on_resume;
	c->rule = -1;
	c->st = CS_HEAD;
	c->t_req = loop_now_ms(w->loop);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->next = w->conns;
	if (w->conns)
		w->conns->prev = c;
	w->conns = c;
	atomic_fetch_add(&w->n_conns, 1);
	metrics_connection_open();
	c->cev_mask = c->cev_want = EPOLLIN;
	if (loop_add(w->loop, &c->cev, EPOLLIN) < 0) {
		proxy_close(c);
		proxy_conn_run(c); /* frees it */
		return;
	}
	if (transparent && transparent_setup(c) < 0) {
		proxy_conn_run(c);
		return;
	}
	loop_timer_arm(w->loop, &c->timer, transparent ? SNIFF_MS : w->limits->head_timeout_ms);
	return;
drop:
	policy_unref(pol);
	sandbox_put(sb);
}

/* The listeners rested (accept_rest()): listen again. A descriptor may
 * have freed since; if not, accept() fails again and they rest again. */
static void on_accept_retry(struct timer *t)
{
	struct worker *w = container_of(t, struct worker, accept_retry);

	if (w->proxy_ev.fd >= 0)
		loop_mod(w->loop, &w->proxy_ev, EPOLLIN);
	if (w->transparent_ev.fd >= 0)
		loop_mod(w->loop, &w->transparent_ev, EPOLLIN);
}

/*
 * accept() found no descriptor (or no memory) for a connection waiting on
 * @ev. The listener stays readable, so the loop would call us again at once
 * and spin: it stops listening for ACCEPT_RETRY_MS instead, and the
 * connection waits in the backlog until a descriptor frees. The log says
 * so once per ACCEPT_LOG_MS, with a count: the condition can last.
 * Connections being served, and the control socket, go on.
 */
static void accept_rest(struct worker *w, struct ev *ev, int err)
{
	static struct log_every fd_log;
	uint64_t held;

	loop_mod(w->loop, ev, 0);
	if (!loop_timer_armed(&w->accept_retry)) {
		w->accept_retry.cb = on_accept_retry;
		loop_timer_arm(w->loop, &w->accept_retry, ACCEPT_RETRY_MS);
	}
	if (log_every_ok(&fd_log, loop_now_ms(w->loop), ACCEPT_LOG_MS, &held))
		log_warn("proxy: cannot accept: %s; new connections wait, accept retried every "
			 "%d ms (%llu more times since the last line)",
			 strerror(err), ACCEPT_RETRY_MS, (unsigned long long)held);
}

/* Accepts what is waiting on @ev (at most 64 at a time, so that the rest
 * of the loop gets its turn) for the explicit or the transparent path. */
static void accept_batch(struct worker *w, struct ev *ev, bool transparent)
{
	int i;

	cur_worker = w;
	for (i = 0; i < 64; i++) {
		struct sockaddr_storage peer;
		socklen_t pl = sizeof(peer);
		int fd = accept4(ev->fd, (struct sockaddr *)&peer, &pl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM)
				accept_rest(w, ev, errno);
			return;
		}
		accept_one(w, fd, &peer, transparent);
	}
}

void proxy_accept(struct ev *ev, uint32_t events)
{
	(void)events;
	accept_batch(container_of(ev, struct worker, proxy_ev), ev, false);
}

void proxy_accept_transparent(struct ev *ev, uint32_t events)
{
	(void)events;
	accept_batch(container_of(ev, struct worker, transparent_ev), ev, true);
}

void proxy_close_sandbox_post(void *arg)
{
	struct sandbox *sb = arg;
	struct worker *w = cur_worker;
	struct conn *c, *next;

	for (c = w ? w->conns : NULL; c; c = next) {
		next = c->next;
		if (c->sb == sb) {
			/* Audited unless it ended already; freed by the driver. */
			proxy_conn_end(c, PROXY_DENY, SL_REASON_SANDBOX_DELETED);
			proxy_conn_run(c);
		}
	}
	sandbox_put(sb);
}

/*
 * Does @np still allow what @c is connected to: the host (or literal) and
 * port, the address the broker connected to, raw TCP where the tunnel
 * carries it, and interception where its TLS ends at the broker?
 */
static bool still_allowed(const struct conn *c, const struct policy *np)
{
	struct proxy_target t = { .host = c->host,
				  .addr = &c->dst,
				  .port = c->port,
				  .literal = c->literal,
				  .audit = sandbox_audit(c->sb, np) };
	struct proxy_verdict v, va;

	proxy_check_target(np, &t, &v);
	if (v.decision != PROXY_ALLOW && v.decision != PROXY_WOULD_DENY)
		return false;
	if (!c->literal && c->uev.fd >= 0 &&
	    proxy_check_address(np, &c->dst, c->port, GUARD_FROM_NAME, false, &va) != PROXY_ALLOW)
		return false;
	if (c->proto && !strcmp(c->proto, "tcp") && c->raw_ok && !v.raw_ok)
		return false;
	if ((c->cssl || c->intercept) && !proxy_intercepted(np, c->host))
		return false;
	return true;
}

/* @keep_open: what the new policy withdrew stays open, on its old policy
 * (`sluice update --keep-open`). */
static void policy_changed(struct worker *w, bool keep_open)
{
	struct conn *c, *next;

	for (c = w->conns; c; c = next) {
		bool tunnel = c->st == CS_TUNNEL || c->st == CS_PEEK || c->st == CS_ESTABLISH ||
			      c->st == CS_TLS_ACCEPT || c->st == CS_TLS_CONNECT;
		struct policy *np;

		next = c->next;
		if (c->st == CS_HOLD) {
			/* Waits for an answer the new policy may give. */
			np = sandbox_policy(c->sb);
			if (np != c->pol)
				proxy_hold_policy_changed(c, np); /* may free c */
			policy_unref(np);
			continue;
		}
		if (!tunnel && !c->cssl && !c->inner)
			continue; /* a request re-reads the policy when it begins */
		np = sandbox_policy(c->sb);
		if (np == c->pol) {
			policy_unref(np);
			continue;
		}
		if (!still_allowed(c, np)) {
			policy_unref(np);
			if (keep_open)
				continue;
			proxy_conn_end(c, PROXY_DENY, SL_REASON_POLICY_WITHDRAWN);
			proxy_conn_run(c); /* frees it */
			continue;
		}
		policy_unref(np);
		if (c->st == CS_TUNNEL)
			proxy_refresh_policy(c); /* no request of it holds the old one */
	}
}

void proxy_policy_changed_post(void *worker)
{
	policy_changed(worker, false);
}

void proxy_policy_changed_keep_post(void *worker)
{
	policy_changed(worker, true);
}

void proxy_close_all(struct worker *w)
{
	/* Unaudited: the broker is stopping, not the connection failing. */
	while (w->conns) {
		proxy_close(w->conns);
		proxy_conn_run(w->conns);
	}
	proxy_parsed_spare_drop();
	proxy_buf_spare_drop();
}

struct worker *proxy_cur_worker(void)
{
	return cur_worker;
}

void proxy_set_worker(struct worker *w)
{
	cur_worker = w;
}
