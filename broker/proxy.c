// SPDX-License-Identifier: MIT
/* The explicit proxy: CONNECT tunnels and absolute-form HTTP/1.1.
 *
 * Theory of operation: each accepted connection is a struct conn owned by
 * the worker that accepted it, driven by conn_run(), a state machine that
 * advances until it would block and then sets the epoll interests it waits
 * on. A request head is read into a bounded buffer and parsed strictly
 * (http.c); the decision is made on the sandbox's compiled policy (by name
 * and port, address literals only by a cidr rule); names are resolved
 * asynchronously (resolve.c), every answer passes the address guard, and the
 * broker connects to exactly an address it checked, trying the next allowed
 * one when a connect fails. A CONNECT becomes a splice(2) tunnel whose two
 * pipes bound what the broker holds per direction; an HTTP request is
 * forwarded in origin-form with hop-by-hop headers dropped, its body and the
 * response framed by llhttp, and a 3xx whose Location leaves the policy is
 * replaced by a 403. Every decision is one audit line. */
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

/* From <linux/netfilter_ipv4.h>, which clashes with <netinet/in.h>. */
#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif

#define UBUF_SIZE (16 * 1024)
#define PIPE_CAP (64 * 1024)
#define LINGER_MS 2000
#define REPLY_CAP 1024
/* Transparent: how long the client may stay silent before the broker
 * connects to see whether the server speaks first. */
#define SNIFF_MS 300

enum cstate {
	CS_SNIFF,     /* transparent: peeking at the first bytes */
	CS_HEAD,      /* reading a request head from the client */
	CS_RESOLVE,   /* waiting for the resolver */
	CS_CONNECT,   /* non-blocking connect in progress */
	CS_ESTABLISH, /* writing "200 Connection established" */
	CS_PEEK,      /* CONNECT: peeking at the tunnel's first bytes */
	CS_TLS_ACCEPT,	/* intercepting: the sandbox's TLS handshake */
	CS_TLS_CONNECT, /* intercepting: the upstream TLS handshake */
	CS_TUNNEL,    /* splicing both ways */
	CS_REQ,	      /* sending the request head and body upstream */
	CS_RESP_HEAD, /* reading the response head */
	CS_RESP_BODY, /* relaying the response body */
	CS_REPLY,     /* writing a reply of the broker's own, then linger */
	CS_LINGER,    /* write side shut; discarding input until EOF or timer */
	CS_CLOSE,     /* ended (audited): the driver frees it, nobody else */
};

enum step { STEP_AGAIN, STEP_NEXT, STEP_FREED };

struct buf {
	size_t pos, len, cap;
	char data[];
};

struct framer {
	llhttp_t p;
	bool done;
	bool skip_body; /* a response to HEAD */
	bool in_data;	/* inside a Content-Length body or a chunk's data */
};

struct conn {
	struct ev cev, uev;
	struct worker *w;
	struct conn *next, *prev;
	struct sandbox *sb;
	struct policy *pol;
	enum cstate st;
	/* Interests registered with epoll, and those the state machine waits
	 * for; see set_mask(). */
	uint32_t cev_mask, uev_mask;
	uint32_t cev_want, uev_want;
	struct timer timer;  /* the deadline of the current state */
	struct timer resume; /* a yield: run again on the next iteration */
	struct resolve_req rr;
	uint64_t t_req;	  /* ms, request start */
	uint64_t t_last;  /* ms, last activity in a tunnel */
	uint64_t connect_start_us;
	uint64_t up, down;
	uint16_t port;
	bool literal;
	bool is_connect;
	bool client_keepalive;
	bool head_req;
	bool upstream_reusable;
	bool head_started;
	bool counted; /* holds a per-sandbox and a total connection slot */
	bool transparent; /* accepted on the transparent port */
	bool raw;	  /* a tunnel without HTTP: refusals are resets */
	bool intercept;	  /* TLS to this host ends at the broker (a credential's scope) */
	bool tls_first;	  /* the upstream handshake precedes the first request */
	bool inner;	  /* HTTP requests inside a CONNECT tunnel, each checked */
	bool early;	  /* the client sent bytes before the CONNECT's 200 (in c->in) */
	bool raw_ok;	  /* the rule lets bytes that are neither HTTP nor TLS through */
	bool need_raw;	  /* transparent: the first bytes were neither HTTP nor TLS */
	bool silent;	  /* transparent: the client said nothing before connecting */
	bool interim;	  /* relaying a 1xx response: the final one follows */
	bool resp_partial; /* c->uin holds part of a response head */
	/* Plain, level-triggered sockets only: a side that almost surely has
	 * nothing to read yet is waited for instead of read first (EAGAIN).
	 * Set on the way into CS_HEAD once a response is relayed (the client
	 * has not seen it yet) and into CS_RESP_HEAD once a request is sent
	 * (the origin has not seen it yet); cleared by the wait. */
	bool c_idle, u_idle;
	/* The request head decide() parsed and planned, kept for
	 * start_request() (NULL: none); see struct parsed. */
	struct parsed *parsed;
	uint8_t cssl_want, ussl_want; /* EPOLLIN/EPOLLOUT an SSL call waits for */
	SSL *cssl, *ussl; /* intercepted: the sandbox's side, the upstream side */
	const char *proto; /* "http", "connect", "tls", "tcp" */
	struct sl_addr orig_dst; /* transparent: SO_ORIGINAL_DST */
	uint16_t orig_port;
	bool orig_synthetic;
	int rule;
	int status; /* HTTP status sent for this request */
	int head_len; /* of the request head being decided */
	struct sl_addr addrs[RESOLVE_MAX_ADDRS];
	uint8_t naddrs, ai;
	struct sl_addr dst;	/* what the broker connected to */
	char host[256];
	char conn_host[256];	/* upstream currently connected, for reuse */
	uint16_t conn_port;
	char method[16];
	char path[256];
	char cred_name[65]; /* the credential a request used or misused: its name only */
	const char *deny_reason;
	struct buf *in;	  /* from the client: head, then body and what follows */
	struct buf *uin;  /* from upstream */
	struct buf *out;  /* to the client (replies) or upstream (request head) */
	struct framer *reqf, *respf;
	int pu[2], pd[2];  /* tunnel pipes: client->upstream, upstream->client */
	size_t pu_n, pd_n; /* bytes in each pipe */
	size_t pend;	   /* response bytes admitted by the framer, not yet sent */
	struct reflect refl; /* the secrets this request carried, to redact */
	bool c_eof, u_eof, c_shut, u_shut;
};

static __thread struct worker *cur_worker;

static void conn_run(struct conn *c);
static enum step start_request(struct conn *c);

/*
 * A plain-HTTP request head as read_head() parsed it and decide() planned
 * its credentials, kept until start_request() writes it upstream, so that
 * a request is parsed and planned once. Its slices point into c->in at
 * @pos, which does not move in between (the client is not read while the
 * upstream is resolved and connected); start_request() checks that it has
 * not, and parses again if it has.
 */
struct parsed {
	struct http_request req;
	struct creds_plan plan;
	size_t pos; /* c->in->pos when parsed */
	int len;    /* the head's length */
};

/* A worker has one request head between read_head() and start_request()
 * at a time, mostly: one spare struct parsed (4 KiB) per thread saves a
 * malloc() and a free() per request. proxy_close_all() frees it. */
static __thread struct parsed *spare_parsed;

static struct parsed *parsed_new(void)
{
	struct parsed *ps = spare_parsed;

	if (ps) {
		spare_parsed = NULL;
		return ps;
	}
	return malloc(sizeof(*ps));
}

static void parsed_free(struct parsed *ps)
{
	if (ps && !spare_parsed) {
		spare_parsed = ps;
		return;
	}
	free(ps);
}

static enum step sniff(struct conn *c, bool timed_out);
static int looks_like_http(const char *p, size_t n, bool raw_ok);
static enum step start_inner_http(struct conn *c);
static enum step peek(struct conn *c);

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static struct buf *buf_new(size_t cap)
{
	struct buf *b = malloc(sizeof(*b) + cap);

	if (b) {
		b->pos = b->len = 0;
		b->cap = cap;
	}
	return b;
}

/* Moves unread bytes to the front so that reads can append. */
static void buf_compact(struct buf *b)
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
 * them comes (events_for()), which then drops them. A keep-alive request
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
static uint32_t events_for(struct conn *c, struct ev *ev, uint32_t *cur, uint32_t wanted,
			   uint32_t events)
{
	if ((events & *cur & ~wanted) && ev->fd >= 0 && *cur != wanted) {
		loop_mod(c->w->loop, ev, wanted);
		*cur = wanted;
	}
	return events & (wanted | EPOLLERR | EPOLLHUP);
}

static void want(struct conn *c, uint32_t cmask, uint32_t umask)
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

/* --- audit ---------------------------------------------------------------- */

static const char *proto_of(const struct conn *c)
{
	if (c->proto)
		return c->proto;
	return c->is_connect ? "connect" : "http";
}

static void audit(struct conn *c, const char *decision, const char *reason)
{
	struct audit_event ev = {
		.sandbox = c->sb ? c->sb->name : NULL,
		.proto = proto_of(c),
		.name = c->host[0] ? c->host : NULL,
		.addr = c->naddrs || c->literal ? &c->dst : NULL,
		.port = c->port,
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
	};

	audit_log(&ev);
	metrics_decision(ev.proto, decision, reason);
}

/* --- teardown --------------------------------------------------------------- */

static void close_upstream(struct conn *c)
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
}

/* Frees c->out, wiped first: an upstream head in it may hold an injected
 * secret. */
static void out_drop(struct conn *c)
{
	if (c->out) {
		explicit_bzero(c->out->data, c->out->cap);
		free(c->out);
		c->out = NULL;
	}
}

static void framer_free(struct framer **f)
{
	free(*f);
	*f = NULL;
}

static void conn_free(struct conn *c)
{
	struct worker *w = c->w;
	int i;

	resolver_cancel(w->resolver, &c->rr);
	loop_timer_cancel(w->loop, &c->timer);
	loop_timer_cancel(w->loop, &c->resume);
	close_upstream(c);
	if (c->cssl)
		SSL_free(c->cssl);
	if (c->cev.fd >= 0) {
		loop_del(w->loop, &c->cev);
		close(c->cev.fd);
	}
	for (i = 0; i < 2; i++) {
		if (c->pu[i] >= 0)
			close(c->pu[i]);
		if (c->pd[i] >= 0)
			close(c->pd[i]);
	}
	parsed_free(c->parsed);
	reflect_clear(&c->refl);
	free(c->in);
	free(c->uin);
	out_drop(c);
	framer_free(&c->reqf);
	framer_free(&c->respf);
	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->counted) {
		atomic_fetch_sub(&c->sb->conns, 1);
		atomic_fetch_sub(&broker.total_conns, 1);
	}
	atomic_fetch_sub(&w->n_conns, 1);
	metrics_connection_close();
	policy_unref(c->pol);
	sandbox_put(c->sb);
	free(c);
}

/* --- replies of the broker's own -------------------------------------------- */

static const char *status_text(int status)
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

/*
 * Ends @c: its one audit line (when @reason is not NULL), then CS_CLOSE, so
 * that the driver frees it once the state machine returns. Nothing else may
 * free a connection inside a step: whoever called the step can go on using
 * @c until it returns. Return: STEP_NEXT (the driver's next step frees).
 */
static enum step conn_end(struct conn *c, const char *decision, const char *reason)
{
	if (reason)
		audit(c, decision, reason);
	c->st = CS_CLOSE;
	return STEP_NEXT;
}

/* Is @c answering, lingering or ended (a refusal is under way)? */
static bool ending(const struct conn *c)
{
	return c->st == CS_REPLY || c->st == CS_LINGER || c->st == CS_CLOSE;
}

/*
 * Answers the client with @status and @reason (one line, also in
 * X-Sluice-Reason), logs the decision, and closes after lingering. On a
 * connection without HTTP (c->raw) the answer is a reset. Never frees @c:
 * the caller goes on through the driver (conn_run()).
 */
static enum step reply(struct conn *c, int status, const char *decision, const char *reason)
{
	char body[160];
	int bl, n;

	/* A late answer must not start a connect under a refusal. */
	resolver_cancel(c->w->resolver, &c->rr);
	loop_timer_cancel(c->w->loop, &c->resume);
	if (c->raw) {
		/* No HTTP to answer in: a reset, the reason in the audit log. */
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		setsockopt(c->cev.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		return conn_end(c, decision, reason);
	}
	close_upstream(c);
	/* c->out may be a CONNECT's 40-byte "200" buffer: a reply gets its own. */
	if (c->out && c->out->cap < REPLY_CAP)
		out_drop(c);
	if (!c->out)
		c->out = buf_new(REPLY_CAP);
	if (!c->out)
		return conn_end(c, "error", "out-of-memory");
	bl = snprintf(body, sizeof(body), "sluice: %s (%s)\n",
		      status == 403 ? "refused" : status_text(status), reason);
	if (bl < 0 || (size_t)bl >= sizeof(body))
		bl = (int)strlen(body);
	c->out->pos = 0;
	n = snprintf(c->out->data, c->out->cap,
		     "HTTP/1.1 %d %s\r\nX-Sluice-Reason: %s\r\n"
		     "Content-Type: text/plain\r\nContent-Length: %d\r\n"
		     "Connection: close\r\n\r\n%s",
		     status, status_text(status), reason, bl, body);
	/* Never more than the buffer holds, whatever snprintf would have made. */
	c->out->len = n < 0 ? 0 : (size_t)n >= c->out->cap ? c->out->cap - 1 : (size_t)n;
	c->status = status;
	audit(c, decision, reason);
	loop_timer_arm(c->w->loop, &c->timer, LINGER_MS);
	c->st = CS_REPLY;
	return STEP_NEXT;
}

static enum step deny(struct conn *c, const char *reason)
{
	return reply(c, 403, "deny", reason);
}

/* --- timers ----------------------------------------------------------------- */

static void on_timer(struct timer *t)
{
	struct conn *c = container_of(t, struct conn, timer);
	uint64_t idle_ms = c->pol ? policy_limits(c->pol)->idle_timeout_sec * 1000 : 300000;
	uint64_t now = loop_now_ms(c->w->loop);

	/* Every case ends in conn_run(), which frees a connection a refusal
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
			reply(c, 0, "deny", "head-timeout");
			break;
		}
		if (c->st == CS_SNIFF) {
			/* Silence: connect, then wait for either side (peek()). */
			sniff(c, true);
			break;
		}
		/* Nobody spoke: the client owed its first bytes (or, where raw
		 * TCP is allowed, the server; an idle tunnel ends). */
		c->raw = true;
		if (c->raw_ok)
			conn_end(c, "allow", "idle-timeout");
		else
			reply(c, 0, "deny", "head-timeout");
		break;
	case CS_TLS_ACCEPT:
		reply(c, 0, "deny", "tls-timeout");
		break;
	case CS_TLS_CONNECT:
		reply(c, 504, "error", "upstream-timeout");
		break;
	case CS_HEAD:
		if (!c->head_started || !c->in || c->in->len == c->in->pos) {
			conn_end(c, NULL, NULL); /* idle keep-alive connection */
			break;
		}
		reply(c, 408, "error", "head-timeout");
		break;
	case CS_RESOLVE:
		reply(c, 504, "error", "dns-timeout");
		break;
	case CS_CONNECT:
		close_upstream(c);
		c->ai++;
		c->deny_reason = "connect-timeout";
		c->st = CS_RESOLVE; /* try the next address */
		break;
	case CS_TUNNEL:
		if (now - c->t_last < idle_ms) {
			loop_timer_arm(c->w->loop, t, idle_ms - (now - c->t_last));
			return;
		}
		conn_end(c, "allow", "idle-timeout");
		break;
	case CS_REQ:
	case CS_RESP_HEAD:
		reply(c, 504, "error", "upstream-timeout");
		break;
	case CS_RESP_BODY:
		conn_end(c, "allow", "idle-timeout");
		break;
	default:
		conn_end(c, NULL, NULL);
		break;
	}
	conn_run(c);
}

/* --- framing bodies with llhttp --------------------------------------------- */

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
static int framer_start(struct framer **f, bool response, bool skip_body)
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
static ssize_t framer_feed(struct framer *f, const char *data, size_t len)
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
static uint64_t framer_payload_left(const struct framer *f)
{
	if (f->done || !f->in_data || !(f->p.flags & (F_CHUNKED | F_CONTENT_LENGTH)))
		return 0;
	return f->p.content_length;
}

/*
 * Counts @n payload bytes that went past user space (spliced), @n at most
 * framer_payload_left(). llhttp does not read payload bytes, it subtracts
 * their number; it is handed a buffer of zeros of the right length.
 */
static int framer_skip(struct framer *f, size_t n)
{
	static char zeros[16 * 1024];

	while (n > 0) {
		size_t k = n < sizeof(zeros) ? n : sizeof(zeros);

		if (framer_feed(f, zeros, k) != (ssize_t)k)
			return -EPROTO;
		n -= k;
	}
	return 0;
}

/* Close-delimited bodies end at EOF. */
static bool framer_finish(struct framer *f)
{
	if (!f->done && llhttp_finish(&f->p) == HPE_OK)
		f->done = true;
	return f->done;
}

/* --- I/O helpers -------------------------------------------------------------- */

/*
 * One side of a connection: the sandbox's (@up false) or upstream's, plain
 * or inside TLS. Both calls return bytes moved (> 0), 0 at EOF (io_recv),
 * -EAGAIN when the side must wait (what for is in cssl_want/ussl_want), or
 * another negative errno.
 */
static ssize_t ssl_result(struct conn *c, bool up, SSL *ssl, int k)
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
		return ssl_result(c, up, ssl, SSL_read(ssl, p, n > INT_MAX ? INT_MAX : (int)n));
	}
	do
		k = recv(up ? c->uev.fd : c->cev.fd, p, n, 0);
	while (k < 0 && errno == EINTR);
	return k < 0 ? -errno : k;
}

static ssize_t io_send(struct conn *c, bool up, const void *p, size_t n)
{
	SSL *ssl = up ? c->ussl : c->cssl;
	ssize_t k;

	if (ssl) {
		ERR_clear_error();
		return ssl_result(c, up, ssl, SSL_write(ssl, p, n > INT_MAX ? INT_MAX : (int)n));
	}
	do
		k = send(up ? c->uev.fd : c->cev.fd, p, n, MSG_NOSIGNAL);
	while (k < 0 && errno == EINTR);
	return k < 0 ? -errno : k;
}

/* Reads at most @max bytes into @b; returns bytes read, 0 at EOF, -EAGAIN,
 * or another -errno. */
static ssize_t read_into_max(struct conn *c, bool up, struct buf *b, size_t max)
{
	ssize_t k;

	buf_compact(b);
	if (b->len == b->cap)
		return -ENOBUFS;
	k = io_recv(c, up, b->data + b->len, b->cap - b->len < max ? b->cap - b->len : max);
	if (k < 0)
		return k;
	b->len += (size_t)k;
	return k;
}

static ssize_t read_into(struct conn *c, bool up, struct buf *b)
{
	return read_into_max(c, up, b, SIZE_MAX);
}

/* Are both sides plain sockets (no TLS ends here), so that bytes can go
 * from one to the other by splice? */
static bool plain_both(const struct conn *c)
{
	return !c->cssl && !c->ussl && c->uev.fd >= 0;
}

/* Writes what @b holds from pos; returns 1 when all is written, 0 if it
 * would block, -errno on error. */
static int write_out(struct conn *c, bool up, struct buf *b, size_t upto, uint64_t *count)
{
	while (b->pos < upto) {
		ssize_t k = io_send(c, up, b->data + b->pos, upto - b->pos);

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

/* Same host, ignoring case and one trailing dot on either side. */
static bool host_same(const char *a, const char *b)
{
	size_t al = strlen(a), bl = strlen(b);

	if (al && a[al - 1] == '.')
		al--;
	if (bl && b[bl - 1] == '.')
		bl--;
	return al == bl && strncasecmp(a, b, al) == 0;
}

/* Is @host in the scope of any of the policy's credentials? Then its TLS
 * is intercepted, so that requests can be checked and credentials put in. */
static bool intercepted(const struct policy *p, const char *host)
{
	size_t i, j, n = policy_credential_count(p), hl = strlen(host);

	for (i = 0; i < n; i++) {
		const struct policy_credential *pc = policy_credential_get(p, i);

		for (j = 0; j < pc->n_hosts; j++)
			if (creds_host_match(pc->hosts[j], host, hl))
				return true;
	}
	return false;
}

/* --- decision ------------------------------------------------------------------- */

static void copy_slice(char *dst, size_t dlen, const struct http_slice *s)
{
	size_t n = s->len < dlen - 1 ? s->len : dlen - 1;

	memcpy(dst, s->ptr, n);
	dst[n] = '\0';
}

static enum step begin_connect(struct conn *c);

static void on_resolved(struct resolve_req *req, int status, const struct sl_addr *addrs,
			size_t n, void *arg)
{
	struct conn *c = arg;
	struct guard_result g = { .verdict = GUARD_ALLOW };
	const char *first_refusal = NULL;
	size_t i;

	(void)req;
	if (c->st != CS_RESOLVE)
		return; /* refused meanwhile (reply() cancels, this is a backstop) */
	c->naddrs = 0;
	c->ai = 0;
	/* Each refusal below leaves @c to conn_run(), which frees it if it
	 * ended (a reset on a raw tunnel): nothing here uses @c after it. */
	if (status < 0) {
		if (status == -ETIMEDOUT)
			reply(c, 504, "error", "dns-timeout");
		else
			reply(c, 502, "error", "dns-failure");
		conn_run(c);
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
		deny(c, first_refusal ? first_refusal : "address-denied");
		conn_run(c);
		return;
	}
	c->st = CS_RESOLVE;
	c->deny_reason = NULL;
	conn_run(c);
}

/*
 * The policy decision on a parsed request head; then resolution or, for a
 * literal allowed by a cidr rule, a connect.
 */
static enum step decide_target(struct conn *c);

/*
 * The placeholders a request head carries, against the sandbox's table and
 * the credentials' scopes. A CONNECT head carries none in scope: the broker
 * sees nothing inside the tunnel. Fills @plan (when not NULL) for the
 * rewrite. Return: STEP_NEXT to go on, else the refusal's step.
 */
static enum step check_credentials(struct conn *c, struct http_request *req, const char *head,
				   size_t hl, struct creds_plan *plan)
{
	struct creds_plan local;
	size_t off;

	c->cred_name[0] = '\0';
	if (c->is_connect) {
		if (!creds_find_placeholder(head, hl, &off))
			return STEP_NEXT;
		return deny(c, "placeholder-out-of-scope");
	}
	if (!plan)
		plan = &local;
	/* Credentials go by the destination the broker connects to, never by
	 * what the request's Host says (decide() makes them agree). */
	creds_plan_request(c->sb->creds, c->pol, c->host[0] ? c->host : NULL, req,
			   (uint64_t)time(NULL), c->cssl ? 0 : CREDS_PLAN_PLAINTEXT, plan);
	if (plan->cred >= 0)
		snprintf(c->cred_name, sizeof(c->cred_name), "%s",
			 policy_credential_get(c->pol, (size_t)plan->cred)->name);
	else if (plan->nuse > 0)
		snprintf(c->cred_name, sizeof(c->cred_name), "%s",
			 policy_credential_get(c->pol, (size_t)plan->use[0])->name);
	else if (plan->expired_withheld >= 0 || plan->plaintext_withheld >= 0)
		/* Sent without it: the audit line still says which one. */
		snprintf(c->cred_name, sizeof(c->cred_name), "%s",
			 policy_credential_get(c->pol, (size_t)(plan->expired_withheld >= 0
									? plan->expired_withheld
									: plan->plaintext_withheld))
				 ->name);
	/* The contract's reasons: an expired placeholder says so; any other
	 * misuse (another host, method, path, plain HTTP, another sandbox's
	 * or a revoked one) is placeholder-out-of-scope. */
	if (plan->verdict == CREDS_EXPIRED)
		return deny(c, "placeholder-expired");
	if (plan->verdict != CREDS_FORWARD)
		return deny(c, "placeholder-out-of-scope");
	return STEP_NEXT;
}

/* Decides on the head in @ps: kept in c->parsed (for start_request())
 * unless the request is refused for its placeholders, when it is freed. */
static enum step decide(struct conn *c, struct parsed *ps)
{
	struct http_request *req = &ps->req;
	const struct http_authority *a = &req->authority;

	const char *head = c->in->data + c->in->pos;
	enum step s;

	c->is_connect = req->method_id == HTTP_METHOD_CONNECT;
	/* A CONNECT head is consumed here; an HTTP head is consumed when it is
	 * rewritten for upstream (start_request). */
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
	if (!c->cssl && !c->inner && !c->transparent) {
		if (req->has_authority)
			memcpy(c->host, a->host, a->host_len + 1);
		else
			c->host[0] = '\0'; /* not the last request's */
	}
	/* Placeholders first: one on its way outside its scope is an
	 * exfiltration attempt, and is logged as that whatever else is wrong
	 * with the request. */
	s = check_credentials(c, req, head, (size_t)c->head_len, &ps->plan);
	if (s != STEP_NEXT || ending(c)) {
		parsed_free(ps);
		return s; /* refused: the reply is under way */
	}
	c->parsed = ps; /* @req stays valid; read_head() drops a CONNECT's */
	if (c->cssl || c->inner) {
		/* Inside intercepted TLS or a CONNECT tunnel: every request is
		 * for the host the tunnel was opened to (no domain fronting). */
		if (c->is_connect || req->form == HTTP_FORM_AUTHORITY)
			return reply(c, 400, "deny", c->cssl ? "connect-in-tls" : "connect-in-tunnel");
		if (!req->has_authority || !host_same(a->host, c->host) ||
		    (a->port_given && a->port != c->port))
			return deny(c, "host-mismatch");
		return decide_target(c);
	}
	if (c->transparent) {
		/* The destination is what the sandbox connected to; the Host
		 * header must name the same host (no domain fronting). */
		if (c->is_connect || req->form == HTTP_FORM_AUTHORITY)
			return reply(c, 400, "deny", "connect-on-transparent");
		if (!c->orig_synthetic) {
			/* The address is judged first (decide_target() does no
			 * I/O for a literal): one no cidr rule allows is refused
			 * as that, whatever the Host says. */
			s = decide_target(c);
			if (s != STEP_NEXT || ending(c))
				return s;
		}
		if (!req->has_authority || (a->port_given && a->port != c->orig_port))
			return deny(c, "host-mismatch");
		/* A literal destination (a cidr rule) takes a Host naming that
		 * address only: a name there would pick a credential or a
		 * virtual host the policy did not judge. */
		if (c->orig_synthetic ? !host_same(a->host, c->host)
				      : !a->is_literal ||
					memcmp(&a->addr, &c->orig_dst, sizeof(a->addr)) != 0)
			return deny(c, "host-mismatch");
		return c->orig_synthetic ? decide_target(c) : STEP_NEXT;
	}
	if (!c->is_connect && req->form != HTTP_FORM_ABSOLUTE)
		return reply(c, 400, "deny", "origin-form-on-proxy");
	if (!req->has_authority)
		return reply(c, 400, "deny", "bad-target");
	memcpy(c->host, a->host, a->host_len + 1);
	c->port = a->port;
	c->literal = a->is_literal;
	if (c->literal)
		c->dst = a->addr;
	return decide_target(c);
}

/*
 * The policy decision on c->host:c->port (a name, or a literal in c->dst);
 * then resolution or, for a literal allowed by a cidr rule, a connect.
 */
static enum step decide_target(struct conn *c)
{
	struct guard_result g;
	enum policy_decision d;

	c->rule = -1;
	if (c->literal) {
		c->naddrs = 0;
		policy_guard(c->pol, &c->dst, c->port, GUARD_FROM_LITERAL, &g);
		if (g.verdict != GUARD_ALLOW)
			return deny(c, g.reason);
		if (broker_is_local(&c->dst, c->port))
			return deny(c, "broker-address");
		c->rule = g.rule;
		c->raw_ok = policy_rule_raw_tcp(c->pol, c->rule);
		if (c->need_raw && !c->raw_ok)
			return deny(c, "raw-tcp-not-allowed");
		/* A kept-alive connection's upstream goes: the new one takes
		 * its place (uev) and must not leave the old fd registered. */
		close_upstream(c);
		c->addrs[0] = c->dst;
		c->naddrs = 1;
		c->ai = 0;
		c->st = CS_RESOLVE;
		return STEP_NEXT;
	}
	d = policy_match_name(c->pol, c->host, strlen(c->host), c->port, &c->rule);
	if (d != POLICY_ALLOW)
		return deny(c, policy_decision_reason(d));
	c->raw_ok = policy_rule_raw_tcp(c->pol, c->rule);
	if (c->need_raw && !c->raw_ok)
		return deny(c, "raw-tcp-not-allowed");
	if (c->is_connect)
		c->intercept = (!c->transparent || !strcmp(c->proto, "tls")) &&
			       intercepted(c->pol, c->host);
	if (!c->is_connect && c->uev.fd >= 0 && c->upstream_reusable &&
	    strcmp(c->conn_host, c->host) == 0 && c->conn_port == c->port)
		return STEP_NEXT; /* st is set by the caller */
	close_upstream(c);
	c->st = CS_RESOLVE;
	c->naddrs = 0;
	if (resolver_lookup(c->w->resolver, c->host, &c->rr, on_resolved, c) < 0)
		return reply(c, 502, "error", "dns-failure");
	return STEP_AGAIN;
}

/* CS_RESOLVE with addresses: connect to the next checked one. */
static enum step begin_connect(struct conn *c)
{
	struct sockaddr_storage ss;
	unsigned sl;
	int fd, one = 1;

	if (c->naddrs == 0) {
		want(c, 0, 0); /* the resolver has not answered yet */
		return STEP_AGAIN;
	}
	/* One upstream at a time: uev is about to take a new fd. */
	if (c->uev.fd >= 0)
		close_upstream(c);
	for (; c->ai < c->naddrs; c->ai++) {
		c->dst = c->addrs[c->ai];
		sl = addr_to_sockaddr(&c->dst, c->port, &ss);
		fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->connect_start_us = now_us();
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
		want(c, 0, EPOLLOUT);
		return STEP_AGAIN;
	}
	if (c->deny_reason && !strcmp(c->deny_reason, "connect-timeout"))
		return reply(c, 504, "error", "connect-timeout");
	return reply(c, 502, "error", "connect-failed");
}

static enum step connected(struct conn *c)
{
	int err = 0;
	socklen_t el = sizeof(err);

	if (getsockopt(c->uev.fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		err = errno;
	if (err == EINPROGRESS || err == EALREADY)
		return STEP_AGAIN;
	if (err) {
		close_upstream(c);
		c->ai++;
		c->deny_reason = "connect-failed";
		c->st = CS_RESOLVE;
		return STEP_NEXT;
	}
	metrics_connect_latency_us(now_us() - c->connect_start_us);
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
		out_drop(c);
		c->out = buf_new(sizeof(ok));
		if (!c->out)
			return conn_end(c, "error", "out-of-memory");
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
	return start_request(c);
}

/* --- the tunnel --------------------------------------------------------------- */

static int make_pipe(int p[2])
{
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0)
		return -errno;
	return 0;
}

/*
 * Moves what it can one way: @from -> pipe -> @to. Returns -1 on a hard
 * error. Sets *eof when @from has ended and the pipe is drained (then the
 * write side of @to is shut).
 */
static int splice_dir(struct conn *c, int from, int to, int p[2], size_t *inpipe, bool *eof,
		      bool *shut, uint64_t *count)
{
	int rounds;

	for (rounds = 0; rounds < 16; rounds++) {
		bool progress = false;
		ssize_t k;

		if (!*eof && *inpipe < PIPE_CAP) {
			k = splice(from, NULL, p[1], NULL, PIPE_CAP - *inpipe,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k > 0) {
				*inpipe += (size_t)k;
				progress = true;
			} else if (k == 0) {
				*eof = true;
			} else if (errno != EAGAIN && errno != EINTR) {
				return -1;
			}
		}
		if (*inpipe > 0) {
			k = splice(p[0], NULL, to, NULL, *inpipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k > 0) {
				*inpipe -= (size_t)k;
				*count += (uint64_t)k;
				progress = true;
			} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
				return -1;
			}
		}
		if (!progress)
			break;
	}
	if (*eof && *inpipe == 0 && !*shut) {
		shutdown(to, SHUT_WR);
		*shut = true;
	}
	(void)c;
	return 0;
}

/* --- bodies by splice ------------------------------------------------------------ */

/* A body's payload goes by splice(2) only when this much of it is still to
 * come: below that one read and one send are cheaper than a pipe. */
#define SPLICE_MIN_BODY UBUF_SIZE
/* A chunk-size line, a chunk's CRLF and trailers are read in pieces this
 * small while a body is spliced, so that little payload after them is
 * copied through user space. */
#define FRAMING_READ 256

/* Closes the splice pipes: an idle kept-alive connection holds none. */
static void pipes_close(struct conn *c)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (c->pu[i] >= 0)
			close(c->pu[i]);
		if (c->pd[i] >= 0)
			close(c->pd[i]);
		c->pu[i] = c->pd[i] = -1;
	}
	c->pu_n = c->pd_n = 0;
}

enum sb_result { SB_DONE, SB_WAIT, SB_FROM_GONE, SB_TO_GONE, SB_NOPIPE };

/*
 * Moves the payload @f admits from @from to @to through the pipe @p (made
 * here when there is none and enough payload is to come), never past what
 * the framer admits: what follows (a chunk-size line, trailers, the next
 * message) stays in the socket for the caller to read and frame. Bytes are
 * counted in @count as they reach @to. Return: SB_DONE when the pipe is
 * empty and the framer needs to see the next bytes; SB_WAIT with
 * *@from_mask and *@to_mask set to what to wait for; SB_FROM_GONE when
 * @from ended or failed mid-payload (nothing more of the body will come);
 * SB_TO_GONE when @to failed; SB_NOPIPE when no pipe could be made (the
 * caller copies instead).
 */
static enum sb_result splice_body(struct framer *f, int from, int to, int p[2], size_t *inpipe,
				  uint64_t *count, uint32_t *from_mask, uint32_t *to_mask)
{
	int rounds;

	if (p[0] < 0) {
		if (framer_payload_left(f) < SPLICE_MIN_BODY)
			return SB_DONE;
		if (make_pipe(p) < 0)
			return SB_NOPIPE;
	}
	/* Bounded: a large body yields to other connections now and then;
	 * level-triggered readiness brings it back at once. */
	for (rounds = 0; rounds < 16; rounds++) {
		uint64_t left = framer_payload_left(f);
		bool progress = false;
		ssize_t k;

		if (left > 0 && *inpipe < PIPE_CAP) {
			size_t n = PIPE_CAP - *inpipe;

			if (left < n)
				n = (size_t)left;
			k = splice(from, NULL, p[1], NULL, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k > 0) {
				*inpipe += (size_t)k;
				if (framer_skip(f, (size_t)k) < 0)
					return SB_FROM_GONE;
				progress = true;
			} else if (k == 0) {
				return SB_FROM_GONE;
			} else if (errno != EAGAIN && errno != EINTR) {
				return SB_FROM_GONE;
			}
		}
		if (*inpipe > 0) {
			k = splice(p[0], NULL, to, NULL, *inpipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k > 0) {
				*inpipe -= (size_t)k;
				*count += (uint64_t)k;
				progress = true;
			} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
				return SB_TO_GONE;
			}
		}
		if (*inpipe == 0 && framer_payload_left(f) == 0)
			return SB_DONE;
		if (!progress)
			break;
	}
	*from_mask = framer_payload_left(f) > 0 && *inpipe < PIPE_CAP ? EPOLLIN : 0;
	*to_mask = *inpipe > 0 ? EPOLLOUT : 0;
	return SB_WAIT;
}

static enum step tunnel(struct conn *c)
{
	uint64_t up0 = c->up, down0 = c->down;
	uint32_t cm = 0, um = 0;

	if (splice_dir(c, c->cev.fd, c->uev.fd, c->pu, &c->pu_n, &c->c_eof, &c->u_shut, &c->up) < 0 ||
	    splice_dir(c, c->uev.fd, c->cev.fd, c->pd, &c->pd_n, &c->u_eof, &c->c_shut, &c->down) < 0) {
		return conn_end(c, "allow", "reset");
	}
	metrics_bytes(c->up - up0, c->down - down0);
	if (c->up != up0 || c->down != down0)
		c->t_last = loop_now_ms(c->w->loop);
	if (c->u_shut && c->c_shut) {
		return conn_end(c, "allow", "allowed");
	}
	/* Backpressure: read a side only while its pipe has room; wait for
	 * writability only while a pipe holds bytes. */
	if (!c->c_eof && c->pu_n < PIPE_CAP)
		cm |= EPOLLIN;
	if (c->pd_n > 0)
		cm |= EPOLLOUT;
	if (!c->u_eof && c->pd_n < PIPE_CAP)
		um |= EPOLLIN;
	if (c->pu_n > 0)
		um |= EPOLLOUT;
	want(c, cm | EPOLLRDHUP, um | EPOLLRDHUP);
	return STEP_AGAIN;
}

static enum step start_tunnel(struct conn *c)
{
	uint64_t idle_ms = policy_limits(c->pol)->idle_timeout_sec * 1000;

	free(c->in);
	c->in = NULL;
	pipes_close(c); /* a body's, if one was left */
	if (make_pipe(c->pu) < 0 || make_pipe(c->pd) < 0) {
		return conn_end(c, "error", "out-of-pipes");
	}
	c->t_last = loop_now_ms(c->w->loop);
	loop_timer_arm(c->w->loop, &c->timer, idle_ms);
	c->st = CS_TUNNEL;
	return STEP_NEXT;
}

/* Intercepting: the sandbox's TLS ends here, with a leaf for c->host
 * signed by the sandbox's CA. */
static enum step start_tls(struct conn *c)
{
	SSL_CTX *ctx = c->sb->ca ? tls_leaf_ctx(c->sb->ca, c->host) : NULL;

	c->raw = true; /* until the handshake is done, refusals are resets */
	if (!ctx)
		return reply(c, 0, "error", "tls-leaf-failed");
	c->cssl = SSL_new(ctx);
	SSL_CTX_free(ctx);
	if (!c->cssl || SSL_set_fd(c->cssl, c->cev.fd) != 1) {
		ERR_clear_error();
		return reply(c, 0, "error", "out-of-memory");
	}
	SSL_set_mode(c->cssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* In-TLS requests get a fresh head buffer from read_head(). */
	free(c->in);
	c->in = NULL;
	c->head_started = false;
	loop_timer_arm(c->w->loop, &c->timer, broker.cfg.head_timeout_ms);
	c->st = CS_TLS_ACCEPT;
	want(c, EPOLLIN, 0);
	return STEP_NEXT;
}

static enum step tls_accept(struct conn *c)
{
	ssize_t r;
	int k;

	ERR_clear_error();
	k = SSL_accept(c->cssl);
	if (k != 1) {
		r = ssl_result(c, false, c->cssl, k);
		if (r == -EAGAIN) {
			want(c, c->cssl_want, 0);
			return STEP_AGAIN;
		}
		/* Most often the sandbox does not trust its CA (a client with
		 * its own trust store): nothing was sent upstream. */
		return reply(c, 0, "deny", "client-tls");
	}
	c->raw = false;
	c->is_connect = false;
	c->tls_first = true;
	c->st = CS_TLS_CONNECT;
	return STEP_NEXT;
}

/* The upstream side of an intercepted connection: TLS verified against
 * upstream_ca (or the system store) and c->host. */
static enum step tls_connect(struct conn *c)
{
	ssize_t r;
	int k;

	if (!c->ussl) {
		c->ussl = SSL_new(broker.upstream_ctx);
		if (!c->ussl || SSL_set_fd(c->ussl, c->uev.fd) != 1 ||
		    tls_upstream_prepare(c->ussl, c->host) < 0) {
			ERR_clear_error();
			return reply(c, 502, "error", "upstream-tls");
		}
		SSL_set_mode(c->ussl,
			     SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
		loop_timer_arm(c->w->loop, &c->timer, broker.cfg.connect_timeout_ms);
	}
	ERR_clear_error();
	k = SSL_connect(c->ussl);
	if (k != 1) {
		long vr = SSL_get_verify_result(c->ussl);

		r = ssl_result(c, true, c->ussl, k);
		if (r == -EAGAIN) {
			want(c, 0, c->ussl_want);
			return STEP_AGAIN;
		}
		log_info("proxy: %s: %s:%u: upstream TLS failed: %s", c->sb->name, c->host, c->port,
			 vr != X509_V_OK ? X509_verify_cert_error_string(vr) : "handshake failed");
		return reply(c, 502, "error", "upstream-tls");
	}
	loop_timer_cancel(c->w->loop, &c->timer);
	c->upstream_reusable = true;
	if (!c->tls_first)
		return start_request(c);
	/* The CONNECT (or the transparent connection) is one audit line;
	 * each request inside is one more. */
	c->tls_first = false;
	if (!c->transparent)
		c->proto = "connect";
	audit(c, "allow", "intercepted");
	c->proto = "https";
	c->up = c->down = 0;
	c->method[0] = c->path[0] = '\0';
	c->head_started = false;
	c->st = CS_HEAD;
	loop_timer_arm(c->w->loop, &c->timer, policy_limits(c->pol)->idle_timeout_sec * 1000);
	return STEP_NEXT;
}

/* What a connection's first bytes are (see peek_first()). */
enum first_bytes { FB_WAIT, FB_GONE, FB_HTTP, FB_OTHER, FB_HELLO, FB_BAD_HELLO };

/*
 * Peeks (never consumes) the first bytes from the sandbox: an HTTP request,
 * a TLS ClientHello (FB_HELLO: parsed into *@hp, which the caller frees),
 * or anything else. Bytes the client sent before a CONNECT's 200 were
 * consumed with its head; they are in c->in (c->in->len of them) and come
 * first. Until the bytes decide (a ClientHello is whole, or a request line
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
		want(c, EPOLLIN | EPOLLET,
		     c->raw_ok && c->uev.fd >= 0 ? EPOLLIN | EPOLLRDHUP : 0);
		return FB_WAIT;
	}
	if (!c->head_started) {
		c->head_started = true;
		loop_timer_arm(c->w->loop, &c->timer, broker.cfg.head_timeout_ms);
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
	want(c, EPOLLIN | EPOLLET, 0);
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
	audit(c, "allow", "http-in-tunnel");
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
	want(c, EPOLLIN, 0);
	loop_timer_arm(c->w->loop, &c->timer, broker.cfg.head_timeout_ms);
	return STEP_NEXT;
}

/* The tunnel, once its first bytes are examined: those the client sent
 * before the 200 are written first (establish()). */
static enum step tunnel_after_peek(struct conn *c)
{
	if (!c->early)
		return start_tunnel(c);
	c->st = CS_ESTABLISH;
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
	char b;
	ssize_t k;

	if (!c->raw_ok || c->head_started || c->uev.fd < 0)
		return false;
	k = recv(c->uev.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return k >= 0 || (errno != EAGAIN && errno != EINTR);
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
 * speaks first (raw TCP rules only), or at the timer (on_timer()).
 */
static enum step peek(struct conn *c)
{
	struct tls_hello *h;
	bool sni_ok, ech;

	switch (peek_first(c, &h)) {
	case FB_WAIT:
		if (server_spoke(c))
			return tunnel_after_peek(c);
		return STEP_AGAIN;
	case FB_GONE:
		return conn_end(c, "allow", "client-gone");
	case FB_HTTP:
		return start_inner_http(c);
	case FB_OTHER:
		c->raw = true; /* past the 200: a refusal is a reset */
		if (!c->raw_ok)
			return reply(c, 0, "deny", "raw-tcp-not-allowed");
		return tunnel_after_peek(c);
	case FB_BAD_HELLO:
		c->raw = true;
		return reply(c, 0, "deny", "bad-client-hello");
	case FB_HELLO:
		break;
	}
	c->raw = true;
	if (c->transparent) {
		/* Connected as "tcp" after silence: now it is TLS. */
		c->proto = "tls";
		c->intercept = intercepted(c->pol, c->host);
	}
	/* A literal destination has no name for an SNI to match. */
	sni_ok = (c->transparent && !c->orig_synthetic) || !h->sni_present ||
		 (!h->sni_invalid && host_same(h->sni, c->host));
	ech = h->has_ech;
	free(h);
	if (!sni_ok)
		return reply(c, 0, "deny", "sni-mismatch");
	if (ech && !c->intercept)
		/* The inner, encrypted ClientHello would pick the site. */
		return reply(c, 0, "deny", "ech-refused");
	if (c->intercept && c->early) {
		/* Part of its ClientHello is consumed: the TLS library cannot
		 * have it. A client of a credential's host waits for the 200. */
		return reply(c, 0, "deny", "early-client-hello");
	}
	if (c->intercept)
		return start_tls(c);
	return tunnel_after_peek(c);
}

/* After "200 Connection established": bytes the client sent early go first. */
static enum step establish(struct conn *c)
{
	int r = c->out ? write_out(c, false, c->out, c->out->len, NULL) : 1;

	if (r < 0) {
		return conn_end(c, "allow", "client-gone");
	}
	if (r == 0) {
		want(c, EPOLLOUT, 0);
		return STEP_AGAIN;
	}
	out_drop(c);
	if (c->transparent && !c->silent) {
		/* sniff() has examined the first bytes already. */
		if (c->intercept)
			return start_tls(c);
		return start_tunnel(c);
	}
	if (!c->transparent && c->in && c->in->len > c->in->pos && !c->early) {
		/* The client did not wait for the 200: what it sent is examined
		 * as a tunnel's first bytes are (peek()), from c->in and then
		 * from the socket, and goes first if the tunnel is spliced. */
		buf_compact(c->in);
		c->early = true;
		c->head_started = false;
		c->st = CS_PEEK;
		return STEP_NEXT;
	}
	if (c->in && c->in->len > c->in->pos) {
		/* Examined: the bytes sent before the 200 go first. */
		r = write_out(c, true, c->in, c->in->len, &c->up);
		if (r < 0) {
			return conn_end(c, "allow", "upstream-gone");
		}
		if (r == 0) {
			want(c, 0, EPOLLOUT);
			return STEP_AGAIN;
		}
		return start_tunnel(c);
	}
	if (!c->in) {
		c->in = buf_new(broker.cfg.max_head_bytes);
		if (!c->in)
			return conn_end(c, "error", "out-of-memory");
	}
	c->in->pos = c->in->len = 0;
	c->head_started = false;
	/* The client owes its first bytes within head_timeout; where raw TCP
	 * is allowed, an idle tunnel may wait as long as any tunnel. */
	loop_timer_arm(c->w->loop, &c->timer,
		       c->raw_ok ? policy_limits(c->pol)->idle_timeout_sec * 1000
				 : broker.cfg.head_timeout_ms);
	c->st = CS_PEEK;
	return STEP_NEXT;
}

/* --- HTTP forwarding ------------------------------------------------------------- */

/*
 * Writes the upstream head with the plan's credentials applied: injected
 * headers set, placeholders replaced by their secrets. The secrets exist
 * only in c->out (wiped once sent) and in a scratch buffer wiped here.
 * Return: the head's length or a negative errno.
 */
static int inject(struct conn *c, const struct http_request *req, const struct creds_plan *plan)
{
	struct creds_secret held[CREDS_MAX_USES] = { 0 };
	const struct creds_secret *secrets[CREDS_MAX] = { 0 };
	struct creds_rewrite *rw;
	size_t cap = broker.cfg.max_head_bytes * 2 + 1024, i;
	char *scratch;
	int r;

	rw = malloc(sizeof(*rw));
	scratch = malloc(cap);
	if (!rw || !scratch) {
		free(rw);
		free(scratch);
		return -ENOMEM;
	}
	r = creds_acquire(c->pol, c->sb, c->host, plan, secrets, held);
	/* The response is scanned for every secret the request carries
	 * (reflect.c), so it must come in an encoding the broker can read. */
	for (i = 0; r == 0 && i < plan->nuse; i++) {
		const struct creds_secret *sec = secrets[plan->use[i]];

		if (sec)
			r = reflect_add(&c->refl, sec->buf, sec->len, plan->use[i]);
	}
	if (r == 0)
		r = creds_rewrite_request(plan, c->pol, secrets, req, scratch, cap, rw);
	if (r == 0 && c->refl.n > 0) {
		static const char identity[] = "identity";
		size_t k;

		for (k = 0; k < rw->nset && strcasecmp(rw->set[k].name, "Accept-Encoding"); k++)
			;
		if (k == CREDS_MAX_SET)
			r = -E2BIG;
		else
			rw->set[k] = (struct http_set_header){ "Accept-Encoding", identity,
							       sizeof(identity) - 1 };
		if (k == rw->nset && r == 0)
			rw->nset++;
	}
	if (r == 0) {
		r = creds_write_request_head(rw, req, c->out->data, c->out->cap);
		creds_rewrite_wipe(rw);
	}
	/* The rewritten values point into scratch: wiped whatever happened. */
	explicit_bzero(scratch, cap);
	creds_release(held);
	free(scratch);
	free(rw);
	return r;
}

static enum step start_request(struct conn *c)
{
	struct parsed *ps = c->parsed;
	struct http_request *req;
	int n, headlen;

	c->parsed = NULL;
	if (!ps || ps->pos != c->in->pos) {
		/* Not kept, or the buffer moved: parse and plan again. */
		enum step s;

		parsed_free(ps);
		ps = parsed_new();
		if (!ps)
			return conn_end(c, "error", "out-of-memory");
		ps->len = http_parse_request(c->in->data + c->in->pos, c->in->len - c->in->pos,
					     broker.cfg.max_head_bytes, &ps->req);
		if (ps->len <= 0) {
			parsed_free(ps);
			return reply(c, 400, "deny", "bad-request");
		}
		s = check_credentials(c, &ps->req, c->in->data + c->in->pos, (size_t)ps->len,
				      &ps->plan);
		if (s != STEP_NEXT || ending(c)) {
			parsed_free(ps);
			return s;
		}
	}
	req = &ps->req;
	headlen = ps->len;
	if (!c->out)
		/* Room for injected headers and replaced placeholders. */
		c->out = buf_new(broker.cfg.max_head_bytes * 2 + 1024);
	if (!c->out) {
		parsed_free(ps);
		return conn_end(c, "error", "out-of-memory");
	}
	reflect_clear(&c->refl);
	if (ps->plan.nuse > 0) {
		n = inject(c, req, &ps->plan);
		if (n == -ENOKEY || n == -EINVAL || n == -EAGAIN) {
			parsed_free(ps);
			return reply(c, 502, "error", "credential-unavailable");
		}
		if (n == -E2BIG) {
			parsed_free(ps);
			return reply(c, 502, "error", "reflection-unscannable");
		}
	} else {
		n = http_write_request_head(req, c->out->data, c->out->cap, NULL, 0);
	}
	parsed_free(ps);
	if (n == -ENOMEM)
		return reply(c, 503, "error", "out-of-memory");
	if (n < 0)
		return reply(c, 400, "deny", "head-too-large");
	c->out->pos = 0;
	c->out->len = (size_t)n;
	c->in->pos += (size_t)headlen;
	if (framer_start(&c->reqf, false, false) < 0 ||
	    framer_start(&c->respf, true, c->head_req) < 0)
		return conn_end(c, "error", "out-of-memory");
	/* Prime the request framer with the original head so it knows the
	 * body's framing; the head was validated already. */
	if (framer_feed(c->reqf, c->in->data + c->in->pos - headlen, (size_t)headlen) < 0)
		return reply(c, 400, "deny", "bad-framing");
	if (!c->uin)
		c->uin = buf_new(UBUF_SIZE);
	if (!c->uin)
		return conn_end(c, "error", "out-of-memory");
	c->uin->pos = c->uin->len = 0;
	c->interim = c->resp_partial = false;
	loop_timer_arm(c->w->loop, &c->timer, broker.cfg.response_timeout_ms);
	c->st = CS_REQ;
	return STEP_NEXT;
}

/* Sends the head, then body bytes as the framer admits them. */
static enum step send_request(struct conn *c)
{
	int r;

	if (c->out->pos < c->out->len) {
		/* Counted as sent: the head (a URL and headers carry data out
		 * as a body does) or the body bytes stashed below. */
		r = write_out(c, true, c->out, c->out->len, &c->up);
		if (r < 0)
			return reply(c, 502, "error", "upstream-reset");
		if (r == 0) {
			want(c, 0, EPOLLOUT);
			return STEP_AGAIN;
		}
		explicit_bzero(c->out->data, c->out->len);
	}
	/* The framer may have admitted the last payload while the pipe still
	 * holds it: done only once that is out too. */
	while (!c->reqf->done || c->pu_n > 0) {
		size_t avail = c->in->len - c->in->pos;
		ssize_t take, k;

		if (avail == 0 && plain_both(c)) {
			/* The payload the framer only counts goes by splice. */
			uint32_t cm = 0, um = 0;

			switch (splice_body(c->reqf, c->cev.fd, c->uev.fd, c->pu, &c->pu_n, &c->up,
					    &cm, &um)) {
			case SB_WAIT:
				want(c, cm, um);
				return STEP_AGAIN;
			case SB_FROM_GONE:
				return conn_end(c, "allow", "client-gone");
			case SB_TO_GONE:
				return reply(c, 502, "error", "upstream-reset");
			case SB_DONE:
			case SB_NOPIPE:
				break;
			}
			if (c->reqf->done)
				break;
		}
		if (avail == 0) {
			ssize_t got = read_into_max(c, false, c->in,
						    c->pu[0] >= 0 ? FRAMING_READ : SIZE_MAX);

			if (got == -EAGAIN) {
				want(c, EPOLLIN, 0);
				return STEP_AGAIN;
			}
			if (got <= 0) {
				return conn_end(c, "allow", "client-gone");
			}
			continue;
		}
		take = framer_feed(c->reqf, c->in->data + c->in->pos, avail);
		if (take < 0)
			return reply(c, 400, "deny", "bad-body");
		if (take == 0)
			break;
		/* Send what the framer admitted; keep the rest of the buffer. */
		k = io_send(c, true, c->in->data + c->in->pos, (size_t)take);
		if (k == -EAGAIN) {
			/* Undo: the framer saw bytes we did not send. Rather than
			 * rewind llhttp, send them blocking-free later: keep them
			 * in out. */
			buf_compact(c->out);
			c->out->pos = c->out->len = 0;
			memcpy(c->out->data, c->in->data + c->in->pos, (size_t)take);
			c->out->len = (size_t)take;
			c->in->pos += (size_t)take;
			want(c, 0, EPOLLOUT);
			return STEP_AGAIN;
		}
		if (k < 0)
			return reply(c, 502, "error", "upstream-reset");
		c->up += (uint64_t)k;
		if (k < take) {
			size_t rest = (size_t)(take - k);

			c->out->pos = 0;
			memcpy(c->out->data, c->in->data + c->in->pos + k, rest);
			c->out->len = rest;
			c->in->pos += (size_t)take;
			want(c, 0, EPOLLOUT);
			return STEP_AGAIN;
		}
		c->in->pos += (size_t)take;
	}
	c->u_idle = !c->ussl && !(c->uev_mask & EPOLLET) && c->uin->len == c->uin->pos;
	pipes_close(c);
	c->st = CS_RESP_HEAD;
	return STEP_NEXT;
}

/* Does the Location of a 3xx stay within what the policy allows? */
static bool redirect_allowed(struct conn *c, const struct http_response *resp)
{
	enum policy_redirects mode = policy_redirects(c->pol);
	struct http_authority base;
	struct http_url url;
	struct guard_result g;

	if (mode == POLICY_REDIRECTS_ANY)
		return true;
	if (http_parse_authority(c->host, strlen(c->host), c->port, &base) < 0)
		return false;
	base.port = c->port;
	enum http_scheme scheme = c->cssl ? HTTP_SCHEME_HTTPS : HTTP_SCHEME_HTTP;

	if (http_parse_location(resp->location.ptr, resp->location.len, scheme, &base, &url) < 0)
		return false;
	if (url.relative)
		return true;
	if (mode == POLICY_REDIRECTS_SAME_HOST)
		return http_authority_equal(&url.authority, &base) && url.scheme == scheme;
	if (url.authority.is_literal) {
		policy_guard(c->pol, &url.authority.addr, url.authority.port, GUARD_FROM_LITERAL,
			     &g);
		return g.verdict == GUARD_ALLOW;
	}
	return policy_match_name(c->pol, url.authority.host, url.authority.host_len,
				 url.authority.port, NULL) == POLICY_ALLOW;
}

/* Is the body as the origin has it (no Content-Encoding but identity)?
 * Only such a body can be scanned for reflected secrets. */
static bool identity_encoded(const struct http_response *resp)
{
	size_t i;

	for (i = 0; i < resp->nheaders; i++) {
		const struct http_header *h = &resp->headers[i];

		if (h->name.len == 16 && !strncasecmp(h->name.ptr, "Content-Encoding", 16) &&
		    !(h->value.len == 8 && !strncasecmp(h->value.ptr, "identity", 8)))
			return false;
	}
	return true;
}

/* A response head is parsed and looked at within read_response_head():
 * one per thread (3 KiB) rather than one allocated per response. */
static __thread struct http_response resp_scratch;

static enum step read_response_head(struct conn *c)
{
	struct http_response *resp = &resp_scratch;
	ssize_t got = 0;
	int hl;

	/* Bytes already here (what followed a 1xx) are parsed before reading. */
	buf_compact(c->uin);
	if (c->u_idle) {
		c->u_idle = false;
		if (c->uin->len == 0) {
			want(c, 0, EPOLLIN);
			return STEP_AGAIN;
		}
	}
	if (c->uin->len == 0 || c->resp_partial) {
		got = read_into(c, true, c->uin);
		if (got == -EAGAIN) {
			want(c, 0, EPOLLIN);
			return STEP_AGAIN;
		}
		if (got <= 0 && got != -ENOBUFS)
			return reply(c, 502, "error", "upstream-reset");
	}
	hl = http_parse_response(c->uin->data, c->uin->len, c->uin->cap, c->head_req, resp);
	c->resp_partial = hl == 0;
	if (hl == 0 && got != -ENOBUFS && c->uin->len < c->uin->cap)
		return STEP_NEXT; /* read more */
	if (hl <= 0)
		return reply(c, 502, "error", "bad-response");
	c->status = resp->status;
	if (resp->status >= 100 && resp->status < 200) {
		/* No Upgrade is ever forwarded: a 101 answers nothing sent. */
		if (c->status == 101)
			return reply(c, 502, "error", "bad-response");
		/* An interim response (100 Continue, 103 Early Hints) goes to
		 * the client as it came; the final one follows on the same
		 * connection and is read as a response of its own. */
		c->interim = true;
		c->st = CS_RESP_BODY;
		return STEP_NEXT;
	}
	if (resp->status >= 300 && resp->status < 400 && resp->has_location &&
	    !redirect_allowed(c, resp))
		return deny(c, "redirect-outside-policy");
	if (c->refl.n > 0 && !identity_encoded(resp))
		return reply(c, 502, "error", "reflection-unscannable");
	c->upstream_reusable = resp->keep_alive && !resp->body_until_close;
	if (resp->body_until_close)
		c->client_keepalive = false;
	/* The response head goes to the client as received. */
	loop_timer_arm(c->w->loop, &c->timer, policy_limits(c->pol)->idle_timeout_sec * 1000);
	c->st = CS_RESP_BODY;
	return STEP_NEXT;
}

/*
 * Relays the response (head included, from uin) until the framer is done.
 * Bytes the framer admitted (c->pend of them, from uin->pos) are scanned
 * for the secrets the request carried and redacted (reflect.c) before they
 * are sent; a tail that may begin a secret waits for the bytes after it.
 * Anything upstream sends after the response is not part of it and goes
 * with the upstream connection.
 */
static enum step relay_response(struct conn *c)
{
	for (;;) {
		size_t unfed = c->uin->len - c->uin->pos - c->pend, sendable = c->pend;

		if (unfed > 0 && !c->respf->done) {
			ssize_t take = framer_feed(c->respf, c->uin->data + c->uin->pos + c->pend,
						   unfed);

			if (take < 0)
				return conn_end(c, "allow", "bad-response-body");
			c->pend += (size_t)take;
			sendable = c->pend;
		}
		if (c->refl.n > 0 && c->pend > 0)
			sendable -= reflect_scan(&c->refl,
						 (unsigned char *)c->uin->data + c->uin->pos,
						 c->pend, c->respf->done);
		while (sendable > 0) {
			ssize_t k = io_send(c, false, c->uin->data + c->uin->pos, sendable);

			if (k == -EAGAIN) {
				want(c, EPOLLOUT, 0);
				return STEP_AGAIN;
			}
			if (k <= 0)
				return conn_end(c, "allow", "client-gone");
			c->down += (uint64_t)k;
			c->uin->pos += (size_t)k;
			c->pend -= (size_t)k;
			sendable -= (size_t)k;
		}
		/* The framer may have admitted the last payload while the pipe
		 * still holds it: done only once that is out too. */
		if (c->respf->done && c->pend == 0 && c->pd_n == 0)
			break;
		if (c->uin->len - c->uin->pos - c->pend > 0 && !c->respf->done)
			continue; /* more bytes already here to frame */
		if (c->pd_n > 0 ||
		    (c->uin->pos == c->uin->len && c->refl.n == 0 && !c->interim && plain_both(c))) {
			/* All held bytes are sent, and nothing of the body is
			 * to be looked at: the payload goes by splice. */
			uint32_t cm = 0, um = 0;

			switch (splice_body(c->respf, c->uev.fd, c->cev.fd, c->pd, &c->pd_n,
					    &c->down, &um, &cm)) {
			case SB_WAIT:
				want(c, cm, um);
				return STEP_AGAIN;
			case SB_FROM_GONE:
				return conn_end(c, "allow", "upstream-reset");
			case SB_TO_GONE:
				return conn_end(c, "allow", "client-gone");
			case SB_DONE:
			case SB_NOPIPE:
				break;
			}
			if (c->respf->done)
				break;
		}
		{
			ssize_t got = read_into_max(c, true, c->uin,
						    c->pd[0] >= 0 ? FRAMING_READ : SIZE_MAX);

			if (got == -EAGAIN) {
				want(c, 0, EPOLLIN);
				return STEP_AGAIN;
			}
			if (got == 0 && framer_finish(c->respf))
				continue; /* close-delimited: what is held goes now */
			if (got <= 0)
				return conn_end(c, "allow", "upstream-reset");
		}
	}
	if (c->interim) {
		/* The 1xx is relayed; what follows it in uin is the next head. */
		c->interim = false;
		if (framer_start(&c->respf, true, c->head_req) < 0)
			return conn_end(c, "error", "out-of-memory");
		loop_timer_arm(c->w->loop, &c->timer, broker.cfg.response_timeout_ms);
		c->st = CS_RESP_HEAD;
		return STEP_NEXT;
	}
	metrics_bytes(c->up, c->down);
	if (c->refl.hits > 0) {
		/* The origin sent a secret back: redacted, and said so. */
		if (c->refl.hit_cred >= 0)
			snprintf(c->cred_name, sizeof(c->cred_name), "%s",
				 policy_credential_get(c->pol, (size_t)c->refl.hit_cred)->name);
		log_warn("proxy: %s: %s: the response carried a secret back (%zu times); redacted",
			 c->sb->name, c->host, c->refl.hits);
		audit(c, "allow", "secret-redacted");
	} else {
		audit(c, "allow", "allowed");
	}
	reflect_clear(&c->refl);
	if (c->pd[0] >= 0 && c->upstream_reusable) {
		/* Spliced: what upstream sent after the body is still in the
		 * socket, where the copying path would have read it. It is not
		 * part of this response, and must not pass for the next one. */
		char b;

		if (recv(c->uev.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) != -1 || errno != EAGAIN)
			c->upstream_reusable = false;
	}
	pipes_close(c);
	if (c->uin->pos < c->uin->len || !c->upstream_reusable)
		close_upstream(c);
	c->uin->pos = c->uin->len = 0;
	if (!c->client_keepalive)
		return conn_end(c, NULL, NULL);
	/* Next request on the kept-alive connection. */
	c->up = c->down = 0;
	c->status = 0;
	c->head_started = false;
	c->c_idle = !c->cssl && !(c->cev_mask & EPOLLET) && c->in && c->in->len == c->in->pos;
	c->st = CS_HEAD;
	loop_timer_arm(c->w->loop, &c->timer, policy_limits(c->pol)->idle_timeout_sec * 1000);
	return STEP_NEXT;
}

/* --- the request head ---------------------------------------------------------------- */

/* Takes the sandbox's policy in force now (a request begins, or a tunnel
 * the new policy keeps). Nothing of the old one may be in use: a plan's
 * credential indices belong to the policy that made them. */
static void refresh_policy(struct conn *c)
{
	struct policy *p = sandbox_policy(c->sb);

	if (p == c->pol) {
		policy_unref(p);
		return;
	}
	policy_unref(c->pol);
	c->pol = p;
}

/* Is the client to be waited for before it is read (see c_idle)? Once. */
static bool c_idle_wait(struct conn *c)
{
	bool idle = c->c_idle;

	c->c_idle = false;
	return idle;
}

static enum step read_head(struct conn *c)
{
	struct http_request *req;
	struct parsed *ps;
	ssize_t got = 0;
	int hl;
	enum step s;

	if (!c->in) {
		c->in = buf_new(broker.cfg.max_head_bytes);
		if (!c->in)
			return conn_end(c, "error", "out-of-memory");
	}
	if (c->in->len == c->in->pos) {
		got = c_idle_wait(c) ? -EAGAIN : read_into(c, false, c->in);
		if (got == -EAGAIN) {
			want(c, EPOLLIN, c->uev.fd >= 0 ? EPOLLRDHUP : 0);
			return STEP_AGAIN;
		}
		if (got <= 0) {
			return conn_end(c, NULL, NULL);
		}
	}
	if (!c->head_started) {
		c->head_started = true;
		c->t_req = loop_now_ms(c->w->loop);
		loop_timer_arm(c->w->loop, &c->timer, broker.cfg.head_timeout_ms);
		/* Each request meets the policy in force when it begins: a
		 * reload reaches kept-alive connections too. */
		refresh_policy(c);
	}
	ps = c->parsed ? c->parsed : parsed_new();
	c->parsed = NULL;
	if (!ps)
		return conn_end(c, "error", "out-of-memory");
	req = &ps->req;
	hl = http_parse_request(c->in->data + c->in->pos, c->in->len - c->in->pos,
				broker.cfg.max_head_bytes, req);
	if (hl == 0) {
		c->parsed = ps; /* reused for the next try */
		buf_compact(c->in);
		if (c->in->len == c->in->cap)
			return reply(c, 400, "deny", "head-too-large");
		got = read_into(c, false, c->in);
		if (got == -EAGAIN) {
			want(c, EPOLLIN, 0);
			return STEP_AGAIN;
		}
		if (got <= 0) {
			return conn_end(c, NULL, NULL);
		}
		return STEP_NEXT;
	}
	if (hl < 0) {
		const char *why = req->error ? req->error : "bad-request";

		parsed_free(ps);
		c->method[0] = c->path[0] = '\0';
		if (!strcmp(why, "numeric-host"))
			return deny(c, "address-literal");
		return reply(c, 400, "deny", hl == -EMSGSIZE ? "head-too-large" : why);
	}
	/* From here the resolver and connect deadlines bound the wait. */
	loop_timer_arm(c->w->loop, &c->timer,
		       broker.cfg.connect_timeout_ms + RESOLVE_DEADLINE_MS);
	c->head_len = hl;
	ps->pos = c->in->pos;
	ps->len = hl;
	s = decide(c, ps);
	if (s == STEP_FREED)
		return s;
	if (c->is_connect && c->parsed) {
		/* Nothing of a CONNECT's head is written upstream. */
		parsed_free(c->parsed);
		c->parsed = NULL;
	}
	if (s == STEP_NEXT && c->st == CS_HEAD)
		return start_request(c); /* reused upstream connection */
	return s;
}

/* --- the transparent path: what is this connection? ------------------------------- */

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
		       broker.cfg.connect_timeout_ms + RESOLVE_DEADLINE_MS);
	return decide_target(c);
}

/*
 * Peeks (never consumes) the first bytes: a TLS ClientHello is matched by its
 * SNI, an HTTP request goes through the HTTP path with its Host checked, and
 * anything else is tunnelled by name where the rule allows raw TCP. After
 * SNIFF_MS of silence the broker connects and peek() waits for either side
 * (a protocol where the server speaks first). Edge-triggered while
 * waiting: the peeked bytes stay in the socket, so level-triggered
 * readiness would spin.
 */
static enum step sniff(struct conn *c, bool timed_out)
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
		return conn_end(c, NULL, NULL);
	case FB_HTTP:
		c->proto = "http";
		c->st = CS_HEAD;
		c->head_started = false;
		want(c, EPOLLIN, 0);
		return STEP_NEXT;
	case FB_OTHER:
		c->need_raw = true; /* decide_target() refuses it unless raw_tcp */
		return as_tunnel(c, "tcp");
	case FB_BAD_HELLO:
		c->proto = "tls";
		c->raw = true;
		return reply(c, 0, "deny", "bad-client-hello");
	case FB_HELLO:
		break;
	}
	c->proto = "tls";
	c->raw = true;
	sni_ok = !c->orig_synthetic || !h->sni_present ||
		 (!h->sni_invalid && host_same(h->sni, c->host));
	ech = h->has_ech;
	free(h);
	if (!sni_ok)
		return reply(c, 0, "deny", "sni-mismatch");
	if (ech && !intercepted(c->pol, c->host))
		/* The inner, encrypted ClientHello would pick the site. */
		return reply(c, 0, "deny", "ech-refused");
	return as_tunnel(c, "tls");
}

/* --- driver ---------------------------------------------------------------------- */

static enum step linger(struct conn *c)
{
	char sink[4096];
	int i;

	for (i = 0; i < 16; i++) {
		ssize_t k = recv(c->cev.fd, sink, sizeof(sink), 0);

		if (k > 0)
			continue;
		if (k < 0 && errno == EAGAIN) {
			want(c, EPOLLIN, 0);
			return STEP_AGAIN;
		}
		break;
	}
	return conn_end(c, NULL, NULL);
}

static enum step step(struct conn *c)
{
	int r;

	switch (c->st) {
	case CS_SNIFF:
		return sniff(c, false);
	case CS_HEAD:
		return read_head(c);
	case CS_RESOLVE:
		return begin_connect(c);
	case CS_CONNECT:
		return connected(c);
	case CS_ESTABLISH:
		return establish(c);
	case CS_PEEK:
		return peek(c);
	case CS_TLS_ACCEPT:
		return tls_accept(c);
	case CS_TLS_CONNECT:
		return tls_connect(c);
	case CS_TUNNEL:
		return tunnel(c);
	case CS_REQ:
		return send_request(c);
	case CS_RESP_HEAD:
		return read_response_head(c);
	case CS_RESP_BODY:
		return relay_response(c);
	case CS_REPLY:
		r = write_out(c, false, c->out, c->out->len, NULL);
		if (r == 0) {
			want(c, EPOLLOUT, 0);
			return STEP_AGAIN;
		}
		if (r < 0) {
			return conn_end(c, NULL, NULL);
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
		conn_free(c); /* the one place a step frees */
		return STEP_FREED;
	}
	return STEP_AGAIN;
}

static void conn_run(struct conn *c)
{
	int i;

	/* Bounded: a connection yields after this many transitions. */
	for (i = 0; i < 256; i++) {
		enum step s = step(c);

		if (s != STEP_NEXT)
			return;
	}
	/* Still runnable: come back on the next iteration. Not through the
	 * deadline timer, which would read the yield as a timeout. */
	loop_timer_arm(c->w->loop, &c->resume, 0);
}

static void on_resume(struct timer *t)
{
	conn_run(container_of(t, struct conn, resume));
}

static void on_client(struct ev *ev, uint32_t events)
{
	struct conn *c = container_of(ev, struct conn, cev);

	events = events_for(c, ev, &c->cev_mask, c->cev_want, events);
	if (!events)
		return; /* only for an interest dropped lazily */
	/* Hang-ups are reported whatever the mask: a client gone while the
	 * broker waits on something else ends the connection now. In a TLS
	 * handshake, OpenSSL reads what the client said last (an alert: it
	 * does not trust the sandbox CA) and the handshake fails with it. */
	if ((events & (EPOLLERR | EPOLLHUP)) && c->st != CS_TUNNEL && c->st != CS_LINGER &&
	    c->st != CS_REPLY && c->st != CS_TLS_ACCEPT && c->st != CS_CLOSE) {
		if (c->st != CS_HEAD)
			audit(c, "allow", "client-gone");
		conn_free(c);
		return;
	}
	conn_run(c);
}

static void on_upstream(struct ev *ev, uint32_t events)
{
	struct conn *c = container_of(ev, struct conn, uev);

	events = events_for(c, ev, &c->uev_mask, c->uev_want, events);
	if (!events)
		return; /* only for an interest dropped lazily */
	if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && c->st == CS_HEAD) {
		/* A kept-alive upstream hung up between requests: of no more
		 * use (the next request connects anew), and a hang-up left
		 * registered would be reported again and again. */
		close_upstream(c);
		want(c, EPOLLIN, 0);
		return;
	}
	conn_run(c);
}

/* --- accepting --------------------------------------------------------------------- */

static void refuse_now(int fd, int status, const char *reason)
{
	char msg[300];
	int n = snprintf(msg, sizeof(msg),
			 "HTTP/1.1 %d %s\r\nX-Sluice-Reason: %s\r\nContent-Type: text/plain\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\nsluice: refused (%s)\n",
			 status, status_text(status), reason, strlen(reason) + 19, reason);

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
		reply(c, 0, "error", "no-original-destination");
		return -1;
	}
	addr_from_sockaddr((struct sockaddr *)&od, &c->orig_dst, &c->orig_port);
	c->port = c->orig_port;
	c->dst = c->orig_dst;
	if (addr_in_prefix(&c->orig_dst, &broker.cfg.synthetic_net, broker.cfg.synthetic_plen)) {
		c->orig_synthetic = true;
		if (!c->sb->synth ||
		    dns_synth_name(c->sb->synth, &c->orig_dst, c->host, sizeof(c->host)) < 0) {
			c->literal = true;
			reply(c, 0, "deny", "unknown-synthetic");
			return -1;
		}
	} else {
		c->literal = true;
		addr_format(&c->orig_dst, c->host, sizeof(c->host));
	}
	c->in = buf_new(broker.cfg.max_head_bytes);
	if (!c->in) {
		reply(c, 0, "error", "out-of-memory");
		return -1;
	}
	/* How strictly the first bytes are read depends on the rule that
	 * would allow the destination (looks_like_http()); decide_target()
	 * makes the decision itself later. */
	if (c->literal) {
		struct guard_result g;

		if (policy_guard(c->pol, &c->dst, c->port, GUARD_FROM_LITERAL, &g) == GUARD_ALLOW)
			c->raw_ok = policy_rule_raw_tcp(c->pol, g.rule);
	} else {
		int rule = -1;

		if (policy_match_name(c->pol, c->host, strlen(c->host), c->port, &rule) ==
		    POLICY_ALLOW)
			c->raw_ok = policy_rule_raw_tcp(c->pol, rule);
	}
	c->raw = false;
	return 0;
}

/*
 * Refuses a connection before it has a struct conn: one audit line, then a
 * 403/429/503 on the explicit port, a reset on the transparent one (where
 * the client may speak TLS or anything else, not HTTP).
 */
static void refuse_early(int fd, bool transparent, const char *sandbox, const struct sl_addr *src,
			 uint16_t sport, int status, const char *decision, const char *reason)
{
	struct audit_event ev = { .sandbox = sandbox, .proto = transparent ? "tcp" : "connect",
				  .addr = src, .port = sport, .decision = decision,
				  .reason = reason, .status = transparent ? 0 : status };

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
 * the descriptors would not hold that many (broker.sandbox_conn_cap). */
static unsigned sandbox_conn_limit(const struct policy *pol)
{
	unsigned want = policy_limits(pol)->connections;
	unsigned cap = atomic_load_explicit(&broker.sandbox_conn_cap, memory_order_relaxed);

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
	sb = sandbox_lookup(&src, &pol);
	if (!sb) {
		refuse_early(fd, transparent, NULL, &src, sport, 403, "deny", "unknown-source");
		return;
	}
	if (atomic_load(&broker.draining)) {
		refuse_early(fd, transparent, sb->name, &src, sport, 503, "error",
			     "broker-draining");
		goto drop;
	}
	if (atomic_fetch_add(&broker.total_conns, 1) >= broker.cfg.max_connections) {
		static struct log_every limit_log;
		uint64_t held;

		atomic_fetch_sub(&broker.total_conns, 1);
		refuse_early(fd, transparent, sb->name, &src, sport, 503, "error",
			     "broker-connection-limit");
		/* Each refusal is audited; the log only needs to know it goes on. */
		if (log_every_ok(&limit_log, loop_now_ms(w->loop), ACCEPT_LOG_MS, &held))
			log_warn("proxy: total connection limit %u reached (%llu more times since "
				 "the last line)",
				 broker.cfg.max_connections, (unsigned long long)held);
		goto drop;
	}
	if (atomic_fetch_add(&sb->conns, 1) >= sandbox_conn_limit(pol)) {
		atomic_fetch_sub(&sb->conns, 1);
		atomic_fetch_sub(&broker.total_conns, 1);
		refuse_early(fd, transparent, sb->name, &src, sport, 429, "deny",
			     "connection-limit");
		goto drop;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		atomic_fetch_sub(&sb->conns, 1);
		atomic_fetch_sub(&broker.total_conns, 1);
		refuse_early(fd, transparent, sb->name, &src, sport, 503, "error", "out-of-memory");
		goto drop;
	}
	c->counted = true;
	c->w = w;
	c->sb = sb;
	c->pol = pol;
	c->cev.fd = fd;
	c->cev.cb = on_client;
	c->uev.fd = -1;
	c->uev.cb = on_upstream;
	c->pu[0] = c->pu[1] = c->pd[0] = c->pd[1] = -1;
	c->timer.cb = on_timer;
	c->resume.cb = on_resume;
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
		conn_free(c);
		return;
	}
	if (transparent && transparent_setup(c) < 0) {
		conn_run(c);
		return;
	}
	loop_timer_arm(w->loop, &c->timer, transparent ? SNIFF_MS : broker.cfg.head_timeout_ms);
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
			audit(c, "deny", "sandbox-deleted");
			conn_free(c);
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
	struct guard_result g;
	int rule = -1;

	if (c->literal) {
		if (policy_guard(np, &c->dst, c->port, GUARD_FROM_LITERAL, &g) != GUARD_ALLOW)
			return false;
		rule = g.rule;
	} else {
		if (policy_match_name(np, c->host, strlen(c->host), c->port, &rule) !=
		    POLICY_ALLOW)
			return false;
		if (c->uev.fd >= 0 &&
		    policy_guard(np, &c->dst, c->port, GUARD_FROM_NAME, &g) != GUARD_ALLOW)
			return false;
	}
	if (c->proto && !strcmp(c->proto, "tcp") && c->raw_ok && !policy_rule_raw_tcp(np, rule))
		return false;
	if ((c->cssl || c->intercept) && !intercepted(np, c->host))
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
			audit(c, "deny", "policy-withdrawn");
			conn_free(c);
			continue;
		}
		policy_unref(np);
		if (c->st == CS_TUNNEL)
			refresh_policy(c); /* no request of it holds the old one */
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
	while (w->conns)
		conn_free(w->conns);
	free(spare_parsed);
	spare_parsed = NULL;
}

void proxy_set_worker(struct worker *w)
{
	cur_worker = w;
}
