// SPDX-License-Identifier: MIT
/* Held requests (`egress.unlisted: hold`): a name outside the list waits.
 *
 * Theory of operation: when the decision on a name is not-allowlisted and
 * the policy says `unlisted: hold`, the connection is not refused: it enters
 * CS_HOLD, where nothing is read from the client, nothing is resolved and
 * nothing is sent upstream, and its deadline is the policy's hold_timeout
 * (then it is refused, hold-timeout). The request it carries stays in c->in
 * (a CONNECT's head is put back), so that an answer can decide it again from
 * the start on the policy then in force.
 *
 * Each sandbox has one table of what waits (struct hold_table, shared by
 * every worker under its mutex): one entry per name and port, with the
 * connections held for it. Both are bounded (HOLD_NAMES_MAX, HOLD_CONNS_MAX):
 * a sandbox over either is refused at once (hold-full). A connection leaves
 * the table when it is answered, times out, or is freed for any other
 * reason (the client left, the sandbox was deleted): conn_free() calls
 * proxy_hold_leave(), so no entry outlives its connections.
 *
 * The workers own the connections: an answer (approve, refuse) reaches them
 * as a post (proxy_hold_answer_post()), each worker acting on its own held
 * connections. A change of the sandbox's policy (update, reload, an
 * approval) reaches them as proxy_policy_changed_post(): what the new policy
 * allows or refuses is decided again at once, as on approve; what it still
 * holds waits on (proxy_hold_policy_changed()).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "broker/proxy/proxy_internal.h"
#include "broker/broker_internal.h"
#include "common/log.h"
#include "policy/policy.h"

struct hold_entry {
	char host[256];
	uint16_t port;
	char method[16];
	char path[256];
	uint64_t first_ms; /* CLOCK_REALTIME, when it was first held */
	uint32_t count;	   /* connections held for it since first held */
	uint32_t held;	   /* connections waiting now; 0 frees the entry */
};

struct hold_table {
	pthread_mutex_t lock;
	struct hold_entry e[HOLD_NAMES_MAX];
	size_t n;
	unsigned held; /* connections waiting, all names */
};

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The sandbox's table, made on first use; NULL when out of memory. Workers
 * race to make it: the loser frees its own. */
static struct hold_table *table_of(struct sandbox *sb)
{
	struct hold_table *t = atomic_load(&sb->holds), *expect = NULL;

	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	if (!atomic_compare_exchange_strong(&sb->holds, &expect, t)) {
		pthread_mutex_destroy(&t->lock);
		free(t);
		t = expect;
	}
	return t;
}

void proxy_hold_table_free(struct hold_table *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static struct hold_entry *find(struct hold_table *t, const char *host, uint16_t port)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (t->e[i].port == port && proxy_host_same(t->e[i].host, host))
			return &t->e[i];
	return NULL;
}

/* Enters @c in its sandbox's table. Return: 0, -ENOSPC over a cap, -ENOMEM. */
static int hold_enter(struct conn *c)
{
	struct hold_table *t = table_of(c->sb);
	struct hold_entry *e;
	uint32_t count = 0;
	int r = 0;

	if (!t)
		return -ENOMEM;
	pthread_mutex_lock(&t->lock);
	e = find(t, c->host, c->port);
	if (t->held >= HOLD_CONNS_MAX || (!e && t->n >= HOLD_NAMES_MAX)) {
		r = -ENOSPC;
		goto out;
	}
	if (!e) {
		e = &t->e[t->n++];
		memset(e, 0, sizeof(*e));
		snprintf(e->host, sizeof(e->host), "%s", c->host);
		e->port = c->port;
		e->first_ms = wall_ms();
	}
	/* The method and path of the latest request (a CONNECT has no path). */
	snprintf(e->method, sizeof(e->method), "%s", c->method);
	snprintf(e->path, sizeof(e->path), "%s", c->path);
	count = ++e->count;
	e->held++;
	t->held++;
	c->held = true;
out:
	pthread_mutex_unlock(&t->lock);
	if (r == 0)
		watch_pending(c->sb->name, c->host, c->port, c->method, c->path, count);
	return r;
}

void proxy_hold_leave(struct conn *c)
{
	struct hold_table *t;
	struct hold_entry *e;

	if (!c->held)
		return;
	c->held = false;
	t = atomic_load(&c->sb->holds);
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	e = find(t, c->host, c->port);
	if (e) {
		t->held--;
		if (--e->held == 0)
			*e = t->e[--t->n]; /* order does not matter */
	}
	pthread_mutex_unlock(&t->lock);
}

/* A request whose target can be decided again from what is kept: an
 * explicit-proxy head (HTTP Host, CONNECT authority), or a transparent
 * connection to a synthetic address (the DNS filter answered its name
 * because of `unlisted: hold`), whose first bytes (an HTTP head in c->in, a
 * ClientHello or nothing still in its socket) are read again. Never a
 * literal destination, nor a request inside a tunnel or intercepted TLS,
 * which are bound to a host that was allowed. */
static bool hold_wanted_on(const struct conn *c, const struct policy *pol,
			   const struct proxy_verdict *v)
{
	return v->reason == SL_REASON_NOT_ALLOWLISTED && !c->literal && c->host[0] &&
	       (!c->transparent || c->orig_synthetic) && !c->inner && !c->cssl &&
	       policy_unlisted_hold(pol);
}

bool proxy_hold_wanted(const struct conn *c, const struct proxy_verdict *v)
{
	return hold_wanted_on(c, c->pol, v);
}

enum step proxy_hold(struct conn *c)
{
	int r = hold_enter(c);

	if (r == -ENOMEM)
		return proxy_conn_end(c, PROXY_ERROR, SL_REASON_OUT_OF_MEMORY);
	if (r < 0)
		return proxy_deny(c, SL_REASON_HOLD_FULL);
	/* Put a CONNECT's head back: an answer decides the request again from
	 * its head, on the policy in force then. Nothing read it since. A
	 * transparent connection's first bytes were only peeked at: they are
	 * still in its socket. */
	if (c->is_connect && !c->transparent)
		c->in->pos -= (size_t)c->head_len;
	proxy_close_upstream(c); /* a kept-alive one, to another host */
	c->st = CS_HOLD;
	loop_timer_arm(c->w->loop, &c->timer, policy_hold_timeout(c->pol) * 1000);
	/* Only a hang-up is waited for: bytes the client sends meanwhile stay
	 * in its socket until the request is answered. */
	proxy_want(c, EPOLLRDHUP, 0);
	log_info("proxy: %s: holding %s:%u (unlisted: hold)", c->sb->name, c->host, c->port);
	return STEP_AGAIN;
}

/* Approved: decide the request again from its head, on the new policy. */
static void resume(struct conn *c)
{
	proxy_hold_leave(c);
	proxy_parsed_free(c->parsed);
	c->parsed = NULL;
	proxy_refresh_policy(c);
	if (c->transparent && c->is_connect) {
		/* Held as a tunnel (TLS, other bytes, silence): sniffed again
		 * from the start, as if just accepted. The ClientHello was
		 * peeked, never read, so the upstream or the interception
		 * gets it whole, as without the hold. */
		proxy_transparent_restart(c);
		return;
	}
	c->st = CS_HEAD;
	loop_timer_arm(c->w->loop, &c->timer, c->w->limits->head_timeout_ms);
}

/*
 * proxy_hold_policy_changed() - held @c meets its sandbox's new policy @np
 *
 * A name @np still leaves unlisted under `unlisted: hold` keeps waiting,
 * its deadline unchanged (a policy change is no answer). Anything else is
 * decided again from the start on @np, as an approval decides it (resume()):
 * allowed, it goes on; refused, it gets the reason @np gives (an explicit
 * deny, or not-allowlisted where @np no longer holds), not hold-timeout
 * later. --keep-open does not keep it waiting: nothing of it was let
 * through, so nothing is withdrawn. May free @c.
 */
void proxy_hold_policy_changed(struct conn *c, const struct policy *np)
{
	struct proxy_target t = proxy_target_of(c, np);
	struct proxy_verdict v;

	proxy_check_target(np, &t, &v);
	if (v.decision != PROXY_ALLOW && v.decision != PROXY_WOULD_DENY &&
	    hold_wanted_on(c, np, &v))
		return;
	log_info("proxy: %s: %s:%u was held: decided again on the new policy", c->sb->name, c->host,
		 c->port);
	resume(c);
	proxy_conn_run(c); /* frees it if it ended */
}

/*
 * The listing of `sluice pending`: one line per name and port @sb waits
 * for, "SANDBOX HOST PORT METHOD PATH FIRST_MS COUNT HELD" ("-" for a
 * method or path not seen: a CONNECT's), appended at *@o in @out.
 * Return: 0, or -ENOSPC when @out is full.
 */
int proxy_hold_list(const struct sandbox *sb, char *out, size_t len, size_t *o)
{
	struct hold_table *t = atomic_load((_Atomic(struct hold_table *) *)&sb->holds);
	size_t i;
	int r = 0, k;

	if (!t)
		return 0;
	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->n && r == 0; i++) {
		const struct hold_entry *e = &t->e[i];

		k = snprintf(out + *o, len - *o, "%s %s %u %s %s %llu %u %u\n", sb->name, e->host,
			     e->port, e->method[0] ? e->method : "-", e->path[0] ? e->path : "-",
			     (unsigned long long)e->first_ms, e->count, e->held);
		if (k < 0 || (size_t)k >= len - *o)
			r = -ENOSPC;
		else
			*o += (size_t)k;
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

/* Is anything of @sb waiting for @host (on @port; 0: any)? */
bool proxy_hold_pending(struct sandbox *sb, const char *host, uint16_t port)
{
	struct hold_table *t = atomic_load(&sb->holds);
	bool found = false;
	size_t i;

	if (!t)
		return false;
	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->n && !found; i++)
		found = (!port || t->e[i].port == port) && proxy_host_same(t->e[i].host, host);
	pthread_mutex_unlock(&t->lock);
	return found;
}

/* An answer for every worker: each acts on its own held connections, the
 * last one frees it. */
struct hold_answer {
	atomic_uint refs;
	struct sandbox *sb; /* a reference */
	char host[256];
	uint16_t port;
	bool approve;
	enum sl_reason reason; /* of a refusal */
	int status;
};

static void answer_put(struct hold_answer *a)
{
	if (atomic_fetch_sub(&a->refs, 1) == 1) {
		sandbox_put(a->sb);
		free(a);
	}
}

static void answer_post(void *arg)
{
	struct hold_answer *a = arg;
	struct worker *w = proxy_cur_worker();
	struct conn *c, *next;

	for (c = w ? w->conns : NULL; c; c = next) {
		next = c->next;
		if (c->st != CS_HOLD || c->sb != a->sb || (a->port && c->port != a->port) ||
		    !proxy_host_same(c->host, a->host))
			continue;
		if (a->approve) {
			resume(c);
		} else {
			proxy_hold_leave(c);
			proxy_reply(c, a->status, PROXY_DENY, a->reason);
		}
		proxy_conn_run(c); /* frees it if it ended */
	}
	answer_put(a);
}

int proxy_hold_answer_all(struct broker *b, struct sandbox *sb, const char *host, uint16_t port,
			  bool approve, enum sl_reason reason, int status)
{
	struct hold_answer *a = calloc(1, sizeof(*a));
	unsigned i;

	if (!a)
		return -ENOMEM;
	atomic_init(&a->refs, 1);
	atomic_fetch_add(&sb->refs, 1);
	a->sb = sb;
	snprintf(a->host, sizeof(a->host), "%s", host);
	a->port = port;
	a->approve = approve;
	a->reason = reason;
	a->status = status;
	for (i = 0; i < b->n_workers; i++) {
		atomic_fetch_add(&a->refs, 1);
		/* Never the last reference: this function holds one until
		 * its end. */
		if (loop_post(b->workers[i].loop, answer_post, a) < 0)
			atomic_fetch_sub(&a->refs, 1);
	}
	answer_put(a);
	return 0;
}

/*
 * The address guard's word on an approval, before it is made: @chk->host
 * is resolved by a worker's resolver (as a connection's would be) and each
 * answer judged as a connection to it would be. Then @chk->done runs on
 * @chk->back (the control loop).
 */
static void check_resolved(struct resolve_req *req, int status, const struct sl_addr *addrs,
			   size_t n, void *arg)
{
	struct hold_check *chk = arg;
	struct proxy_verdict v;
	size_t i;

	(void)req;
	chk->status = status;
	chk->allowed = 0;
	chk->denied = 0;
	for (i = 0; status >= 0 && i < n; i++) {
		uint16_t port = chk->port ? chk->port : 443;

		if (proxy_check_address(chk->pol, &addrs[i], port, GUARD_FROM_NAME,
					broker_is_local(chk->b, &addrs[i], port),
					&v) == PROXY_ALLOW) {
			chk->allowed++;
		} else {
			if (!chk->denied)
				addr_format(&addrs[i], chk->first_denied,
					    sizeof(chk->first_denied));
			chk->denied++;
		}
	}
	if (loop_post(chk->back, chk->done, chk) < 0)
		chk->done(chk); /* the control loop is gone: nothing answers */
}

static void check_post(void *arg)
{
	struct hold_check *chk = arg;
	struct worker *w = proxy_cur_worker();

	if (!w || resolver_lookup(w->resolver, chk->host, &chk->rr, check_resolved, chk) < 0)
		check_resolved(&chk->rr, -ENOMEM, NULL, 0, chk);
}

int proxy_hold_check(struct broker *b, struct hold_check *chk)
{
	chk->b = b;
	return loop_post(b->workers[0].loop, check_post, chk);
}
