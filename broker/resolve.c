// SPDX-License-Identifier: MIT
/* Asynchronous upstream DNS resolution (c-ares) on a loop, with an LRU cache.
 *
 * Theory of operation
 *
 * One resolver per worker loop, one c-ares channel per resolver; nothing is
 * shared between threads. c-ares tells us which sockets to watch through
 * its sock_state_cb (each becomes a struct ev on the loop) and when its
 * next retry is due through ares_timeout() (one loop timer, re-armed after
 * every call into c-ares).
 *
 * Names live in entries, found through a hash table keyed by the lowercased
 * name (SipHash with a per-resolver random key: sandboxes choose names under
 * wildcard rules, so they must not be able to choose hash collisions). An
 * entry is either pending (an upstream query runs; lookups of the same name
 * join its waiter list) or done (an answer, kept on an LRU list until its
 * TTL runs out or it is evicted to stay within cache_max_entries).
 *
 * Entries are reference-counted: the table holds one reference, a running
 * c-ares query one, and each request waiting for or about to receive the
 * entry's answer one. Eviction therefore only unlinks an entry; requests
 * still holding it get their answer from it. The cache holds at most
 * cache_max_entries answers; unlinked entries are bounded by the requests
 * and queries that hold them, and queries by RESOLVE_MAX_INFLIGHT.
 *
 * Answers are never given from within resolver_lookup(), nor from within
 * c-ares: finished requests go on a ready list and a zero-delay timer hands
 * them out on the next iteration, outside any c-ares call. So a callback may
 * start lookups, cancel others, or close its connection freely.
 *
 * Each query also has a deadline timer (resolver_set_deadline(): the
 * broker's resolve_timeout, by default RESOLVE_DEADLINE_MS): whatever the
 * number of servers and retries, waiters hear -ETIMEDOUT by then; the
 * c-ares query is left to finish on its own and its late answer dropped.
 */
#include <ares.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "common/loop.h"
#include "broker/metrics.h"
#include "broker/resolve.h"
#include "common/addr.h"
#include "common/err.h"
#include "common/log.h"
#include "common/siphash.h"

#define NAME_MAX_LEN 253
#define LABEL_MAX_LEN 63
#define BUCKETS_MIN 64u
#define BUCKETS_MAX (1u << 20)
/* "Never": keeps a timer in the heap so re-arming it cannot fail. */
#define FAR_FUTURE_MS (UINT64_MAX / 4)

enum req_state { REQ_IDLE = 0, REQ_WAITING, REQ_READY };

struct req_list {
	struct resolve_req *head;
	struct resolve_req *tail;
};

struct resolve_entry {
	struct resolve_entry *hnext;
	struct resolve_entry *lru_prev; /* towards most recently used */
	struct resolve_entry *lru_next; /* towards least recently used */
	struct req_list waiters;
	struct resolver *r;
	struct timer deadline;
	uint64_t hash;
	uint64_t expires;
	unsigned int refs;
	bool in_table;
	bool in_lru;
	bool done;
	int status;
	unsigned int n;
	struct sl_addr addrs[RESOLVE_MAX_ADDRS];
	size_t namelen;
	char name[];
};

struct rsock {
	struct ev ev;
	struct resolver *r;
	struct rsock *next;
};

struct resolver {
	struct loop *loop;
	ares_channel ch;
	bool have_ch;
	struct timer ares_timer;
	struct timer deliver_timer;
	struct rsock *socks;

	struct resolve_entry **buckets;
	size_t nbuckets; /* power of two */
	struct resolve_entry *lru_head;
	struct resolve_entry *lru_tail;
	size_t cache_max;
	uint32_t deadline_ms; /* resolver_set_deadline() */

	struct req_list ready;
	uint64_t round;
	bool deliver_due;

	uint64_t key[2];
	struct resolver_stats st;
};

/* --- request lists -------------------------------------------------------- */

static void rl_append(struct req_list *l, struct resolve_req *req)
{
	req->next = NULL;
	req->prev = l->tail;
	if (l->tail)
		l->tail->next = req;
	else
		l->head = req;
	l->tail = req;
}

static void rl_remove(struct req_list *l, struct resolve_req *req)
{
	if (req->prev)
		req->prev->next = req->next;
	else
		l->head = req->next;
	if (req->next)
		req->next->prev = req->prev;
	else
		l->tail = req->prev;
	req->next = req->prev = NULL;
}

/* Detaches @req from everything; the caller drops the entry reference. */
static void req_reset(struct resolve_req *req)
{
	req->entry = NULL;
	req->cb = NULL;
	req->arg = NULL;
	req->state = REQ_IDLE;
}

/* --- entries, table, LRU -------------------------------------------------- */

/* Accepts NULL, as free functions do. */
static void entry_put(struct resolve_entry *e)
{
	if (!e || --e->refs)
		return;
	loop_timer_cancel(e->r->loop, &e->deadline);
	free(e);
}

static void lru_unlink(struct resolver *r, struct resolve_entry *e)
{
	if (e->lru_prev)
		e->lru_prev->lru_next = e->lru_next;
	else
		r->lru_head = e->lru_next;
	if (e->lru_next)
		e->lru_next->lru_prev = e->lru_prev;
	else
		r->lru_tail = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
}

static void lru_push_front(struct resolver *r, struct resolve_entry *e)
{
	e->lru_prev = NULL;
	e->lru_next = r->lru_head;
	if (r->lru_head)
		r->lru_head->lru_prev = e;
	else
		r->lru_tail = e;
	r->lru_head = e;
}

static struct resolve_entry **bucket_of(struct resolver *r, uint64_t hash)
{
	return &r->buckets[hash & (r->nbuckets - 1)];
}

static struct resolve_entry *table_find(struct resolver *r, const char *name, size_t len,
					uint64_t hash)
{
	struct resolve_entry *e;

	for (e = *bucket_of(r, hash); e; e = e->hnext)
		if (e->hash == hash && e->namelen == len && !memcmp(e->name, name, len))
			return e;
	return NULL;
}

/* Unlinks @e from the table (and LRU) and drops the table's reference. */
static void table_remove(struct resolver *r, struct resolve_entry *e)
{
	struct resolve_entry **pp;

	for (pp = bucket_of(r, e->hash); *pp; pp = &(*pp)->hnext) {
		if (*pp == e) {
			*pp = e->hnext;
			break;
		}
	}
	e->hnext = NULL;
	if (e->in_lru) {
		lru_unlink(r, e);
		e->in_lru = false;
		r->st.entries--;
	}
	e->in_table = false;
	entry_put(e);
}

/* --- delivery ------------------------------------------------------------- */

static void make_ready(struct resolver *r, struct resolve_req *req)
{
	req->state = REQ_READY;
	req->round = r->round;
	rl_append(&r->ready, req);
	/* deliver_timer is always in the heap: this moves it, cannot fail. */
	if (!r->deliver_due) {
		r->deliver_due = true;
		loop_timer_arm(r->loop, &r->deliver_timer, 0);
	}
}

static void deliver_cb(struct timer *t)
{
	struct resolver *r = container_of(t, struct resolver, deliver_timer);
	struct resolve_req *req;
	uint64_t limit;

	/* Take our heap slot back first, while it is certainly free. */
	loop_timer_arm(r->loop, t, FAR_FUTURE_MS);
	r->deliver_due = false;

	/* Only requests readied before this pass: a callback that looks up a
	 * cached name again gets its answer on the next iteration. */
	limit = ++r->round;
	while ((req = r->ready.head) && req->round < limit) {
		struct resolve_entry *e = req->entry;
		resolve_cb *cb = req->cb;
		void *arg = req->arg;

		rl_remove(&r->ready, req);
		req_reset(req);
		cb(req, e->status, e->n ? e->addrs : NULL, e->n, arg);
		entry_put(e);
	}
	/* Requests readied by the callbacks above re-armed the timer. */
}

/* Ends a query: answer (or failure) to every waiter, then cache or unlink. */
static void entry_complete(struct resolver *r, struct resolve_entry *e, int status, uint64_t ttl_ms)
{
	struct resolve_req *req;

	loop_timer_cancel(r->loop, &e->deadline);
	e->done = true;
	e->status = status;
	while ((req = e->waiters.head)) {
		rl_remove(&e->waiters, req);
		make_ready(r, req);
	}
	if (!e->in_table)
		return;
	if ((status == 0 || status == -ENOENT) && r->cache_max > 0) {
		e->expires = loop_now_ms(r->loop) + ttl_ms;
		lru_push_front(r, e);
		e->in_lru = true;
		r->st.entries++;
		while (r->st.entries > r->cache_max) {
			r->st.evictions++;
			table_remove(r, r->lru_tail);
		}
	} else {
		table_remove(r, e);
	}
}

static void deadline_cb(struct timer *t)
{
	struct resolve_entry *e = container_of(t, struct resolve_entry, deadline);

	entry_complete(e->r, e, -ETIMEDOUT, 0);
}

/* --- c-ares glue ---------------------------------------------------------- */

static void ares_rearm(struct resolver *r)
{
	struct timeval tv, *tvp;
	uint64_t ms;

	tvp = ares_timeout(r->ch, NULL, &tv);
	if (!tvp) {
		ms = FAR_FUTURE_MS;
	} else {
		/* Round up: firing early would only find nothing due. */
		ms = (uint64_t)tvp->tv_sec * 1000u + ((uint64_t)tvp->tv_usec + 999u) / 1000u;
	}
	loop_timer_arm(r->loop, &r->ares_timer, ms);
}

static void ares_timer_cb(struct timer *t)
{
	struct resolver *r = container_of(t, struct resolver, ares_timer);

	loop_timer_arm(r->loop, t, FAR_FUTURE_MS); /* keep the slot */
	ares_process_fd(r->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	ares_rearm(r);
}

static void rsock_cb(struct ev *ev, uint32_t events)
{
	struct rsock *s = container_of(ev, struct rsock, ev);
	struct resolver *r = s->r;
	ares_socket_t rfd = ARES_SOCKET_BAD, wfd = ARES_SOCKET_BAD;

	/* Errors and hang-ups surface through a read, where c-ares handles
	 * them (next server, or the query's error). */
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
		rfd = ev->fd;
	if (events & EPOLLOUT)
		wfd = ev->fd;
	/* May close this very socket (and free s) through sock_state_cb. */
	ares_process_fd(r->ch, rfd, wfd);
	ares_rearm(r);
}

static void sock_state_cb(void *data, ares_socket_t fd, int readable, int writable)
{
	struct resolver *r = data;
	struct rsock *s, **pp;
	uint32_t events = (readable ? EPOLLIN : 0) | (writable ? EPOLLOUT : 0);
	int err;

	for (pp = &r->socks; (s = *pp); pp = &s->next)
		if (s->ev.fd == fd)
			break;

	if (!events) {
		if (s) {
			loop_del(r->loop, &s->ev);
			*pp = s->next;
			free(s);
		}
		return;
	}
	if (s) {
		err = loop_mod(r->loop, &s->ev, events);
		if (err)
			log_err("resolve: watching DNS socket %d: %s", fd, strerror(-err));
		return;
	}
	/* On failure the query is not lost: the deadline still answers it. */
	s = calloc(1, sizeof(*s));
	if (!s) {
		log_err("resolve: no memory to watch a DNS socket");
		return;
	}
	s->ev.fd = fd;
	s->ev.cb = rsock_cb;
	s->r = r;
	err = loop_add(r->loop, &s->ev, events);
	if (err) {
		log_err("resolve: watching DNS socket %d: %s", fd, strerror(-err));
		free(s);
		return;
	}
	s->next = r->socks;
	r->socks = s;
}

static int status_from_ares(int status)
{
	switch (status) {
	case ARES_SUCCESS:
		return 0;
	case ARES_ENOTFOUND:
	case ARES_ENODATA:
	case ARES_ENONAME:
		return -ENOENT;
	case ARES_ETIMEOUT:
		return -ETIMEDOUT;
	case ARES_ENOMEM:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

static bool have_addr(const struct resolve_entry *e, const struct sl_addr *a)
{
	for (unsigned int i = 0; i < e->n; i++)
		if (!memcmp(&e->addrs[i], a, sizeof(*a)))
			return true;
	return false;
}

/* Copies up to RESOLVE_MAX_ADDRS distinct addresses, IPv4 first; returns
 * the smallest TTL in seconds among the answers. */
static int fill_addrs(struct resolve_entry *e, const struct ares_addrinfo *ai)
{
	const struct ares_addrinfo_node *nd;
	int ttl = -1;

	e->n = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (nd = ai->nodes; nd; nd = nd->ai_next) {
			struct sl_addr a;

			if (pass == 0 && (ttl < 0 || nd->ai_ttl < ttl))
				ttl = nd->ai_ttl;
			if (!nd->ai_addr || addr_from_sockaddr(nd->ai_addr, &a, NULL))
				continue;
			if (addr_is_v4(&a) != (pass == 0))
				continue;
			if (e->n < RESOLVE_MAX_ADDRS && !have_addr(e, &a))
				e->addrs[e->n++] = a;
		}
	}
	return ttl < 0 ? 0 : ttl;
}

static void ares_done(void *arg, int status, int timeouts, struct ares_addrinfo *ai)
{
	struct resolve_entry *e = arg;
	struct resolver *r = e->r;
	uint64_t ttl_ms = RESOLVE_NEG_TTL_MS;
	int st;

	(void)timeouts;
	r->st.in_flight--;
	/* Destruction (resolver_free), or the deadline already answered. */
	if (status == ARES_EDESTRUCTION || e->done)
		goto out;

	st = status_from_ares(status);
	if (st == 0 && ai) {
		uint64_t ttl = (uint64_t)fill_addrs(e, ai) * 1000u;

		if (e->n == 0)
			st = -ENOENT;
		ttl_ms = ttl < RESOLVE_TTL_MIN_MS   ? RESOLVE_TTL_MIN_MS
			 : ttl > RESOLVE_TTL_MAX_MS ? RESOLVE_TTL_MAX_MS
						    : ttl;
	} else if (st == 0) {
		st = -EIO;
	}
	if (st != 0)
		ttl_ms = RESOLVE_NEG_TTL_MS;
	entry_complete(r, e, st, ttl_ms);
out:
	if (ai)
		ares_freeaddrinfo(ai);
	entry_put(e);
}

/* --- names ---------------------------------------------------------------- */

/* Lowercases a host name into @out (NAME_MAX_LEN + 1 bytes), strictly. */
static int name_norm(const char *name, char *out, size_t *outlen)
{
	size_t len = strnlen(name, NAME_MAX_LEN + 2), label = 0;

	if (len > 0 && name[len - 1] == '.')
		len--;
	if (len == 0 || len > NAME_MAX_LEN)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c == '.') {
			if (label == 0)
				return -EINVAL;
			label = 0;
			out[i] = '.';
			continue;
		}
		if (c >= 'A' && c <= 'Z')
			c = c - 'A' + 'a';
		else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
			   c == '_'))
			return -EINVAL;
		if (++label > LABEL_MAX_LEN)
			return -EINVAL;
		out[i] = (char)c;
	}
	if (label == 0)
		return -EINVAL;
	out[len] = '\0';
	*outlen = len;
	return 0;
}

/* --- public API ----------------------------------------------------------- */

int resolver_lookup(struct resolver *r, const char *name, struct resolve_req *req, resolve_cb *cb,
		    void *arg)
{
	struct ares_addrinfo_hints hints = {
		.ai_family = AF_UNSPEC,
		/* We order the answer ourselves; c-ares' RFC 6724 sort would
	     * connect() a probe socket per address. */
		.ai_flags = ARES_AI_NOSORT,
	};
	char key[NAME_MAX_LEN + 1];
	struct resolve_entry *e;
	size_t len;
	uint64_t hash;
	int err;

	if (req->state != REQ_IDLE)
		return -EBUSY;
	err = name_norm(name, key, &len);
	if (err)
		return err;
	hash = siphash24(r->key[0], r->key[1], key, len);

	req->cb = cb;
	req->arg = arg;

	e = table_find(r, key, len, hash);
	if (e && e->done && e->expires <= loop_now_ms(r->loop)) {
		r->st.expired++;
		table_remove(r, e);
		e = NULL;
	}
	if (e && e->done) {
		r->st.hits++;
		metrics_dns_cache_hit();
		lru_unlink(r, e);
		lru_push_front(r, e);
		e->refs++;
		req->entry = e;
		make_ready(r, req);
		return 0;
	}
	if (e) {
		/* Answered without an upstream query of its own: a hit for the
		 * broker's counters, which count queries sent (misses) and
		 * lookups that sent none (hits). */
		r->st.coalesced++;
		metrics_dns_cache_hit();
		e->refs++;
		req->entry = e;
		req->state = REQ_WAITING;
		rl_append(&e->waiters, req);
		return 0;
	}

	if (r->st.in_flight >= RESOLVE_MAX_INFLIGHT) {
		req_reset(req);
		return -EAGAIN;
	}
	e = calloc(1, sizeof(*e) + len + 1);
	if (!e) {
		req_reset(req);
		return -ENOMEM;
	}
	e->r = r;
	e->hash = hash;
	e->namelen = len;
	memcpy(e->name, key, len + 1);
	e->deadline.cb = deadline_cb;
	err = loop_timer_arm(r->loop, &e->deadline, r->deadline_ms);
	if (err) {
		free(e);
		req_reset(req);
		return err;
	}
	e->hnext = *bucket_of(r, hash);
	*bucket_of(r, hash) = e;
	e->in_table = true;
	e->refs = 3; /* table, this request, the c-ares query */
	req->entry = e;
	req->state = REQ_WAITING;
	rl_append(&e->waiters, req);
	r->st.misses++;
	metrics_dns_cache_miss();
	r->st.in_flight++;

	/* May call ares_done() before returning (no memory, numeric names):
	 * that only moves req to the ready list. */
	ares_getaddrinfo(r->ch, e->name, NULL, &hints, ares_done, e);
	ares_rearm(r);
	return 0;
}

void resolver_cancel(struct resolver *r, struct resolve_req *req)
{
	struct resolve_entry *e = req->entry;

	switch (req->state) {
	case REQ_WAITING:
		rl_remove(&e->waiters, req);
		break;
	case REQ_READY:
		rl_remove(&r->ready, req);
		break;
	default:
		return;
	}
	req_reset(req);
	entry_put(e);
}

void resolver_stats(const struct resolver *r, struct resolver_stats *st)
{
	*st = r->st;
}

static pthread_once_t ares_once = PTHREAD_ONCE_INIT;
static int ares_lib_status;

static void ares_lib_init(void)
{
	/* Not thread-safe in c-ares 1.18, and workers start resolvers in
	 * parallel; never cleaned up, it holds nothing on Linux. */
	ares_lib_status = ares_library_init(ARES_LIB_INIT_ALL);
}

static void fill_key(uint64_t key[2])
{
	struct timespec ts;

	if (getrandom(key, 2 * sizeof(key[0]), GRND_NONBLOCK) == 2 * sizeof(key[0]))
		return;
	/* Early boot without entropy: weaker, still not guessable offline. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	key[0] ^= (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL;
	clock_gettime(CLOCK_REALTIME, &ts);
	key[1] ^= (uint64_t)ts.tv_sec ^ ((uint64_t)(uintptr_t)key << 17);
}

struct resolver *resolver_new(struct loop *l, const char *servers_csv, size_t cache_max_entries,
			      struct sl_err *err)
{
	char lookups[] = "b"; /* DNS only: /etc/hosts is a blocking read */
	struct ares_options o = {
		.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES,
		.timeout = RESOLVE_TRY_TIMEOUT_MS,
		.tries = RESOLVE_TRIES,
		.domains = NULL,
		.ndomains = 0,
		.lookups = lookups,
		.sock_state_cb = sock_state_cb,
	};
	int optmask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_DOMAINS |
		      ARES_OPT_LOOKUPS | ARES_OPT_SOCK_STATE_CB;
	struct resolver *r;
	size_t nb;
	int rc;

	pthread_once(&ares_once, ares_lib_init);
	/* c-ares' codes are not errnos: errno 0 in @err. */
	if (ares_lib_status != ARES_SUCCESS) {
		sl_err_set(err, 0, "resolver: c-ares init: %s", ares_strerror(ares_lib_status));
		return NULL;
	}

	r = calloc(1, sizeof(*r));
	if (!r)
		goto nomem;
	r->loop = l;
	r->cache_max = cache_max_entries;
	r->deadline_ms = RESOLVE_DEADLINE_MS;
	for (nb = BUCKETS_MIN; nb < cache_max_entries && nb < BUCKETS_MAX; nb *= 2)
		;
	r->nbuckets = nb;
	r->buckets = calloc(nb, sizeof(*r->buckets));
	if (!r->buckets)
		goto nomem;
	fill_key(r->key);

	/* Both timers stay in the heap for the resolver's life (parked far in
	 * the future when idle), so re-arming them later cannot fail. */
	r->ares_timer.cb = ares_timer_cb;
	r->deliver_timer.cb = deliver_cb;
	if (loop_timer_arm(l, &r->ares_timer, FAR_FUTURE_MS) ||
	    loop_timer_arm(l, &r->deliver_timer, FAR_FUTURE_MS))
		goto nomem;

	o.sock_state_cb_data = r;
	rc = ares_init_options(&r->ch, &o, optmask);
	if (rc != ARES_SUCCESS) {
		sl_err_set(err, 0, "resolver: c-ares init: %s", ares_strerror(rc));
		goto fail;
	}
	r->have_ch = true;
	if (servers_csv && *servers_csv) {
		rc = ares_set_servers_ports_csv(r->ch, servers_csv);
		if (rc != ARES_SUCCESS) {
			sl_err_set(err, 0, "upstream_resolvers: bad server list `%s`: %s",
				   servers_csv, ares_strerror(rc));
			goto fail;
		}
	}
	return r;
nomem:
	sl_err_set(err, ENOMEM, "resolver: out of memory");
fail:
	resolver_free(r);
	return NULL;
}

void resolver_set_deadline(struct resolver *r, uint32_t ms)
{
	if (r && ms)
		r->deadline_ms = ms;
}

void resolver_free(struct resolver *r)
{
	struct resolve_req *req;
	struct rsock *s;

	if (!r)
		return;
	/* Runs ares_done(ARES_EDESTRUCTION) for each query (dropping the
	 * query references) and closes c-ares' sockets. */
	if (r->have_ch)
		ares_destroy(r->ch);
	while ((s = r->socks)) {
		r->socks = s->next;
		loop_del(r->loop, &s->ev);
		free(s);
	}
	while ((req = r->ready.head)) {
		struct resolve_entry *e = req->entry;

		rl_remove(&r->ready, req);
		req_reset(req);
		entry_put(e);
	}
	for (size_t i = 0; r->buckets && i < r->nbuckets; i++) {
		struct resolve_entry *e;

		while ((e = r->buckets[i])) {
			/* The table's own reference (dropped by table_remove())
			 * keeps @e alive through this loop; the analyzer does not
			 * count references. */
			while ((req = e->waiters.head)) { // NOLINT(clang-analyzer-unix.Malloc)
				rl_remove(&e->waiters, req);
				req_reset(req);
				entry_put(e);
			}
			table_remove(r, e);
		}
	}
	loop_timer_cancel(r->loop, &r->ares_timer);
	loop_timer_cancel(r->loop, &r->deliver_timer);
	free(r->buckets);
	free(r);
}
