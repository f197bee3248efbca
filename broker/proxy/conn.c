// SPDX-License-Identifier: MIT
/* A connection's life: its end, its replies, its timers and the driver. */
#include <assert.h>
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

static const char *const state_name[] = {
	[CS_SNIFF] = "sniff",
	[CS_HEAD] = "head",
	[CS_HOLD] = "hold",
	[CS_RESOLVE] = "resolve",
	[CS_CONNECT] = "connect",
	[CS_ESTABLISH] = "establish",
	[CS_PEEK] = "peek",
	[CS_TLS_ACCEPT] = "tls-accept",
	[CS_TLS_CONNECT] = "tls-connect",
	[CS_TUNNEL] = "tunnel",
	[CS_REQ] = "request",
	[CS_RESP_HEAD] = "response-head",
	[CS_RESP_BODY] = "response-body",
	[CS_REPLY] = "reply",
	[CS_LINGER] = "linger",
	[CS_CLOSE] = "close",
};
static_assert(sizeof(state_name) / sizeof(state_name[0]) == CS_CLOSE + 1, "a state without a name");

const char *proxy_state_name(enum cstate st)
{
	return (unsigned)st <= CS_CLOSE ? state_name[st] : "unknown";
}

static const char *proto_of(const struct conn *c)
{
	if (c->proto)
		return c->proto;
	return c->is_connect ? "connect" : "http";
}

void proxy_audit(struct conn *c, enum proxy_decision d, enum sl_reason r)
{
	const char *decision, *reason;
	struct audit_event ev;

	/* Audit mode: what went on though the policy would have refused it
	 * says so, with the reason it would have got; an error stays one. */
	if (d == PROXY_ALLOW && c->would_deny != SL_REASON_ALLOWED) {
		d = PROXY_WOULD_DENY;
		r = c->would_deny;
	}
	decision = proxy_decision_name(d);
	reason = sl_reason_name(r);
	ev = (struct audit_event){
		.sandbox = c->sb ? c->sb->name : NULL,
		.proto = proto_of(c),
		.name = c->host[0] ? c->host : NULL,
		.target = c->target[0] ? c->target : NULL,
		.src_addr = &c->src,
		.src_port = c->src_port,
		.dst_addr = c->naddrs || c->literal ? &c->dst : NULL,
		.dst_port = c->port,
		.decision = decision,
		.reason = reason,
		.rule = c->pol && c->rule >= 0 ? policy_rule_text(c->pol, c->rule) : NULL,
		.credential = c->cred_name[0] ? c->cred_name : NULL,
		.method = c->method[0] ? c->method : NULL,
		.path = c->path[0] ? c->path : NULL,
		.bytes_up = c->up,
		.bytes_down = c->down,
		.duration_ms = loop_now_ms(c->w->loop) - c->t_req,
		.status = c->status,
		.mode = c->sb && sandbox_audit(c->sb, c->pol) ? "audit" : NULL,
	};

	audit_log(&ev);
	metrics_decision(ev.proto, decision, reason);
}

void proxy_note_target(struct conn *c, const char *s, size_t n)
{
	size_t i, o = 0, a, at;

	/* A userinfo never stays, whatever its length: kept, a cut here could
	 * take the '@' that the audit line finds it by. It goes as the audit
	 * line shows it, "***@". */
	at = audit_target_userinfo(s, n, &a);
	if (at > a && a + 4 > sizeof(c->target) - 1) {
		n = 0; /* a scheme that long: nothing of it */
	} else if (at > a) {
		memcpy(c->target, s, a);
		memcpy(c->target + a, "***@", 4);
		o = a + 4;
		s += at;
		n -= at;
	}
	if (n > sizeof(c->target) - 1 - o)
		n = sizeof(c->target) - 1 - o;
	for (i = 0; i < n; i++)
		/* A NUL would end the string and hide what follows it. */
		c->target[o + i] = s[i] ? s[i] : (char)0xff;
	c->target[o + n] = '\0';
}

/* The span of @len bytes at @p up to the first of @stop (or the end). */
static size_t span_to(const char *p, size_t len, const char *stop)
{
	size_t i = 0;

	while (i < len && !strchr(stop, p[i]))
		i++;
	return i;
}

void proxy_note_head_target(struct conn *c, const char *head, size_t len)
{
	const char *p = head, *end = head + len, *line;
	size_t n;

	/* A server ignores empty lines before the request line (RFC 9112 2.2). */
	while (p < end && (*p == '\r' || *p == '\n'))
		p++;
	n = span_to(p, (size_t)(end - p), " \t\r\n"); /* the method */
	p += n;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p == end || *p == '\r' || *p == '\n')
		return; /* no target yet: what was noted stays */
	line = p;
	n = span_to(p, (size_t)(end - p), " \t\r\n");
	if (!c->transparent && !c->inner && !c->cssl) {
		proxy_note_target(c, line, n);
		return;
	}
	/* The destination is the connection's: the Host header names it. */
	for (p = line; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (!nl)
			break;
		p = nl + 1;
		/* The head ends at an empty line: a body's "Host:" names
		 * nothing (the client writes the body as it likes). */
		if (p < end && (*p == '\n' || (*p == '\r' && p + 1 < end && p[1] == '\n')))
			break;
		if ((size_t)(end - p) > 5 && !strncasecmp(p, "host:", 5)) {
			p += 5;
			while (p < end && (*p == ' ' || *p == '\t'))
				p++;
			n = span_to(p, (size_t)(end - p), "\r\n");
			while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
				n--;
			proxy_note_target(c, p, n);
			return;
		}
	}
	if (!c->target[0])
		proxy_note_target(c, line, span_to(line, (size_t)(end - line), " \t\r\n"));
}

void proxy_close_upstream(struct conn *c)
{
	if (c->ussl) {
		SSL_free(c->ussl);
		c->ussl = NULL;
		c->ussl_want = 0;
	}
	if (c->uev.fd >= 0) {
		loop_del(c->w->loop, &c->uev);
		close(c->uev.fd);
		c->uev.fd = -1;
		c->uev_mask = c->uev_want = 0;
	}
	c->conn_host[0] = '\0';
	c->upstream_reusable = false;
	c->u_watched = false;
}

/* Frees c->out, wiped first: an upstream head in it may hold an injected
 * secret. */
void proxy_out_drop(struct conn *c)
{
	if (c->out) {
		explicit_bzero(c->out->data, c->out->cap);
		free(c->out);
		c->out = NULL;
	}
}

/* Frees @c: only proxy_conn_run() calls it, once a step has returned. */
static void conn_free(struct conn *c)
{
	struct worker *w = c->w;

	proxy_hold_leave(c);
	resolver_cancel(w->resolver, &c->rr);
	loop_timer_cancel(w->loop, &c->timer);
	loop_timer_cancel(w->loop, &c->resume);
	proxy_close_upstream(c);
	if (c->cssl)
		SSL_free(c->cssl);
	if (c->cev.fd >= 0) {
		loop_del(w->loop, &c->cev);
		close(c->cev.fd);
	}
	proxy_pipes_close(c);
	proxy_parsed_free(c->parsed);
	reflect_clear(&c->refl);
	free(c->in);
	free(c->uin);
	proxy_out_drop(c);
	proxy_framer_free(&c->reqf);
	proxy_framer_free(&c->respf);
	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->counted) {
		atomic_fetch_sub(&c->sb->conns, 1);
		atomic_fetch_sub(&c->w->b->total_conns, 1);
	}
	atomic_fetch_sub(&w->n_conns, 1);
	metrics_connection_close();
	policy_unref(c->pol);
	sandbox_put(c->sb);
	free(c);
	/* The spares serve the next requests of a busy worker; one with no
	 * connection left keeps none, and the memory goes back (io.c). */
	if (!w->conns)
		proxy_buf_spare_drop();
}

const char *proxy_status_text(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 408:
		return "Request Timeout";
	case 429:
		return "Too Many Requests";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return "Error";
	}
}

/* @host, made fit for a one-line text body: printable ASCII only (a Host
 * is the client's to write), at most 100 characters. */
static void body_host(char *out, size_t len, const char *host)
{
	size_t i, o = 0;

	for (i = 0; host[i] && o + 1 < len && i < 100; i++)
		out[o++] = host[i] > 0x20 && host[i] < 0x7f ? host[i] : '?';
	out[o] = '\0';
}

/*
 * The body's sentence: what was refused, named as the client asked for it
 * (HOST:PORT), and why, in words an agent can act on; the reason as the
 * header gives it follows in parentheses.
 */
static int body_text(char *out, size_t len, const struct conn *c, int status, enum sl_reason reason)
{
	const char *why = sl_reason_name(reason);
	char h[101], t[120];

	body_host(h, sizeof(h), c->host);
	if (h[0])
		snprintf(t, sizeof(t), "%s:%u", h, c->port);
	else
		snprintf(t, sizeof(t), "this destination");
	switch (reason) {
	case SL_REASON_NOT_ALLOWLISTED:
		return snprintf(out, len,
				"sluice: %s is not in this sandbox's egress policy (%s)\n", t, why);
	case SL_REASON_PORT_NOT_ALLOWED:
		return snprintf(
			out, len,
			"sluice: %s: the host is in this sandbox's egress policy, not on port "
			"%u (%s)\n",
			t, c->port, why);
	case SL_REASON_ADDRESS_LITERAL:
		return snprintf(
			out, len,
			"sluice: %s is an address no cidr rule of this sandbox's policy allows; "
			"use the host name (%s)\n",
			t, why);
	case SL_REASON_ADDRESS_DENIED:
		return snprintf(
			out, len,
			"sluice: %s resolves into a denied range (private, loopback, metadata "
			"or other special-purpose addresses) (%s)\n",
			t, why);
	case SL_REASON_PLACEHOLDER_OUT_OF_SCOPE:
	case SL_REASON_PLACEHOLDER_EXPIRED:
	case SL_REASON_PLACEHOLDER_LOST:
		return snprintf(
			out, len,
			"sluice: %s: a credential placeholder this request carries may not be "
			"used here (%s)\n",
			t, why);
	default:
		return snprintf(out, len, "sluice: %s: %s (%s)\n", t,
				status == 403 ? "refused" : proxy_status_text(status), why);
	}
}

/*
 * Builds the answer to a refused request in c->out: @status, and @reason in
 * X-Sluice-Reason and in a one-line body that names the destination.
 * Return: 0, or -ENOMEM.
 */
static int reply_prepare(struct conn *c, int status, enum sl_reason reason)
{
	char body[400];
	int bl, n;

	/* c->out may be a CONNECT's 40-byte "200" buffer: a reply gets its own. */
	if (c->out && c->out->cap < REPLY_CAP)
		proxy_out_drop(c);
	if (!c->out)
		c->out = proxy_buf_new(REPLY_CAP);
	if (!c->out)
		return -ENOMEM;
	bl = body_text(body, sizeof(body), c, status, reason);
	if (bl < 0 || (size_t)bl >= sizeof(body))
		bl = (int)strlen(body);
	c->out->pos = 0;
	n = snprintf(c->out->data, c->out->cap,
		     "HTTP/1.1 %d %s\r\nX-Sluice-Reason: %s\r\n"
		     "Content-Type: text/plain\r\nContent-Length: %d\r\n"
		     "Connection: close\r\n\r\n%s",
		     status, proxy_status_text(status), sl_reason_name(reason), bl, body);
	/* Never more than the buffer holds, whatever snprintf would have made. */
	c->out->len = n < 0 ? 0 : (size_t)n >= c->out->cap ? c->out->cap - 1 : (size_t)n;
	return 0;
}

/*
 * proxy_end() - the one way a connection ends
 * @c:        the connection
 * @how:      PROXY_END_CLOSE closes it (the driver frees it once the step
 *            returns); PROXY_END_REFUSE answers v->status with v->reason
 *            first (written by CS_REPLY, then a linger), or resets a
 *            connection without HTTP (c->raw)
 * @v:        the verdict: its decision and reason go to the audit line,
 *            its status is a refusal's answer; NULL (closing only) writes
 *            no line (an idle keep-alive connection, a client gone between
 *            requests)
 *
 * The connection's one closing audit line is written here, once: a
 * connection already ended (answering, lingering) is only closed by a later
 * call, never audited again. Nothing is freed here: whoever called the step
 * goes on using @c until it returns to proxy_conn_run(), the one place that
 * frees (passt's deferred flow teardown).
 *
 * Return: STEP_NEXT, so that the driver goes on to CS_REPLY or frees.
 */
enum step proxy_end(struct conn *c, enum proxy_end_how how, const struct proxy_verdict *v)
{
	static const struct proxy_verdict oom = { .decision = PROXY_ERROR,
						  .reason = SL_REASON_OUT_OF_MEMORY };

	/* A late answer must not start a connect under a refusal. */
	resolver_cancel(c->w->resolver, &c->rr);
	loop_timer_cancel(c->w->loop, &c->resume);
	if (c->ended) {
		if (how == PROXY_END_CLOSE)
			c->st = CS_CLOSE;
		return STEP_NEXT;
	}
	c->ended = true;
	log_debug("proxy: %s: %s:%u ends in state %s: %s %s", c->sb->name,
		  c->host[0] ? c->host : "-", c->port, proxy_state_name(c->st),
		  v ? proxy_decision_name(v->decision) : "-", v ? sl_reason_name(v->reason) : "-");
	if (how == PROXY_END_REFUSE && !c->raw) {
		proxy_close_upstream(c);
		if (reply_prepare(c, v->status, v->reason) == 0) {
			c->status = v->status;
			proxy_audit(c, v->decision, v->reason);
			loop_timer_arm(c->w->loop, &c->timer, LINGER_MS);
			c->st = CS_REPLY;
			return STEP_NEXT;
		}
		v = &oom;
	} else if (how == PROXY_END_REFUSE) {
		/* No HTTP to answer in: a reset, the reason in the audit log. */
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		setsockopt(c->cev.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	if (v)
		proxy_audit(c, v->decision, v->reason);
	c->st = CS_CLOSE;
	return STEP_NEXT;
}

/* Ends @c without an answer, with its audit line (proxy_end()). */
enum step proxy_conn_end(struct conn *c, enum proxy_decision d, enum sl_reason r)
{
	struct proxy_verdict v = { .decision = d, .reason = r, .rule = -1 };

	return proxy_end(c, PROXY_END_CLOSE, &v);
}

/* Ends @c without an answer and without an audit line (proxy_end()). */
enum step proxy_close(struct conn *c)
{
	return proxy_end(c, PROXY_END_CLOSE, NULL);
}

/* Is @c ended (a refusal is under way, or it is closing)? */
bool proxy_ending(const struct conn *c)
{
	return c->ended;
}

/*
 * Acts on a check's refusal (decide.c): the one place a verdict becomes an
 * answer, an audit line and the connection's end (proxy_end()).
 */
enum step proxy_refuse(struct conn *c, const struct proxy_verdict *v)
{
	return proxy_end(c, PROXY_END_REFUSE, v);
}

/* Refuses with @status (proxy_end()); on a connection without HTTP, a reset. */
enum step proxy_reply(struct conn *c, int status, enum proxy_decision d, enum sl_reason r)
{
	struct proxy_verdict v = { .decision = d, .reason = r, .status = status, .rule = -1 };

	return proxy_end(c, PROXY_END_REFUSE, &v);
}

enum step proxy_deny(struct conn *c, enum sl_reason r)
{
	return proxy_reply(c, 403, PROXY_DENY, r);
}

void proxy_on_timer(struct timer *t)
{
	struct conn *c = container_of(t, struct conn, timer);
	uint64_t idle_ms = c->pol ? policy_limits(c->pol)->idle_timeout_sec * 1000 : 300000;
	uint64_t now = loop_now_ms(c->w->loop);

	/* Every case ends in proxy_conn_run(), which frees a connection a refusal
	 * ended (CS_CLOSE): nothing here touches @c after a refusal. */
	switch (c->st) {
	case CS_SNIFF:
	case CS_PEEK:
		if (c->head_started) {
			/* Bytes came, but never a whole ClientHello or a method and
			 * its space: a tunnel made now would carry the rest
			 * unexamined (another SNI, another Host). */
			if (c->st == CS_SNIFF)
				c->proto = (uint8_t)c->in->data[0] == 0x16 ? "tls" : "http";
			c->raw = true;
			proxy_reply(c, 0, PROXY_DENY, SL_REASON_HEAD_TIMEOUT);
			break;
		}
		if (c->st == CS_SNIFF) {
			/* Silence: connect, then wait for either side (proxy_peek()). */
			proxy_sniff(c, true);
			break;
		}
		/* Nobody spoke: the client owed its first bytes (or, where raw
		 * TCP is allowed, the server; an idle tunnel ends). */
		c->raw = true;
		if (c->raw_ok)
			proxy_conn_end(c, PROXY_ALLOW, SL_REASON_IDLE_TIMEOUT);
		else
			proxy_reply(c, 0, PROXY_DENY, SL_REASON_HEAD_TIMEOUT);
		break;
	case CS_TLS_ACCEPT:
		proxy_reply(c, 0, PROXY_DENY, SL_REASON_TLS_TIMEOUT);
		break;
	case CS_TLS_CONNECT:
		proxy_reply(c, 504, PROXY_ERROR, SL_REASON_UPSTREAM_TIMEOUT);
		break;
	case CS_HEAD:
		if (!c->head_started || !c->in || c->in->len == c->in->pos) {
			proxy_close(c); /* idle keep-alive connection */
			break;
		}
		proxy_note_head_target(c, c->in->data + c->in->pos, c->in->len - c->in->pos);
		proxy_reply(c, 408, PROXY_ERROR, SL_REASON_HEAD_TIMEOUT);
		break;
	case CS_HOLD:
		proxy_hold_leave(c);
		proxy_deny(c, SL_REASON_HOLD_TIMEOUT);
		break;
	case CS_RESOLVE:
		proxy_reply(c, 504, PROXY_ERROR, SL_REASON_DNS_TIMEOUT);
		break;
	case CS_CONNECT:
		proxy_close_upstream(c);
		c->ai++;
		c->connect_error = SL_REASON_CONNECT_TIMEOUT;
		c->st = CS_RESOLVE; /* try the next address */
		break;
	case CS_TUNNEL: {
		uint64_t next = proxy_tunnel_quiet(c, now, idle_ms);

		if (next > 0) {
			loop_timer_arm(c->w->loop, t, next);
			return;
		}
		proxy_conn_end(c, PROXY_ALLOW, SL_REASON_IDLE_TIMEOUT);
		break;
	}
	case CS_REQ:
	case CS_RESP_BODY:
		/* A body that moved since the timer was armed is not idle: an
		 * upload or a download may take longer than either limit. */
		if (c->up + c->down != c->timer_moved) {
			c->timer_moved = c->up + c->down;
			loop_timer_arm(c->w->loop, t,
				       c->st == CS_REQ ? c->w->limits->response_timeout_ms
						       : idle_ms);
			return;
		}
		if (c->st == CS_REQ)
			proxy_reply(c, 504, PROXY_ERROR, SL_REASON_UPSTREAM_TIMEOUT);
		else
			proxy_conn_end(c, PROXY_ALLOW, SL_REASON_IDLE_TIMEOUT);
		break;
	case CS_RESP_HEAD:
		proxy_reply(c, 504, PROXY_ERROR, SL_REASON_UPSTREAM_TIMEOUT);
		break;
	default:
		proxy_close(c);
		break;
	}
	proxy_conn_run(c);
}

/* Takes the sandbox's policy in force now (a request begins, or a tunnel
 * the new policy keeps). Nothing of the old one may be in use: a plan's
 * credential indices belong to the policy that made them. */
void proxy_refresh_policy(struct conn *c)
{
	struct policy *p = sandbox_policy(c->sb);

	if (p == c->pol) {
		policy_unref(p);
		return;
	}
	policy_unref(c->pol);
	c->pol = p;
}

static enum step linger(struct conn *c)
{
	char sink[4096];
	int i;

	for (i = 0; i < 16; i++) {
		ssize_t k = recv(c->cev.fd, sink, sizeof(sink), 0);

		if (k > 0)
			continue;
		if (k < 0 && errno == EAGAIN) {
			proxy_want(c, EPOLLIN, 0);
			return STEP_AGAIN;
		}
		break;
	}
	return proxy_close(c);
}

static enum step step(struct conn *c)
{
	int r;

	switch (c->st) {
	case CS_SNIFF:
		return proxy_sniff(c, false);
	case CS_HEAD:
		return proxy_read_head(c);
	case CS_HOLD:
		return STEP_AGAIN; /* an answer or the timer moves it */
	case CS_RESOLVE:
		return proxy_begin_connect(c);
	case CS_CONNECT:
		return proxy_connected(c);
	case CS_ESTABLISH:
		return proxy_establish(c);
	case CS_PEEK:
		return proxy_peek(c);
	case CS_TLS_ACCEPT:
		return proxy_tls_accept(c);
	case CS_TLS_CONNECT:
		return proxy_tls_connect(c);
	case CS_TUNNEL:
		return proxy_tunnel(c);
	case CS_REQ:
		return proxy_send_request(c);
	case CS_RESP_HEAD:
		return proxy_read_response_head(c);
	case CS_RESP_BODY:
		return proxy_relay_response(c);
	case CS_REPLY:
		r = proxy_write_out(c, false, c->out, c->out->len, NULL);
		if (r == 0) {
			proxy_want(c, EPOLLOUT, 0);
			return STEP_AGAIN;
		}
		if (r < 0) {
			return proxy_close(c);
		}
		if (c->cssl) {
			ERR_clear_error();
			SSL_shutdown(c->cssl); /* close_notify, best effort */
			ERR_clear_error();
		}
		shutdown(c->cev.fd, SHUT_WR);
		c->st = CS_LINGER;
		return STEP_NEXT;
	case CS_LINGER:
		return linger(c);
	case CS_CLOSE:
		break; /* proxy_conn_run() frees it */
	}
	return STEP_AGAIN;
}

void proxy_conn_run(struct conn *c)
{
	int i;

	/* Bounded: a connection yields after this many transitions. */
	for (i = 0; i < 256; i++) {
		enum step s = c->st == CS_CLOSE ? STEP_AGAIN : step(c);

		/* The one place a connection is freed: after its step returned,
		 * so that no handler ever holds a freed one. */
		if (c->st == CS_CLOSE) {
			conn_free(c);
			return;
		}
		if (s != STEP_NEXT)
			return;
	}
	/* Still runnable: come back on the next iteration. Not through the
	 * deadline timer, which would read the yield as a timeout. */
	loop_timer_arm(c->w->loop, &c->resume, 0);
}

void proxy_on_resume(struct timer *t)
{
	proxy_conn_run(container_of(t, struct conn, resume));
}

/*
 * A hang-up or an error of one side that its connection is not reading or
 * writing now. In a tunnel an error (a reset) ends it: nothing more will
 * pass that side. Otherwise the side leaves the loop until the connection
 * wants it again (proxy_park()): epoll would report it at every wait. A
 * tunnel whose side has ended (its EOF read, its sending side shut) waits
 * so for the other. Return: true when the event is dealt with (the caller
 * runs nothing more), false when the connection's step is to run.
 */
static bool hung_up_idle(struct conn *c, struct ev *ev, uint32_t *cur, uint32_t wanted,
			 uint32_t events)
{
	if (!(events & (EPOLLERR | EPOLLHUP)) || c->st == CS_CLOSE)
		return false;
	if (c->st == CS_TUNNEL && (events & EPOLLERR)) {
		proxy_conn_end(c, PROXY_ALLOW, SL_REASON_RESET);
		proxy_conn_run(c); /* frees it */
		return true;
	}
	if (wanted & (EPOLLIN | EPOLLOUT))
		return false; /* the step reads or writes it and finds the end */
	proxy_park(c, ev, cur);
	return true;
}

void proxy_on_client(struct ev *ev, uint32_t events)
{
	struct conn *c = container_of(ev, struct conn, cev);

	events = proxy_events_for(c, ev, &c->cev_mask, c->cev_want, events);
	if (!events)
		return; /* only for an interest dropped lazily */
	/* Hang-ups are reported whatever the mask: a client gone while the
	 * broker waits on something else ends the connection now. In a TLS
	 * handshake, OpenSSL reads what the client said last (an alert: it
	 * does not trust the sandbox CA) and the handshake fails with it. */
	/* A held client that hangs up (or half-closes: it has said all it
	 * will) is not waited for. Not allowed: never decided. */
	if ((events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) && c->st == CS_HOLD)
		proxy_conn_end(c, PROXY_DENY, SL_REASON_CLIENT_GONE);
	else if ((events & (EPOLLERR | EPOLLHUP)) && c->st != CS_TUNNEL && c->st != CS_LINGER &&
		 c->st != CS_REPLY && c->st != CS_TLS_ACCEPT && c->st != CS_CLOSE) {
		if (c->st == CS_HEAD)
			proxy_close(c); /* between requests: nothing to audit */
		else
			proxy_conn_end(c, PROXY_ALLOW, SL_REASON_CLIENT_GONE);
	} else if (hung_up_idle(c, &c->cev, &c->cev_mask, c->cev_want, events)) {
		return;
	}
	proxy_conn_run(c); /* frees it if it ended */
}

void proxy_on_upstream(struct ev *ev, uint32_t events)
{
	struct conn *c = container_of(ev, struct conn, uev);

	/* Whatever the upstream said (or an interest dropped lazily) since its
	 * last answer ended: upstream_quiet() looks at the socket itself. */
	c->u_watched = false;
	events = proxy_events_for(c, ev, &c->uev_mask, c->uev_want, events);
	if (!events)
		return; /* only for an interest dropped lazily */
	if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && c->st == CS_HEAD) {
		/* A kept-alive upstream hung up between requests: of no more
		 * use (the next request connects anew), and a hang-up left
		 * registered would be reported again and again. */
		proxy_close_upstream(c);
		proxy_want(c, EPOLLIN, 0);
		return;
	}
	if (hung_up_idle(c, &c->uev, &c->uev_mask, c->uev_want, events))
		return;
	proxy_conn_run(c);
}
