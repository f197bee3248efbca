// SPDX-License-Identifier: MIT
/* The HTTP relay: request upstream with credentials, response back. */
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

/* A body's payload goes by splice(2) only when this much of it is still to
 * come: below that one read and one send are cheaper than a pipe. */
#define SPLICE_MIN_BODY UBUF_SIZE
/* A chunk-size line, a chunk's CRLF and trailers are read in pieces this
 * small while a body is spliced, so that little payload after them is
 * copied through user space. */
#define FRAMING_READ 256

/*
 * Moves the payload @f admits from @from to @to through the pipe @p (taken
 * from @w's when there is none and enough payload is to come), never past what
 * the framer admits: what follows (a chunk-size line, trailers, the next
 * message) stays in the socket for the caller to read and frame. Bytes are
 * counted in @count as they reach @to. Return: SB_DONE when the pipe is
 * empty and the framer needs to see the next bytes; SB_WAIT with
 * *@from_mask and *@to_mask set to what to wait for; SB_FROM_GONE when
 * @from ended or failed mid-payload (nothing more of the body will come);
 * SB_TO_GONE when @to failed; SB_NOPIPE when no pipe could be made (the
 * caller copies instead).
 */
static enum sb_result splice_body(struct worker *w, struct framer *f, int from, int to, int p[2],
				  size_t *inpipe, bool *full, uint64_t *count, uint32_t *from_mask,
				  uint32_t *to_mask)
{
	bool refused = false;
	int rounds;

	if (p[0] < 0) {
		if (proxy_framer_payload_left(f) < SPLICE_MIN_BODY)
			return SB_DONE;
		if (proxy_pipe_get(w, p) < 0)
			return SB_NOPIPE;
	}
	/* Bounded: a large body yields to other connections now and then;
	 * level-triggered readiness brings it back at once. */
	for (rounds = 0; rounds < 16; rounds++) {
		uint64_t left = proxy_framer_payload_left(f);
		bool progress = false;
		ssize_t k;

		refused = false;
		if (left > 0 && *inpipe < PIPE_CAP && !*full) {
			size_t n = PIPE_CAP - *inpipe;

			if (left < n)
				n = (size_t)left;
			k = splice(from, NULL, p[1], NULL, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k > 0) {
				*inpipe += (size_t)k;
				if (proxy_framer_skip(f, (size_t)k) < 0)
					return SB_FROM_GONE;
				progress = true;
			} else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
				return SB_FROM_GONE; /* an EOF or an error */
			} else {
				refused = errno == EAGAIN;
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
				return SB_TO_GONE;
			}
		}
		if (*inpipe == 0 && proxy_framer_payload_left(f) == 0)
			return SB_DONE;
		if (!progress)
			break;
	}
	/* A pipe full of small buffers takes no more (proxy_pipe_full()). */
	if (refused && !*full)
		*full = proxy_pipe_full(from, *inpipe);
	*from_mask = proxy_framer_payload_left(f) > 0 && *inpipe < PIPE_CAP && !*full ? EPOLLIN : 0;
	*to_mask = *inpipe > 0 ? EPOLLOUT : 0;
	return SB_WAIT;
}

/*
 * The placeholders a request head carries, against the sandbox's table and
 * the credentials' scopes, acted on. A CONNECT head carries none in scope:
 * the broker sees nothing inside the tunnel. Fills @plan (when not NULL)
 * for the rewrite, and c->cred_name for the audit line. Return: STEP_NEXT
 * to go on, else the refusal's step.
 */
enum step proxy_check_credentials(struct conn *c, struct http_request *req, const char *head,
				  size_t hl, struct creds_plan *plan)
{
	struct creds_plan local;
	struct proxy_verdict v;

	c->cred_name[0] = '\0';
	if (c->is_connect) {
		if (proxy_check_connect_head(head, hl, &v) != PROXY_ALLOW)
			return proxy_refuse(c, &v);
		return STEP_NEXT;
	}
	if (!plan)
		plan = &local;
	/* Credentials go by the destination the broker connects to, never by
	 * what the request's Host says (proxy_decide() makes them agree). */
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
	if (proxy_check_placeholders(plan, c->sb->placeholders_lost, &v) != PROXY_ALLOW)
		return proxy_refuse(c, &v);
	return STEP_NEXT;
}

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
	size_t cap = c->w->b->cfg.max_head_bytes * 2 + 1024, i;
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

enum step proxy_start_request(struct conn *c)
{
	struct parsed *ps = c->parsed;
	struct http_request *req;
	int n, headlen;

	c->parsed = NULL;
	if (!ps || ps->pos != c->in->pos) {
		/* Not kept, or the buffer moved: parse and plan again. */
		enum step s;

		proxy_parsed_free(ps);
		ps = proxy_parsed_new();
		if (!ps)
			return proxy_conn_end(c, PROXY_ERROR, SL_REASON_OUT_OF_MEMORY);
		ps->len = http_parse_request(c->in->data + c->in->pos, c->in->len - c->in->pos,
					     c->w->b->cfg.max_head_bytes, &ps->req);
		if (ps->len <= 0) {
			proxy_parsed_free(ps);
			return proxy_reply(c, 400, PROXY_DENY, SL_REASON_BAD_REQUEST);
		}
		s = proxy_check_credentials(c, &ps->req, c->in->data + c->in->pos, (size_t)ps->len,
					    &ps->plan);
		if (s != STEP_NEXT || proxy_ending(c)) {
			proxy_parsed_free(ps);
			return s;
		}
	}
	/* Audit mode let it through: no credential goes with it. */
	{
		struct proxy_verdict v;

		if (proxy_check_audit_credentials(c->would_deny, &ps->plan, &v) != PROXY_ALLOW) {
			proxy_parsed_free(ps);
			c->would_deny = SL_REASON_ALLOWED;
			return proxy_refuse(c, &v);
		}
	}
	req = &ps->req;
	headlen = ps->len;
	if (!c->out)
		/* Room for injected headers and replaced placeholders. */
		c->out = proxy_buf_new(c->w->b->cfg.max_head_bytes * 2 + 1024);
	if (!c->out) {
		proxy_parsed_free(ps);
		return proxy_conn_end(c, PROXY_ERROR, SL_REASON_OUT_OF_MEMORY);
	}
	reflect_clear(&c->refl);
	if (ps->plan.nuse > 0) {
		n = inject(c, req, &ps->plan);
		if (n == -ENOKEY || n == -EINVAL || n == -EAGAIN) {
			proxy_parsed_free(ps);
			return proxy_reply(c, 502, PROXY_ERROR, SL_REASON_CREDENTIAL_UNAVAILABLE);
		}
		if (n == -E2BIG) {
			proxy_parsed_free(ps);
			return proxy_reply(c, 502, PROXY_ERROR, SL_REASON_REFLECTION_UNSCANNABLE);
		}
	} else {
		n = http_write_request_head(req, c->out->data, c->out->cap, NULL, 0);
	}
	proxy_parsed_free(ps);
	if (n == -ENOMEM)
		return proxy_reply(c, 503, PROXY_ERROR, SL_REASON_OUT_OF_MEMORY);
	if (n < 0)
		return proxy_reply(c, 400, PROXY_DENY, SL_REASON_HEAD_TOO_LARGE);
	c->out->pos = 0;
	c->out->len = (size_t)n;
	c->in->pos += (size_t)headlen;
	if (proxy_framer_start(&c->reqf, false, false) < 0 ||
	    proxy_framer_start(&c->respf, true, c->head_req) < 0)
		return proxy_conn_end(c, PROXY_ERROR, SL_REASON_OUT_OF_MEMORY);
	/* Prime the request framer with the original head so it knows the
	 * body's framing; the head was validated already. */
	if (proxy_framer_feed(c->reqf, c->in->data + c->in->pos - headlen, (size_t)headlen) < 0)
		return proxy_reply(c, 400, PROXY_DENY, SL_REASON_BAD_FRAMING);
	if (!c->uin)
		c->uin = proxy_buf_new(UBUF_SIZE);
	if (!c->uin)
		return proxy_conn_end(c, PROXY_ERROR, SL_REASON_OUT_OF_MEMORY);
	c->uin->pos = c->uin->len = 0;
	c->interim = c->resp_partial = false;
	loop_timer_arm(c->w->loop, &c->timer, c->w->limits->response_timeout_ms);
	c->timer_moved = c->up + c->down;
	c->st = CS_REQ;
	return STEP_NEXT;
}

/* Sends the head, then body bytes as the framer admits them. */
enum step proxy_send_request(struct conn *c)
{
	int r;

	if (c->out->pos < c->out->len) {
		/* Counted as sent: the head (a URL and headers carry data out
		 * as a body does) or the body bytes stashed below. */
		r = proxy_write_out(c, true, c->out, c->out->len, &c->up);
		if (r < 0)
			return proxy_reply(c, 502, PROXY_ERROR, SL_REASON_UPSTREAM_RESET);
		if (r == 0) {
			proxy_want(c, 0, EPOLLOUT);
			return STEP_AGAIN;
		}
		explicit_bzero(c->out->data, c->out->len);
	}
	/* The framer may have admitted the last payload while the pipe still
	 * holds it: done only once that is out too. */
	while (!c->reqf->done || c->pu_n > 0) {
		size_t avail = c->in->len - c->in->pos;
		ssize_t take, k;

		if (avail == 0 && proxy_plain_both(c)) {
			/* The payload the framer only counts goes by splice. */
			uint32_t cm = 0, um = 0;

			switch (splice_body(c->w, c->reqf, c->cev.fd, c->uev.fd, c->pu, &c->pu_n,
					    &c->pu_full, &c->up, &cm, &um)) {
			case SB_WAIT:
				proxy_want(c, cm, um);
				return STEP_AGAIN;
			case SB_FROM_GONE:
				return proxy_conn_end(c, PROXY_ALLOW, SL_REASON_CLIENT_GONE);
			case SB_TO_GONE:
				return proxy_reply(c, 502, PROXY_ERROR, SL_REASON_UPSTREAM_RESET);
			case SB_DONE:
			case SB_NOPIPE:
				break;
			}
			if (c->reqf->done)
				break;
		}
		if (avail == 0) {
			ssize_t got = proxy_read_into_max(c, false, c->in,
							  c->pu[0] >= 0 ? FRAMING_READ : SIZE_MAX);

			if (got == -EAGAIN) {
				proxy_want(c, EPOLLIN, 0);
				return STEP_AGAIN;
			}
			if (got <= 0) {
				return proxy_conn_end(c, PROXY_ALLOW, SL_REASON_CLIENT_GONE);
			}
			continue;
		}
		take = proxy_framer_feed(c->reqf, c->in->data + c->in->pos, avail);
		if (take < 0)
			return proxy_reply(c, 400, PROXY_DENY, SL_REASON_BAD_BODY);
		if (take == 0)
			break;
		/* Send what the framer admitted; keep the rest of the buffer. */
		k = proxy_io_send(c, true, c->in->data + c->in->pos, (size_t)take);
		if (k == -EAGAIN) {
			/* Undo: the framer saw bytes we did not send. Rather than
			 * rewind llhttp, send them blocking-free later: keep them
			 * in out. */
			proxy_buf_compact(c->out);
			c->out->pos = c->out->len = 0;
			memcpy(c->out->data, c->in->data + c->in->pos, (size_t)take);
			c->out->len = (size_t)take;
			c->in->pos += (size_t)take;
			proxy_want(c, 0, EPOLLOUT);
			return STEP_AGAIN;
		}
		if (k < 0)
			return proxy_reply(c, 502, PROXY_ERROR, SL_REASON_UPSTREAM_RESET);
		c->up += (uint64_t)k;
		if (k < take) {
			size_t rest = (size_t)(take - k);

			c->out->pos = 0;
			memcpy(c->out->data, c->in->data + c->in->pos + k, rest);
			c->out->len = rest;
			c->in->pos += (size_t)take;
			proxy_want(c, 0, EPOLLOUT);
			return STEP_AGAIN;
		}
		c->in->pos += (size_t)take;
	}
	c->u_idle = !c->ussl && !(c->uev_mask & EPOLLET) && c->uin->len == c->uin->pos;
	proxy_pipes_close(c);
	/* The request is sent: its response head is due in response_timeout. */
	loop_timer_arm(c->w->loop, &c->timer, c->w->limits->response_timeout_ms);
	c->st = CS_RESP_HEAD;
	return STEP_NEXT;
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

/* A response head is parsed and looked at within proxy_read_response_head():
 * one per thread (3 KiB) rather than one allocated per response. */
static __thread struct http_response resp_scratch;

enum step proxy_read_response_head(struct conn *c)
{
	struct http_response *resp = &resp_scratch;
	struct proxy_verdict v;
	ssize_t got = 0;
	int hl;

	/* Bytes already here (what followed a 1xx) are parsed before reading. */
	proxy_buf_compact(c->uin);
	if (c->u_idle) {
		c->u_idle = false;
		if (c->uin->len == 0) {
			proxy_want(c, 0, EPOLLIN);
			return STEP_AGAIN;
		}
	}
	if (c->uin->len == 0 || c->resp_partial) {
		got = proxy_read_into(c, true, c->uin);
		if (got == -EAGAIN) {
			proxy_want(c, 0, EPOLLIN);
			return STEP_AGAIN;
		}
		if (got <= 0 && got != -ENOBUFS)
			return proxy_reply(c, 502, PROXY_ERROR, SL_REASON_UPSTREAM_RESET);
	}
	hl = http_parse_response(c->uin->data, c->uin->len, c->uin->cap, c->head_req, resp);
	c->resp_partial = hl == 0;
	if (hl == 0 && got != -ENOBUFS && c->uin->len < c->uin->cap)
		return STEP_NEXT; /* read more */
	if (hl <= 0)
		return proxy_reply(c, 502, PROXY_ERROR, SL_REASON_BAD_RESPONSE);
	c->status = resp->status;
	if (resp->status >= 100 && resp->status < 200) {
		/* No Upgrade is ever forwarded: a 101 answers nothing sent. */
		if (c->status == 101)
			return proxy_reply(c, 502, PROXY_ERROR, SL_REASON_BAD_RESPONSE);
		/* An interim response (100 Continue, 103 Early Hints) goes to
		 * the client as it came; the final one follows on the same
		 * connection and is read as a response of its own. */
		c->interim = true;
		c->st = CS_RESP_BODY;
		return STEP_NEXT;
	}
	proxy_check_redirect(c->pol, c->host, c->port, c->cssl != NULL, resp->status,
			     resp->has_location ? &resp->location : NULL,
			     sandbox_audit(c->sb, c->pol), &v);
	if (v.decision == PROXY_WOULD_DENY && c->would_deny == SL_REASON_ALLOWED)
		c->would_deny = v.reason; /* relayed; its audit line says so */
	else if (v.decision != PROXY_ALLOW && v.decision != PROXY_WOULD_DENY)
		return proxy_refuse(c, &v);
	if (c->refl.n > 0 && !identity_encoded(resp))
		return proxy_reply(c, 502, PROXY_ERROR, SL_REASON_REFLECTION_UNSCANNABLE);
	c->upstream_reusable = resp->keep_alive && !resp->body_until_close;
	if (resp->body_until_close)
		c->client_keepalive = false;
	/* The response head goes to the client as received. */
	loop_timer_arm(c->w->loop, &c->timer, policy_limits(c->pol)->idle_timeout_sec * 1000);
	c->timer_moved = c->up + c->down;
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
enum step proxy_relay_response(struct conn *c)
{
	for (;;) {
		size_t unfed = c->uin->len - c->uin->pos - c->pend, sendable = c->pend;

		if (unfed > 0 && !c->respf->done) {
			ssize_t take = proxy_framer_feed(
				c->respf, c->uin->data + c->uin->pos + c->pend, unfed);

			if (take < 0)
				return proxy_conn_end(c, PROXY_ALLOW, SL_REASON_BAD_RESPONSE_BODY);
			c->pend += (size_t)take;
			sendable = c->pend;
		}
		if (c->refl.n > 0 && c->pend > 0)
			sendable -=
				reflect_scan(&c->refl, (unsigned char *)c->uin->data + c->uin->pos,
					     c->pend, c->respf->done);
		while (sendable > 0) {
			ssize_t k = proxy_io_send(c, false, c->uin->data + c->uin->pos, sendable);

			if (k == -EAGAIN) {
				proxy_want(c, EPOLLOUT, 0);
				return STEP_AGAIN;
			}
			if (k <= 0)
				return proxy_conn_end(c, PROXY_ALLOW, SL_REASON_CLIENT_GONE);
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
		if (c->pd_n > 0 || (c->uin->pos == c->uin->len && c->refl.n == 0 && !c->interim &&
				    proxy_plain_both(c))) {
			/* All held bytes are sent, and nothing of the body is
			 * to be looked at: the payload goes by splice. */
			uint32_t cm = 0, um = 0;

			switch (splice_body(c->w, c->respf, c->uev.fd, c->cev.fd, c->pd, &c->pd_n,
					    &c->pd_full, &c->down, &um, &cm)) {
			case SB_WAIT:
				proxy_want(c, cm, um);
				return STEP_AGAIN;
			case SB_FROM_GONE:
				return proxy_conn_end(c, PROXY_ALLOW, SL_REASON_UPSTREAM_RESET);
			case SB_TO_GONE:
				return proxy_conn_end(c, PROXY_ALLOW, SL_REASON_CLIENT_GONE);
			case SB_DONE:
			case SB_NOPIPE:
				break;
			}
			if (c->respf->done)
				break;
		}
		{
			ssize_t got = proxy_read_into_max(c, true, c->uin,
							  c->pd[0] >= 0 ? FRAMING_READ : SIZE_MAX);

			if (got == -EAGAIN) {
				proxy_want(c, 0, EPOLLIN);
				return STEP_AGAIN;
			}
			if (got == 0 && proxy_framer_finish(c->respf))
				continue; /* close-delimited: what is held goes now */
			if (got <= 0)
				return proxy_conn_end(c, PROXY_ALLOW, SL_REASON_UPSTREAM_RESET);
		}
	}
	if (c->interim) {
		/* The 1xx is relayed; what follows it in uin is the next head. */
		c->interim = false;
		if (proxy_framer_start(&c->respf, true, c->head_req) < 0)
			return proxy_conn_end(c, PROXY_ERROR, SL_REASON_OUT_OF_MEMORY);
		loop_timer_arm(c->w->loop, &c->timer, c->w->limits->response_timeout_ms);
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
		proxy_audit(c, PROXY_ALLOW, SL_REASON_SECRET_REDACTED);
	} else {
		proxy_audit(c, PROXY_ALLOW, SL_REASON_ALLOWED);
	}
	reflect_clear(&c->refl);
	if (c->pd[0] >= 0 && c->upstream_reusable) {
		/* Spliced: what upstream sent after the body is still in the
		 * socket, where the copying path would have read it. It is not
		 * part of this response, and must not pass for the next one. */
		if (!proxy_fd_quiet(c->uev.fd))
			c->upstream_reusable = false;
	}
	proxy_pipes_close(c);
	if (c->uin->pos < c->uin->len || !c->upstream_reusable)
		proxy_close_upstream(c);
	c->u_watched = proxy_upstream_watched_in(c);
	c->u_quiet_seq = loop_batch_seq(c->w->loop);
	c->uin->pos = c->uin->len = 0;
	if (!c->client_keepalive)
		return proxy_close(c);
	/* Next request on the kept-alive connection. Until it comes the
	 * connection holds no buffers but what the client sent ahead: the
	 * upstream's is empty, the head sent and wiped (proxy_send_request()),
	 * and what c->out held last (body bytes) is wiped too. */
	proxy_buf_park(&c->uin);
	if (c->out && c->out->pos == c->out->len) {
		explicit_bzero(c->out->data, c->out->len);
		proxy_buf_park(&c->out);
	}
	c->up = c->down = 0;
	c->status = 0;
	c->head_started = false;
	c->c_idle = false;
	if (c->in && c->in->pos == c->in->len) {
		c->c_idle = !c->cssl && !(c->cev_mask & EPOLLET);
		proxy_buf_park(&c->in);
	}
	c->st = CS_HEAD;
	loop_timer_arm(c->w->loop, &c->timer, policy_limits(c->pol)->idle_timeout_sec * 1000);
	return STEP_NEXT;
}
