// SPDX-License-Identifier: MIT
/* The DNS filter server: the sockets behind dns_port, where nftables
 * redirects every sandbox's DNS (TCP and UDP port 53).
 *
 * Theory of operation: each worker has its own UDP socket and TCP listener
 * on 0.0.0.0:dns_port (SO_REUSEPORT spreads sandboxes' flows over the
 * workers). A query is answered from the sandbox that its source address
 * names (looked up through the broker's dns_server_ops, per query, so a
 * reload or an unregister applies at once) by dns_filter_answer(): from the policy and the sandbox's
 * synthetic map, never from upstream. Before that the sandbox's token
 * bucket is charged; an empty bucket gets REFUSED, counted, and reported
 * (audit line and log) at most once a second. REFUSED answers have a bucket
 * of their own, as large as the first: a sandbox past both gets no answer
 * at all (counted and reported with the rest). A source that is no sandbox
 * gets REFUSED (EDE 18, Prohibited), itself bounded by a per-worker bucket
 * beyond which it gets nothing.
 *
 * Fairness: every sandbox's UDP queries share the workers' sockets, and a
 * datagram the kernel cannot queue is lost whoever sent it. The firewall
 * meters each sandbox before the socket (netns/nft.c, @dns_rate); here the
 * socket is drained as cheaply as possible, so that what a flood does get
 * through costs little: a receive in a batch and a bucket look-up, no
 * send (sending the REFUSED answers was two thirds of the CPU a flood
 * took).
 *
 * UDP: recvmmsg() batches, a bounded number per wake-up so that the rest
 * of the worker's loop gets its turn; each reply leaves from the address
 * the query was sent to (IP_PKTINFO), which is what conntrack needs to undo
 * the redirect. A datagram larger than our buffer gets FORMERR.
 *
 * TCP (RFC 7766): a bounded number of connections per worker, and per
 * sandbox (DNS_TCP_PER_SANDBOX over all workers, so that one sandbox
 * cannot hold every connection and deny TCP DNS to the others), each with a
 * fixed input buffer (a message that cannot fit closes the connection), a
 * fixed output buffer (when it is full the connection stops reading until
 * the client reads its answers), any number of queries in sequence, and an
 * idle timer that closes a connection which completes no query for
 * DNS_TCP_IDLE_MS. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/addr.h"
#include "common/log.h"
#include "common/loop.h"
#include "dnsfilter/dnsfilter.h"
#include "policy/policy.h"

#define UDP_BATCH 32
#define UDP_ROUNDS 8	    /* batches per wake-up */
#define UDP_BUF DNS_UDP_MAX /* a larger datagram is answered FORMERR */
#define REPLY_MAX 1024	    /* every reply the filter writes is < 600 bytes */
#define TCP_ACCEPT_ROUNDS 32
#define DNS_TCP_MAX_CONNS 256 /* per worker */
#define DNS_TCP_PER_SANDBOX 16
#define DNS_TCP_IDLE_MS 5000
#define TCP_IN_MAX (2 + DNS_UDP_MAX)
#define TCP_OUT_MAX (4 * (2 + REPLY_MAX))
/* Queries from sources that are no sandbox, answered per worker. */
#define UNKNOWN_QPS 100
#define UNKNOWN_BURST 200
#define REPORT_MS 1000
#define TCP_RETRY_MS 100    /* out of descriptors: TCP accept rests this long */
#define TCP_FD_LOG_MS 10000 /* and says so once per this */
/* UDP receive buffer: bursts from many sandboxes at once (a build starting
 * 100 lookups, each A and AAAA) overflow the ~200 KiB default. And what the
 * firewall's meter lets one sandbox send at once (rate plus burst: 2000
 * datagrams, about 1.7 KiB of accounting each at the largest unfragmented
 * size) must fit, whatever its source ports, even before a worker drains
 * any: 3.4 MiB, under the 8 MiB the kernel accounts for 4 MiB asked. */
#define UDP_RCVBUF (4 << 20)

struct dns_server;

struct dns_tcp {
	struct ev ev;
	struct timer timer;
	struct dns_server *srv;
	struct dns_tcp *next, *prev;
	/* A sandbox's (@sb.handle set): holds one of its state->tcp and a
	 * reference on it, not on its policy; handle NULL for an unknown source. */
	struct dns_client sb;
	struct sl_addr peer;
	uint16_t pport;
	uint32_t mask;
	bool eof;
	size_t in_len;
	size_t out_pos, out_len;
	uint8_t in[TCP_IN_MAX];
	uint8_t out[TCP_OUT_MAX];
};

union pktinfo_ctl {
	char buf[CMSG_SPACE(sizeof(struct in_pktinfo))];
	struct cmsghdr align;
};

struct dns_server {
	struct loop *loop;
	unsigned id; /* the worker's, for logs */
	const struct dns_server_ops *ops;
	void *ctx; /* the ops' */
	struct ev udp_ev, tcp_ev;
	struct timer tcp_retry; /* out of descriptors, TCP accept rests */
	struct log_every tcp_fd_log;
	struct dns_tcp *conns;
	unsigned n_conns;
	uint64_t tcp_full_log_ms;
	uint64_t tcp_sb_full_log_ms; /* the same for one sandbox's DNS_TCP_PER_SANDBOX */
	struct dns_bucket unknown;
	uint64_t unknown_dropped, unknown_log_ms;
	uint64_t send_failed;
	/* UDP batch state, used only inside on_udp() */
	struct mmsghdr rmsg[UDP_BATCH], smsg[UDP_BATCH];
	struct iovec riov[UDP_BATCH], siov[UDP_BATCH];
	struct sockaddr_in from[UDP_BATCH];
	union pktinfo_ctl rctl[UDP_BATCH], sctl[UDP_BATCH];
	uint8_t rbuf[UDP_BATCH][UDP_BUF];
	uint8_t sbuf[UDP_BATCH][REPLY_MAX];
};

/* --- the answer ----------------------------------------------------------- */

static void audit_dns(struct dns_server *srv, const struct dns_client *sb,
		      const struct sl_addr *src, uint16_t sport,
		      const struct dns_filter_result *res)
{
	srv->ops->audit(srv->ctx, sb, src, sport, res);
}

static void count(struct dns_server *srv, const struct dns_filter_result *res)
{
	srv->ops->count(srv->ctx, res->metric, res->decision, res->reason);
}

enum rate_verdict {
	RATE_ANSWER, /* within the rate: answer the query */
	RATE_REFUSE, /* over it: REFUSED */
	RATE_DROP,   /* over it and over the REFUSED answers: nothing */
};

/* What rate_check() has to report, when a report is due (else all 0). */
struct rate_report {
	bool due;
	uint64_t refused, dropped; /* since the last report */
};

/*
 * Charges @sb's buckets and says what the query gets. A report is due at
 * most once a second while the sandbox is over its rate; it hands over the
 * counts since the last one.
 */
static enum rate_verdict rate_check(struct dns_client_state *st, uint64_t now,
				    struct rate_report *rep)
{
	enum rate_verdict v = RATE_ANSWER;

	*rep = (struct rate_report){ 0 };
	pthread_mutex_lock(&st->lock);
	if (dns_bucket_take(&st->bucket, now, DNS_RATE_QPS, DNS_RATE_BURST))
		goto out;
	/* As many REFUSED a second as answers: a client over its rate learns
	 * it, and a flood beyond twice the rate costs a receive only. */
	if (dns_bucket_take(&st->refuse_bucket, now, DNS_RATE_QPS, DNS_RATE_BURST)) {
		v = RATE_REFUSE;
		st->limited++;
	} else {
		v = RATE_DROP;
		st->dropped++;
	}
	if (!st->limited_log_ms || now - st->limited_log_ms >= REPORT_MS) {
		rep->due = true;
		rep->refused = st->limited;
		rep->dropped = st->dropped;
		st->limited = st->dropped = 0;
		st->limited_log_ms = now;
	}
out:
	pthread_mutex_unlock(&st->lock);
	return v;
}

static int answer_unknown(struct dns_server *srv, const struct sl_addr *src, uint16_t sport,
			  const uint8_t *msg, size_t len, uint8_t *out, size_t outlen)
{
	struct dns_filter_result res;
	uint64_t now = loop_now_ms(srv->loop);
	int n;

	if (!dns_bucket_take(&srv->unknown, now, UNKNOWN_QPS, UNKNOWN_BURST)) {
		/* Not even REFUSED: whoever this is, it gets no traffic from
		 * us beyond the bucket. Counted, and logged once a second. */
		srv->unknown_dropped++;
		srv->ops->count(srv->ctx, "dropped", "deny", "unknown-source");
		if (now - srv->unknown_log_ms >= REPORT_MS) {
			char a[ADDR_STRLEN];

			addr_format(src, a, sizeof(a));
			log_warn("dns: worker %u: %llu queries from unknown "
				 "sources dropped (latest from %s)",
				 srv->id, (unsigned long long)srv->unknown_dropped, a);
			srv->unknown_dropped = 0;
			srv->unknown_log_ms = now;
		}
		return 0;
	}
	n = dns_filter_error(msg, len, DNS_RCODE_REFUSED, DNS_EDE_PROHIBITED, "deny",
			     "unknown-source", out, outlen, &res);
	audit_dns(srv, NULL, src, sport, &res);
	count(srv, &res);
	return n;
}

/*
 * Answers one query from @src. @truncated: the datagram did not fit our
 * buffer, so @msg is only its start. Returns the reply length, 0 for none.
 */
static int answer(struct dns_server *srv, const struct sl_addr *src, uint16_t sport,
		  const uint8_t *msg, size_t len, bool udp, bool truncated, uint8_t *out,
		  size_t outlen)
{
	struct dns_filter_result res;
	struct rate_report rep;
	enum rate_verdict v;
	struct dns_client cl, *sb = &cl;
	struct policy *pol;
	int n = 0;

	if (srv->ops->lookup(srv->ctx, src, &cl) < 0)
		return answer_unknown(srv, src, sport, msg, len, out, outlen);
	pol = cl.policy;

	v = rate_check(cl.state, loop_now_ms(srv->loop), &rep);
	if (v != RATE_ANSWER) {
		/* A dropped query is parsed only when a report needs it. */
		if (v == RATE_REFUSE || rep.due)
			n = dns_filter_error(msg, len, DNS_RCODE_REFUSED, 0, "deny", "rate-limited",
					     out, outlen, &res);
		if (v == RATE_REFUSE) {
			count(srv, &res);
		} else {
			n = 0;
			srv->ops->count(srv->ctx, "dropped", "deny", "rate-limited");
		}
		if (rep.due) {
			audit_dns(srv, sb, src, sport, &res);
			log_warn("dns: sandbox `%s` is over %u queries/s "
				 "(burst %u): %llu refused, %llu dropped "
				 "unanswered since last report",
				 sb->name, DNS_RATE_QPS, DNS_RATE_BURST,
				 (unsigned long long)rep.refused, (unsigned long long)rep.dropped);
		}
	} else if (truncated) {
		n = dns_filter_error(msg, len, DNS_RCODE_FORMERR, 0, "deny", "formerr", out, outlen,
				     &res);
		audit_dns(srv, sb, src, sport, &res);
		count(srv, &res);
	} else {
		/* Audit mode first: there nothing is held (it goes on). */
		enum dns_unlisted un = sb->audit		   ? DNS_UNLISTED_AUDIT
				       : policy_unlisted_hold(pol) ? DNS_UNLISTED_HOLD
								   : DNS_UNLISTED_REFUSE;

		n = dns_filter_answer_unlisted(pol, sb->synth, un, msg, len, udp, out, outlen,
					       &res);
		audit_dns(srv, sb, src, sport, &res);
		count(srv, &res);
	}
	srv->ops->put(srv->ctx, &cl);
	return n;
}

/* --- UDP ------------------------------------------------------------------ */

static struct in_pktinfo *pktinfo_of(struct msghdr *mh)
{
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO &&
		    c->cmsg_len >= CMSG_LEN(sizeof(struct in_pktinfo)))
			return (struct in_pktinfo *)(void *)CMSG_DATA(c);
	}
	return NULL;
}

static void udp_send(struct dns_server *srv, unsigned n_out)
{
	unsigned i = 0;

	while (i < n_out) {
		int r = sendmmsg(srv->udp_ev.fd, &srv->smsg[i], n_out - i, MSG_DONTWAIT);

		if (r <= 0) {
			/* The reply that failed (full socket buffer, a source
			 * we cannot answer from) is dropped; the client
			 * retries. Go on with the next one. */
			if (srv->send_failed++ % 1000 == 0)
				log_warn("dns: worker %u: UDP reply not sent: "
					 "%s (%llu so far)",
					 srv->id, strerror(errno),
					 (unsigned long long)srv->send_failed);
			i++;
			continue;
		}
		i += (unsigned)r;
	}
}

/* Points the receive headers at their buffers again (recvmmsg changes them). */
static void udp_arm_receive(struct dns_server *srv)
{
	for (int k = 0; k < UDP_BATCH; k++) {
		srv->riov[k] = (struct iovec){ srv->rbuf[k], UDP_BUF };
		srv->rmsg[k].msg_hdr = (struct msghdr){
			.msg_name = &srv->from[k],
			.msg_namelen = sizeof(srv->from[k]),
			.msg_iov = &srv->riov[k],
			.msg_iovlen = 1,
			.msg_control = srv->rctl[k].buf,
			.msg_controllen = sizeof(srv->rctl[k].buf),
		};
	}
}

/*
 * Queues reply @o (its @len bytes in srv->sbuf[o]) to the sender of
 * datagram @k, from the address that datagram was sent to: conntrack maps
 * that back to where the sandbox sent its query (its :53).
 */
static void udp_queue_reply(struct dns_server *srv, int k, unsigned o, size_t len)
{
	struct in_pktinfo *pi = pktinfo_of(&srv->rmsg[k].msg_hdr), *src;
	struct msghdr *sh = &srv->smsg[o].msg_hdr;
	struct cmsghdr *c;

	srv->siov[o] = (struct iovec){ srv->sbuf[o], len };
	*sh = (struct msghdr){
		.msg_name = &srv->from[k],
		.msg_namelen = sizeof(srv->from[k]),
		.msg_iov = &srv->siov[o],
		.msg_iovlen = 1,
	};
	if (!pi)
		return;
	memset(&srv->sctl[o], 0, sizeof(srv->sctl[o]));
	sh->msg_control = srv->sctl[o].buf;
	sh->msg_controllen = sizeof(srv->sctl[o].buf);
	c = CMSG_FIRSTHDR(sh);
	c->cmsg_level = IPPROTO_IP;
	c->cmsg_type = IP_PKTINFO;
	c->cmsg_len = CMSG_LEN(sizeof(*src));
	src = (struct in_pktinfo *)(void *)CMSG_DATA(c);
	src->ipi_spec_dst = pi->ipi_addr;
}

static void on_udp(struct ev *ev, uint32_t events)
{
	struct dns_server *srv = container_of(ev, struct dns_server, udp_ev);
	int round, k, n;

	(void)events;
	for (round = 0; round < UDP_ROUNDS; round++) {
		unsigned n_out = 0;

		udp_arm_receive(srv);
		n = recvmmsg(ev->fd, srv->rmsg, UDP_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			return;
		for (k = 0; k < n; k++) {
			const struct msghdr *rh = &srv->rmsg[k].msg_hdr;
			size_t len = srv->rmsg[k].msg_len;
			struct sl_addr src;
			uint16_t sport;
			int r;

			if (rh->msg_namelen < sizeof(struct sockaddr_in) ||
			    addr_from_sockaddr((struct sockaddr *)&srv->from[k], &src, &sport) < 0)
				continue;
			if (len > UDP_BUF)
				len = UDP_BUF;
			r = answer(srv, &src, sport, srv->rbuf[k], len, true,
				   (rh->msg_flags & MSG_TRUNC) != 0, srv->sbuf[n_out], REPLY_MAX);
			if (r > 0)
				udp_queue_reply(srv, k, n_out++, (size_t)r);
		}
		if (n_out)
			udp_send(srv, n_out);
		if (n < UDP_BATCH)
			return;
	}
}

/* --- TCP ------------------------------------------------------------------ */

/* Gives back what tcp_take_slot() took. */
static void tcp_put_slot(struct dns_tcp *c)
{
	if (c->sb.handle) {
		atomic_fetch_sub(&c->sb.state->tcp, 1);
		c->srv->ops->put(c->srv->ctx, &c->sb);
		c->sb.handle = NULL;
	}
}

static void tcp_free(struct dns_tcp *c)
{
	struct dns_server *srv = c->srv;

	loop_timer_cancel(srv->loop, &c->timer);
	loop_del(srv->loop, &c->ev);
	close(c->ev.fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	srv->n_conns--;
	tcp_put_slot(c);
	free(c);
}

static void tcp_on_timer(struct timer *t)
{
	tcp_free(container_of(t, struct dns_tcp, timer));
}

/* Answers every whole message in the input while the output has room. */
static int tcp_process(struct dns_tcp *c)
{
	size_t pos = 0;
	bool any = false;

	for (;;) {
		ssize_t fl = dns_tcp_frame_len(c->in + pos, c->in_len - pos);
		uint8_t *o;
		int n;

		if (fl < 0)
			return -EBADMSG;
		if (fl == 0)
			break;
		if (c->out_len > c->out_pos && c->out_pos > 0) {
			memmove(c->out, c->out + c->out_pos, c->out_len - c->out_pos);
			c->out_len -= c->out_pos;
			c->out_pos = 0;
		} else if (c->out_len == c->out_pos) {
			c->out_len = c->out_pos = 0;
		}
		if (sizeof(c->out) - c->out_len < 2 + REPLY_MAX)
			break; /* wait for the client to read */
		o = c->out + c->out_len;
		n = answer(c->srv, &c->peer, c->pport, c->in + pos + 2, (size_t)fl, false, false,
			   o + 2, REPLY_MAX);
		if (n > 0) {
			o[0] = (uint8_t)(n >> 8);
			o[1] = (uint8_t)n;
			c->out_len += 2 + (size_t)n;
		}
		pos += 2 + (size_t)fl;
		any = true;
	}
	if (pos) {
		memmove(c->in, c->in + pos, c->in_len - pos);
		c->in_len -= pos;
	}
	if (any)
		loop_timer_arm(c->srv->loop, &c->timer, DNS_TCP_IDLE_MS);
	/* A full buffer without a whole message: it can never be one. */
	if (c->in_len == sizeof(c->in) && dns_tcp_frame_len(c->in, c->in_len) == 0)
		return -EMSGSIZE;
	return 0;
}

static void on_tcp(struct ev *ev, uint32_t events)
{
	struct dns_tcp *c = container_of(ev, struct dns_tcp, ev);
	uint32_t want;

	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		while (!c->eof && c->in_len < sizeof(c->in)) {
			ssize_t r = recv(ev->fd, c->in + c->in_len, sizeof(c->in) - c->in_len,
					 MSG_DONTWAIT);

			if (r > 0) {
				c->in_len += (size_t)r;
			} else if (r == 0) {
				c->eof = true;
			} else if (errno == EAGAIN || errno == EINTR) {
				break;
			} else {
				tcp_free(c);
				return;
			}
		}
	}
	if (tcp_process(c) < 0) {
		tcp_free(c);
		return;
	}
	while (c->out_pos < c->out_len) {
		ssize_t r = send(ev->fd, c->out + c->out_pos, c->out_len - c->out_pos,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (r > 0) {
			c->out_pos += (size_t)r;
			continue;
		}
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		tcp_free(c);
		return;
	}
	if (c->out_pos == c->out_len)
		c->out_pos = c->out_len = 0;
	/* Room again after a write: answer what was waiting for it. */
	if (c->in_len && tcp_process(c) < 0) {
		tcp_free(c);
		return;
	}
	if (c->eof && c->out_pos == c->out_len && dns_tcp_frame_len(c->in, c->in_len) <= 0) {
		/* The client is done and has every answer. */
		tcp_free(c);
		return;
	}
	want = 0;
	if (!c->eof && c->in_len < sizeof(c->in))
		want |= EPOLLIN;
	if (c->out_pos < c->out_len)
		want |= EPOLLOUT;
	if (want != c->mask) {
		loop_mod(c->srv->loop, &c->ev, want);
		c->mask = want;
	}
}

/*
 * A connection from a sandbox takes one of its DNS_TCP_PER_SANDBOX (and a
 * reference on it, in c->sb, until tcp_free()); one from an unknown source
 * takes none, its queries are refused anyway. Return: -1 when the sandbox
 * has them all (the connection is closed unanswered; logged at most once a
 * second per worker).
 */
static int tcp_take_slot(struct dns_server *srv, struct dns_tcp *c)
{
	struct dns_client cl, *sb = &cl;
	uint64_t now;

	if (srv->ops->lookup(srv->ctx, &c->peer, &cl) < 0)
		return 0;
	/* Each query looks its sandbox's policy up again: keep none. */
	policy_unref(cl.policy);
	cl.policy = NULL;
	if (atomic_fetch_add(&cl.state->tcp, 1) < DNS_TCP_PER_SANDBOX) {
		c->sb = cl;
		return 0;
	}
	atomic_fetch_sub(&cl.state->tcp, 1);
	now = loop_now_ms(srv->loop);
	if (now - srv->tcp_sb_full_log_ms >= REPORT_MS) {
		log_warn("dns: sandbox `%s` has %d TCP DNS connections open, refusing more",
			 sb->name, DNS_TCP_PER_SANDBOX);
		srv->tcp_sb_full_log_ms = now;
	}
	srv->ops->put(srv->ctx, &cl);
	return -1;
}

static void on_tcp_retry(struct timer *t)
{
	struct dns_server *srv = container_of(t, struct dns_server, tcp_retry);

	loop_mod(srv->loop, &srv->tcp_ev, EPOLLIN);
}

/* accept() found no descriptor: the listener would wake the loop again at
 * once, so it rests TCP_RETRY_MS (the client waits in the backlog; UDP
 * goes on), and the log says so once per TCP_FD_LOG_MS, with a count. */
static void tcp_accept_rest(struct dns_server *srv, int err)
{
	struct loop *l = srv->loop;
	uint64_t held;

	loop_mod(l, &srv->tcp_ev, 0);
	if (!loop_timer_armed(&srv->tcp_retry))
		loop_timer_arm(l, &srv->tcp_retry, TCP_RETRY_MS);
	if (log_every_ok(&srv->tcp_fd_log, loop_now_ms(l), TCP_FD_LOG_MS, &held))
		log_warn("dns: worker %u: cannot accept TCP: %s; retried every %d ms (%llu more "
			 "times since the last line)",
			 srv->id, strerror(err), TCP_RETRY_MS, (unsigned long long)held);
}

static void on_tcp_accept(struct ev *ev, uint32_t events)
{
	struct dns_server *srv = container_of(ev, struct dns_server, tcp_ev);
	int i, one = 1;

	(void)events;
	for (i = 0; i < TCP_ACCEPT_ROUNDS; i++) {
		struct sockaddr_storage peer;
		socklen_t pl = sizeof(peer);
		struct dns_tcp *c;
		int fd = accept4(ev->fd, (struct sockaddr *)&peer, &pl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM)
				tcp_accept_rest(srv, errno);
			return;
		}
		if (srv->n_conns >= DNS_TCP_MAX_CONNS) {
			uint64_t now = loop_now_ms(srv->loop);

			/* Closed unanswered: the client falls back or retries.
			 */
			if (now - srv->tcp_full_log_ms >= REPORT_MS) {
				log_warn("dns: worker %u: %u TCP DNS "
					 "connections open, refusing more",
					 srv->id, DNS_TCP_MAX_CONNS);
				srv->tcp_full_log_ms = now;
			}
			close(fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->srv = srv;
		c->ev.fd = fd;
		c->ev.cb = on_tcp;
		c->timer.cb = tcp_on_timer;
		addr_from_sockaddr((struct sockaddr *)&peer, &c->peer, &c->pport);
		if (tcp_take_slot(srv, c) < 0) {
			close(fd);
			free(c);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->mask = EPOLLIN;
		if (loop_add(srv->loop, &c->ev, EPOLLIN) < 0 ||
		    loop_timer_arm(srv->loop, &c->timer, DNS_TCP_IDLE_MS) < 0) {
			loop_del(srv->loop, &c->ev);
			close(fd);
			tcp_put_slot(c);
			free(c);
			continue;
		}
		c->next = srv->conns;
		if (srv->conns)
			srv->conns->prev = c;
		srv->conns = c;
		srv->n_conns++;
	}
}

/* --- sockets -------------------------------------------------------------- */

static int open_socket(int type, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd, one = 1;

	fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
	    (type == SOCK_DGRAM && setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one)) < 0) ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 256) < 0)) {
		int e = -errno;

		close(fd);
		return e;
	}
	if (type == SOCK_DGRAM) {
		int rcv = UDP_RCVBUF;

		/* FORCE works at start-up (root) past net.core.rmem_max;
		 * otherwise take what rmem_max allows. Either way a smaller
		 * buffer only means more drops under a burst. */
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) < 0)
			(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	}
	return fd;
}

int dns_server_start(struct loop *l, unsigned id, uint16_t port, const struct dns_server_ops *ops,
		     void *ctx, struct dns_server **out)
{
	struct dns_server *srv;
	int r;

	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->loop = l;
	srv->id = id;
	srv->ops = ops;
	srv->ctx = ctx;
	srv->udp_ev.fd = srv->tcp_ev.fd = -1;
	r = open_socket(SOCK_DGRAM, port);
	if (r < 0)
		goto fail;
	srv->udp_ev.fd = r;
	srv->udp_ev.cb = on_udp;
	r = open_socket(SOCK_STREAM, port);
	if (r < 0)
		goto fail;
	srv->tcp_ev.fd = r;
	srv->tcp_ev.cb = on_tcp_accept;
	srv->tcp_retry.cb = on_tcp_retry;
	r = loop_add(l, &srv->udp_ev, EPOLLIN);
	if (r < 0)
		goto fail;
	r = loop_add(l, &srv->tcp_ev, EPOLLIN);
	if (r < 0) {
		loop_del(l, &srv->udp_ev);
		goto fail;
	}
	*out = srv;
	return 0;
fail:
	if (srv->udp_ev.fd >= 0)
		close(srv->udp_ev.fd);
	if (srv->tcp_ev.fd >= 0)
		close(srv->tcp_ev.fd);
	free(srv);
	return r;
}

void dns_server_stop(struct dns_server *srv)
{
	struct dns_tcp *c, *next;

	if (!srv)
		return;
	for (c = srv->conns; c; c = next) {
		next = c->next;
		tcp_free(c);
	}
	loop_del(srv->loop, &srv->udp_ev);
	close(srv->udp_ev.fd);
	loop_del(srv->loop, &srv->tcp_ev);
	close(srv->tcp_ev.fd);
	loop_timer_cancel(srv->loop, &srv->tcp_retry);
	free(srv);
}
