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
#include <sys/epoll.h>
#include <sys/types.h>
#include <openssl/ssl.h>

#include "broker/broker_internal.h"
#include "broker/creds/creds.h"
#include "broker/http.h"
#include "broker/reflect.h"
#include "common/reason.h"
#include "policy/policy.h"

struct tls_hello;

/* From <linux/netfilter_ipv4.h>, which clashes with <netinet/in.h>. */
#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif

#define UBUF_SIZE (16 * 1024)
#define PIPE_CAP (64 * 1024)
#define LINGER_MS 2000
#define REPLY_CAP 1024
/* Spare buffers a worker thread keeps for its connections' next requests
 * (io.c, proxy_buf_park()). */
#define PROXY_SPARE_BUFS 64
/* Transparent: how long the client may stay silent before the broker
 * connects to see whether the server speaks first. */
#define SNIFF_MS 300

enum cstate {
	CS_SNIFF,	/* transparent: peeking at the first bytes */
	CS_HEAD,	/* reading a request head from the client */
	CS_HOLD,	/* unlisted: hold: waiting for approve, refuse or the timeout (hold.c) */
	CS_RESOLVE,	/* waiting for the resolver */
	CS_CONNECT,	/* non-blocking connect in progress */
	CS_ESTABLISH,	/* writing "200 Connection established" */
	CS_PEEK,	/* CONNECT: peeking at the tunnel's first bytes */
	CS_TLS_ACCEPT,	/* intercepting: the sandbox's TLS handshake */
	CS_TLS_CONNECT, /* intercepting: the upstream TLS handshake */
	CS_TUNNEL,	/* splicing both ways */
	CS_REQ,		/* sending the request head and body upstream */
	CS_RESP_HEAD,	/* reading the response head */
	CS_RESP_BODY,	/* relaying the response body */
	CS_REPLY,	/* writing a reply of the broker's own, then linger */
	CS_LINGER,	/* write side shut; discarding input until EOF or timer */
	CS_CLOSE,	/* ended (audited): the driver frees it, nobody else */
};

/* The state's name (conn.c), for log lines. */
const char *proxy_state_name(enum cstate st);

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

/* Raw bytes of a target kept for the audit line (which escapes and cuts
 * it to AUDIT_FIELD_MAX). */
#define PROXY_TARGET_MAX 513

/*
 * A connection, its fields grouped by the phase that owns them (the file
 * named); a later phase reads what an earlier one set.
 */
struct conn {
	/* Life (conn.c, accept.c): the driver, the deadlines, the end. */
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
	bool counted;	     /* holds a per-sandbox and a total connection slot */
	bool ended;	     /* proxy_end() has audited it: it answers, lingers or closes */
	bool raw;	     /* no HTTP is spoken (yet): refusals are resets */
	bool held;	     /* in its sandbox's table of held requests (hold.c) */
	const char *proto;   /* "http", "connect", "tls", "tcp", "https" */
	int status;	     /* HTTP status sent for this request */
	uint64_t t_req;	     /* ms, request start */
	uint64_t up, down;   /* bytes of this request or tunnel, each way */
	struct buf *out;     /* to the client (replies) or upstream (request head) */
	struct sl_addr src;  /* the client, as accept() gave it */
	uint16_t src_port;
	/* The audit line's "target": the destination as the client wrote it
	 * (proxy_note_target(), proxy_note_head_target()); "" before it
	 * named one. */
	char target[PROXY_TARGET_MAX];

	/* Decision (decide.c, connect.c): what the request is for. */
	char host[256];
	uint16_t port;
	bool literal; /* an address literal: in dst */
	bool is_connect;
	int rule;		 /* the policy rule that allowed it, else -1 */
	bool raw_ok;		 /* the rule lets bytes that are neither HTTP nor TLS through */
	bool need_raw;		 /* transparent: the first bytes were neither HTTP nor TLS */
	bool transparent;	 /* accepted on the transparent port */
	struct sl_addr orig_dst; /* transparent: SO_ORIGINAL_DST */
	uint16_t orig_port;
	bool orig_synthetic;
	char method[16];
	char path[256];
	char cred_name[65]; /* the credential a request used or misused: its name only */
	/* Audit mode: why the policy would have refused this request, which
	 * went on (SL_REASON_ALLOWED: it would not). Its audit line then says
	 * "would-deny" with this reason; set per request by
	 * proxy_decide_target() and by a redirect's check. */
	enum sl_reason would_deny;

	/* Connect (connect.c): the checked addresses, the upstream socket. */
	struct resolve_req rr;
	struct sl_addr addrs[RESOLVE_MAX_ADDRS];
	uint8_t naddrs, ai;
	struct sl_addr dst; /* what the broker connected to */
	uint64_t connect_start_us;
	enum sl_reason connect_error; /* why the last address failed (connect-timeout) */
	char conn_host[256];	      /* upstream currently connected, for reuse */
	uint16_t conn_port;
	struct sl_addr conn_dst; /* its address (judged again at each reuse) */
	bool upstream_reusable;
	/* up + down when the timer of a request's body (CS_REQ) or response's
	 * (CS_RESP_BODY) was armed: a body still moving when it fires is not
	 * idle, and the timer starts again (proxy_on_timer()). */
	uint64_t timer_moved;

	/* First bytes (first_bytes.c): request heads, a tunnel's first bytes. */
	struct buf *in; /* from the client: head, then body and what follows */
	bool head_started;
	int head_len; /* of the request head being decided */
	/* The request head proxy_decide() parsed and planned, kept for
	 * proxy_start_request() (NULL: none); see struct parsed. */
	struct parsed *parsed;
	bool inner;  /* HTTP requests inside a CONNECT tunnel, each checked */
	bool early;  /* the client sent bytes before the CONNECT's 200 (in c->in) */
	bool silent; /* transparent: the client said nothing before connecting */

	/* Tunnel (tunnel.c): the spliced relay. */
	int pu[2], pd[2];  /* pipes: client->upstream, upstream->client */
	size_t pu_n, pd_n; /* bytes in each pipe */
	/* A pipe that took no more while its side had bytes to give: full of
	 * small buffers (proxy_pipe_full()). Its side is not read until bytes
	 * leave the pipe; only while the pipe holds bytes. */
	bool pu_full, pd_full;
	uint64_t t_last; /* ms, last activity in a tunnel */
	bool c_eof, u_eof, c_shut, u_shut;

	/* TLS interception (intercept.c). */
	bool intercept;	  /* TLS to this host ends at the broker (a credential's scope) */
	bool tls_first;	  /* the upstream handshake precedes the first request */
	SSL *cssl, *ussl; /* the sandbox's side, the upstream side */
	uint8_t cssl_want, ussl_want; /* EPOLLIN/EPOLLOUT an SSL call waits for */

	/* HTTP relay (relay.c). */
	struct buf *uin; /* from upstream */
	struct framer *reqf, *respf;
	size_t pend;	     /* response bytes admitted by the framer, not yet sent */
	struct reflect refl; /* the secrets this request carried, to redact */
	bool client_keepalive;
	bool head_req;	   /* a HEAD: the response has no body */
	bool interim;	   /* relaying a 1xx response: the final one follows */
	bool resp_partial; /* c->uin holds part of a response head */
	/* Plain, level-triggered sockets only: a side that almost surely has
	 * nothing to read yet is waited for instead of read first (EAGAIN).
	 * Set on the way into CS_HEAD once a response is relayed (the client
	 * has not seen it yet) and into CS_RESP_HEAD once a request is sent
	 * (the origin has not seen it yet); cleared by the wait. */
	bool c_idle, u_idle;
	/* A kept-alive upstream between requests: since loop_batch_seq() was
	 * u_quiet_seq (the end of its last response) it has been watched
	 * level-triggered for EPOLLIN, and no event for it came since
	 * (proxy_on_upstream() clears it). upstream_quiet() then asks the
	 * loop instead of the socket. */
	bool u_watched;
	uint64_t u_quiet_seq;
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

/* Verdicts: what decide.c's checks return and proxy_end() acts on. */
enum proxy_decision {
	PROXY_ALLOW,
	PROXY_DENY,  /* the policy refuses it ("deny" in the audit line) */
	PROXY_ERROR, /* it could not be done ("error") */
	/* Audit mode: the policy would refuse it for the verdict's reason,
	 * and it goes on ("would-deny" in the audit line); the caller acts
	 * as on PROXY_ALLOW. Only an allowlist question gets it (a name
	 * outside the host rules, a redirect leaving the policy): the
	 * address guard, literals, Host/SNI, raw TCP and credentials stay
	 * enforced. */
	PROXY_WOULD_DENY,
	PROXY_DECISION_COUNT,
};

struct proxy_verdict {
	enum proxy_decision decision;
	enum sl_reason reason; /* SL_REASON_ALLOWED when allowed */
	int status;	       /* the answer's HTTP status (403, 400); 0 when allowed */
	int rule;	       /* the policy rule the audit line names, else -1 */
	bool raw_ok;	       /* that rule lets raw TCP through (where it allowed) */
};

/* Where a request head came from: what binds its target. */
enum proxy_mode {
	PROXY_MODE_EXPLICIT,	/* the proxy port: the request names its target */
	PROXY_MODE_TRANSPARENT, /* redirected: the destination the sandbox dialled */
	PROXY_MODE_IN_TLS,	/* inside intercepted TLS: the tunnel's host */
	PROXY_MODE_IN_TUNNEL,	/* plain HTTP inside a CONNECT tunnel: its host */
};

/* A destination to judge: a name, or an address literal. */
struct proxy_target {
	const char *host;	    /* the name (NUL-terminated), when !literal */
	const struct sl_addr *addr; /* the literal, when literal */
	uint16_t port;
	bool literal;
	bool local;    /* the literal is the broker's own (broker_is_local()) */
	bool need_raw; /* the bytes are neither HTTP nor TLS */
	bool audit;    /* the sandbox is in audit mode (sandbox_audit()) */
};

/* What a bound request's Host must name (proxy_check_host()). */
struct proxy_bound {
	const char *host;	    /* the tunnel's host, or the synthetic name */
	const struct sl_addr *addr; /* a transparent literal destination, else NULL */
	uint16_t port;
};

/* io.c */
uint64_t proxy_now_us(void);
struct buf *proxy_buf_new(size_t cap);
void proxy_buf_park(struct buf **bp);
void proxy_buf_spare_drop(void);
void proxy_buf_compact(struct buf *b);
uint32_t proxy_events_for(struct conn *c, struct ev *ev, uint32_t *cur, uint32_t wanted,
			  uint32_t events);
void proxy_want(struct conn *c, uint32_t cmask, uint32_t umask);
/* cev_mask or uev_mask of a side proxy_park() took out of the loop. */
#define PROXY_MASK_PARKED 0xffffffffu
void proxy_park(struct conn *c, struct ev *ev, uint32_t *cur);
/* Is the upstream in the loop and watched for EPOLLIN level-triggered, so
 * that bytes on it show in the next batch (loop_unreported_since())? */
static inline bool proxy_upstream_watched_in(const struct conn *c)
{
	return c->uev.fd >= 0 && c->uev_mask != PROXY_MASK_PARKED &&
	       (c->uev_mask & (EPOLLIN | EPOLLET)) == EPOLLIN;
}
ssize_t proxy_ssl_result(struct conn *c, bool up, SSL *ssl, int k);
ssize_t proxy_io_send(struct conn *c, bool up, const void *p, size_t n);
ssize_t proxy_read_into_max(struct conn *c, bool up, struct buf *b, size_t max);
ssize_t proxy_read_into(struct conn *c, bool up, struct buf *b);
bool proxy_fd_quiet(int fd);
bool proxy_plain_both(const struct conn *c);
int proxy_write_out(struct conn *c, bool up, struct buf *b, size_t upto, uint64_t *count);

/* conn.c */
void proxy_audit(struct conn *c, enum proxy_decision d, enum sl_reason r);
/* The target as the client wrote it (@n bytes of @s; a NUL byte kept as an
 * invalid byte, which the audit line shows as \ufffd), for the audit line. */
void proxy_note_target(struct conn *c, const char *s, size_t n);
/* The same from a request head, parsed or not (@len bytes at @head): the
 * request-line target on the proxy port, the Host header's value where the
 * connection names its destination itself (transparent, in a tunnel). */
void proxy_note_head_target(struct conn *c, const char *head, size_t len);
void proxy_close_upstream(struct conn *c);
void proxy_out_drop(struct conn *c);
const char *proxy_status_text(int status);
enum step proxy_end(struct conn *c, enum proxy_end_how how, const struct proxy_verdict *v);
enum step proxy_conn_end(struct conn *c, enum proxy_decision d, enum sl_reason r);
enum step proxy_close(struct conn *c);
bool proxy_ending(const struct conn *c);
enum step proxy_refuse(struct conn *c, const struct proxy_verdict *v);
enum step proxy_reply(struct conn *c, int status, enum proxy_decision d, enum sl_reason r);
enum step proxy_deny(struct conn *c, enum sl_reason r);
void proxy_on_timer(struct timer *t);
void proxy_refresh_policy(struct conn *c);
void proxy_conn_run(struct conn *c);
void proxy_on_resume(struct timer *t);
void proxy_on_client(struct ev *ev, uint32_t events);
void proxy_on_upstream(struct ev *ev, uint32_t events);

/* decide.c: the checks. Each reads what it is given and nothing else, does
 * no I/O, and fills a verdict that the caller acts on (proxy_refuse()). */
const char *proxy_decision_name(enum proxy_decision d);
bool proxy_host_same(const char *a, const char *b);
bool proxy_intercepted(const struct policy *p, const char *host);

/**
 * proxy_check_address() - may the broker connect to @a:@port?
 * @origin: GUARD_FROM_NAME for an answer for an allowed name,
 *          GUARD_FROM_LITERAL for an address the client wrote
 * @local:  @a is one of the broker's own addresses
 *
 * The address guard's verdict (address-denied, address-literal,
 * port-not-allowed), then broker-address. Return: v->decision.
 */
enum proxy_decision proxy_check_address(const struct policy *pol, const struct sl_addr *a,
					uint16_t port, enum guard_origin origin, bool local,
					struct proxy_verdict *v);

/**
 * proxy_check_target() - the policy's verdict on a name or a literal and port
 *
 * A name by the host rules (not-allowlisted, port-not-allowed), a literal
 * by proxy_check_address(); then raw-tcp-not-allowed where @t->need_raw and
 * the rule does not allow raw TCP. v->rule and v->raw_ok say which rule
 * allowed it. With @t->audit, a name the host rules refuse is
 * PROXY_WOULD_DENY with that reason (no rule, so no raw TCP); a bad name
 * and everything else is judged as in enforce mode. Return: v->decision.
 */
enum proxy_decision proxy_check_target(const struct policy *pol, const struct proxy_target *t,
				       struct proxy_verdict *v);

/**
 * proxy_check_form() - is the request's form right for where it came?
 *
 * CONNECT inside TLS, a tunnel or on the transparent port, origin-form on
 * the proxy port and a target without a host are 400s. Return: v->decision.
 */
enum proxy_decision proxy_check_form(enum proxy_mode mode, const struct http_request *req,
				     struct proxy_verdict *v);

/**
 * proxy_check_host() - does a bound request's Host name what it is bound to?
 *
 * No domain fronting: inside TLS, a tunnel or a transparent connection the
 * Host (and its port, when given) must be @b's; a transparent literal
 * destination takes only that address. Always allowed for
 * PROXY_MODE_EXPLICIT. Return: v->decision.
 */
enum proxy_decision proxy_check_host(enum proxy_mode mode, const struct http_request *req,
				     const struct proxy_bound *b, struct proxy_verdict *v);

/* A CONNECT head carrying a placeholder: it would leave unseen. */
enum proxy_decision proxy_check_connect_head(const char *head, size_t len, struct proxy_verdict *v);

/* The credentials plan's verdict: placeholder-expired, -lost (@placeholders_lost:
 * the sandbox's were lost at the broker's start), -out-of-scope. */
enum proxy_decision proxy_check_placeholders(const struct creds_plan *plan, bool placeholders_lost,
					     struct proxy_verdict *v);

/**
 * proxy_check_audit_credentials() - may a request audit mode let through
 * carry a credential?
 * @would_deny: why the policy would refuse the request (SL_REASON_ALLOWED:
 *              it would not)
 * @plan:       its credentials plan
 *
 * No: a secret goes only where enforce mode would let the request go, so a
 * would-deny request the plan puts a credential in (injected, or a
 * placeholder replaced) is refused, deny with @would_deny's reason.
 * Return: v->decision.
 */
enum proxy_decision proxy_check_audit_credentials(enum sl_reason would_deny,
						  const struct creds_plan *plan,
						  struct proxy_verdict *v);

/**
 * proxy_check_redirect() - does a response's Location stay in the policy?
 * @host, @port: the request's; @tls: it came over TLS (https)
 * @status:      the response's status; only a 3xx is judged
 * @location:    its Location, or NULL
 *
 * @audit:       the sandbox is in audit mode: a Location leaving the policy
 *               is PROXY_WOULD_DENY (the client's request for it then meets
 *               the checks, the address guard first, as any other)
 *
 * By the policy's `redirects` mode. Return: v->decision.
 */
enum proxy_decision proxy_check_redirect(const struct policy *pol, const char *host, uint16_t port,
					 bool tls, int status, const struct http_slice *location,
					 bool audit, struct proxy_verdict *v);

/* connect.c */
enum step proxy_decide(struct conn *c, struct parsed *ps);
/* connect.c: what @c asks for, as proxy_check_target() takes it, on @p. */
struct proxy_target proxy_target_of(const struct conn *c, const struct policy *p);
enum step proxy_decide_target(struct conn *c);
void proxy_on_resolved(struct resolve_req *req, int status, const struct sl_addr *addrs, size_t n,
		       void *arg);
enum step proxy_begin_connect(struct conn *c);
enum step proxy_connected(struct conn *c);

/* first_bytes.c */
enum step proxy_read_head(struct conn *c);
struct parsed *proxy_parsed_new(void);
void proxy_parsed_free(struct parsed *ps);
void proxy_parsed_spare_drop(void);
enum step proxy_peek(struct conn *c);
enum step proxy_sniff(struct conn *c, bool timed_out);

/* hold.c */
/* Does the policy hold, rather than refuse, what @v refused? */
bool proxy_hold_wanted(const struct conn *c, const struct proxy_verdict *v);
/* Holds @c (CS_HOLD), or refuses it (hold-full) over the sandbox's caps. */
enum step proxy_hold(struct conn *c);
/* Takes @c out of its sandbox's table (no-op unless held); conn_free() too. */
void proxy_hold_leave(struct conn *c);
/* Held @c meets its sandbox's new policy: decided again unless still held. */
void proxy_hold_policy_changed(struct conn *c, const struct policy *np);
/* accept.c: a transparent connection held as a tunnel goes back to
 * CS_SNIFF, its first bytes (peeked, still in its socket) read anew. */
void proxy_transparent_restart(struct conn *c);

/* tunnel.c */
/* A pipe for @c's worker to splice through, into @p: one it keeps, else a
 * new one. 0 or a negative errno. */
int proxy_pipe_get(struct worker *w, int p[2]);
/* Both of @c's pipes back to its worker (closed unless empty); their
 * counts are then 0. */
void proxy_pipes_close(struct conn *c);
/* Is a pipe holding @inpipe bytes, into which a splice from @from was just
 * refused (EAGAIN), full? See tunnel.c. */
bool proxy_pipe_full(int from, size_t inpipe);
enum step proxy_tunnel(struct conn *c);
/* A tunnel's idle timer at @now: the ms to its next look, 0 once it has
 * been idle for @idle_ms. */
uint64_t proxy_tunnel_quiet(const struct conn *c, uint64_t now, uint64_t idle_ms);
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
enum step proxy_check_credentials(struct conn *c, struct http_request *req, const char *head,
				  size_t hl, struct creds_plan *plan);
enum step proxy_start_request(struct conn *c);
enum step proxy_send_request(struct conn *c);
enum step proxy_read_response_head(struct conn *c);
enum step proxy_relay_response(struct conn *c);

#endif
