/* SPDX-License-Identifier: MIT */
/* The proxy's files share this: the connection, its states, its helpers.
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
#ifndef SLUICE_BROKER_PROXY_INTERNAL_H
#define SLUICE_BROKER_PROXY_INTERNAL_H

#include <llhttp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <openssl/ssl.h>

#include "broker/broker_internal.h"
#include "broker/creds/creds.h"
#include "broker/http.h"
#include "broker/reflect.h"

struct tls_hello;

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

enum step { STEP_AGAIN, STEP_NEXT };

/* How proxy_end() ends a connection. */
enum proxy_end_how {
	PROXY_END_CLOSE,  /* close now (the driver frees) */
	PROXY_END_REFUSE, /* answer a status first, or reset where no HTTP is spoken */
};

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
	bool ended;   /* proxy_end() has audited it: it answers, lingers or closes */
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
	/* The request head proxy_decide() parsed and planned, kept for
	 * proxy_start_request() (NULL: none); see struct parsed. */
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

/*
 * A plain-HTTP request head as proxy_read_head() parsed it and proxy_decide() planned
 * its credentials, kept until proxy_start_request() writes it upstream, so that
 * a request is parsed and planned once. Its slices point into c->in at
 * @pos, which does not move in between (the client is not read while the
 * upstream is resolved and connected); proxy_start_request() checks that it has
 * not, and parses again if it has.
 */
struct parsed {
	struct http_request req;
	struct creds_plan plan;
	size_t pos; /* c->in->pos when parsed */
	int len;    /* the head's length */
};

enum sb_result { SB_DONE, SB_WAIT, SB_FROM_GONE, SB_TO_GONE, SB_NOPIPE };

/* io.c */
uint64_t proxy_now_us(void);
struct buf *proxy_buf_new(size_t cap);
void proxy_buf_compact(struct buf *b);
uint32_t proxy_events_for(struct conn *c, struct ev *ev, uint32_t *cur, uint32_t wanted,
			   uint32_t events);
void proxy_want(struct conn *c, uint32_t cmask, uint32_t umask);
ssize_t proxy_ssl_result(struct conn *c, bool up, SSL *ssl, int k);
ssize_t proxy_io_send(struct conn *c, bool up, const void *p, size_t n);
ssize_t proxy_read_into_max(struct conn *c, bool up, struct buf *b, size_t max);
ssize_t proxy_read_into(struct conn *c, bool up, struct buf *b);
bool proxy_plain_both(const struct conn *c);
int proxy_write_out(struct conn *c, bool up, struct buf *b, size_t upto, uint64_t *count);

/* conn.c */
void proxy_audit(struct conn *c, const char *decision, const char *reason);
void proxy_close_upstream(struct conn *c);
void proxy_out_drop(struct conn *c);
const char *proxy_status_text(int status);
enum step proxy_end(struct conn *c, enum proxy_end_how how, int status, const char *decision,
		    const char *reason);
enum step proxy_conn_end(struct conn *c, const char *decision, const char *reason);
bool proxy_ending(const struct conn *c);
enum step proxy_reply(struct conn *c, int status, const char *decision, const char *reason);
enum step proxy_deny(struct conn *c, const char *reason);
void proxy_on_timer(struct timer *t);
void proxy_refresh_policy(struct conn *c);
void proxy_conn_run(struct conn *c);
void proxy_on_resume(struct timer *t);
void proxy_on_client(struct ev *ev, uint32_t events);
void proxy_on_upstream(struct ev *ev, uint32_t events);

/* decide.c */
bool proxy_host_same(const char *a, const char *b);
bool proxy_intercepted(const struct policy *p, const char *host);
enum step proxy_decide_target(struct conn *c);
enum step proxy_check_credentials(struct conn *c, struct http_request *req, const char *head,
				   size_t hl, struct creds_plan *plan);
enum step proxy_decide(struct conn *c, struct parsed *ps);
bool proxy_still_allowed(const struct conn *c, const struct policy *np);

/* connect.c */
void proxy_on_resolved(struct resolve_req *req, int status, const struct sl_addr *addrs,
			size_t n, void *arg);
enum step proxy_begin_connect(struct conn *c);
enum step proxy_connected(struct conn *c);

/* first_bytes.c */
enum step proxy_read_head(struct conn *c);
struct parsed *proxy_parsed_new(void);
void proxy_parsed_free(struct parsed *ps);
void proxy_parsed_spare_drop(void);
enum step proxy_peek(struct conn *c);
enum step proxy_sniff(struct conn *c, bool timed_out);

/* tunnel.c */
int proxy_make_pipe(int p[2]);
void proxy_pipes_close(struct conn *c);
enum step proxy_tunnel(struct conn *c);
enum step proxy_tunnel_after_peek(struct conn *c);
enum step proxy_establish(struct conn *c);

/* intercept.c */
enum step proxy_start_tls(struct conn *c);
enum step proxy_tls_accept(struct conn *c);
enum step proxy_tls_connect(struct conn *c);

/* framer.c */
void proxy_framer_free(struct framer **f);
int proxy_framer_start(struct framer **f, bool response, bool skip_body);
ssize_t proxy_framer_feed(struct framer *f, const char *data, size_t len);
uint64_t proxy_framer_payload_left(const struct framer *f);
int proxy_framer_skip(struct framer *f, size_t n);
bool proxy_framer_finish(struct framer *f);

/* relay.c */
enum step proxy_start_request(struct conn *c);
enum step proxy_send_request(struct conn *c);
enum step proxy_read_response_head(struct conn *c);
enum step proxy_relay_response(struct conn *c);

#endif
