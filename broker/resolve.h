/* SPDX-License-Identifier: MIT */
/* Asynchronous upstream DNS resolution (c-ares) on a loop, with an LRU cache */
#ifndef SLUICE_BROKER_RESOLVE_H
#define SLUICE_BROKER_RESOLVE_H

#include <stddef.h>
#include <stdint.h>

struct loop;
struct resolver;
struct resolve_entry;
struct sl_addr;
struct sl_err;

/* Most addresses one lookup returns: IPv4 first, then IPv6. */
#define RESOLVE_MAX_ADDRS 16

/* Most upstream queries in flight per resolver; lookups beyond: -EAGAIN. */
#define RESOLVE_MAX_INFLIGHT 4096

/* A positive answer is cached for its smallest TTL, clamped to these. */
#define RESOLVE_TTL_MIN_MS 1000u
#define RESOLVE_TTL_MAX_MS 3600000u
/* NXDOMAIN / no data is cached this long; failures are not cached. */
#define RESOLVE_NEG_TTL_MS 5000u

/* c-ares: first-round timeout per server, and rounds. c-ares 1.18 doubles
 * the timeout each round: one silent server fails after 1.5 + 3 = 4.5 s. */
#define RESOLVE_TRY_TIMEOUT_MS 1500
#define RESOLVE_TRIES 2
/* Hard bound on a lookup's wait, whatever the number of servers (with
 * several silent servers c-ares alone would take longer): the default of
 * resolver_set_deadline() and of the broker's resolve_timeout. */
#define RESOLVE_DEADLINE_MS 5000u

struct resolve_req;

/**
 * typedef resolve_cb - result of resolver_lookup()
 * @req:    the request, now idle (it may be reused from within the callback)
 * @status: 0; -ENOENT (NXDOMAIN or no address); -ETIMEDOUT; -EIO (SERVFAIL,
 *          refused, unreachable server, bad answer); -ENOMEM
 * @addrs:  @n addresses (IPv4 stored v4-mapped, IPv4 first, then IPv6);
 *          valid only during the call: copy what you keep
 * @n:      0 unless @status is 0; then 1..RESOLVE_MAX_ADDRS
 * @arg:    the caller's argument
 */
typedef void resolve_cb(struct resolve_req *req, int status, const struct sl_addr *addrs, size_t n,
			void *arg);

/**
 * struct resolve_req - one pending lookup, embedded in the caller's struct
 *
 * All fields are private to resolve.c. Zero-fill it (or call
 * resolve_req_init()) before first use; a zero-filled req is idle, and
 * resolver_cancel() on an idle req is a no-op.
 */
struct resolve_req {
	struct resolve_req *next;
	struct resolve_req *prev;
	struct resolve_entry *entry;
	resolve_cb *cb;
	void *arg;
	uint64_t round;
	int state;
};

/**
 * struct resolver_stats - counters since resolver_new()
 * @hits:       lookups answered from the cache
 * @misses:     lookups that started an upstream query
 * @coalesced:  lookups that joined a query already in flight for the name
 * @evictions:  cached answers dropped to stay within cache_max_entries
 * @expired:    cached answers dropped because their TTL ran out
 * @in_flight:  upstream queries running now (gauge)
 * @entries:    answers in the cache now (gauge)
 */
struct resolver_stats {
	uint64_t hits;
	uint64_t misses;
	uint64_t coalesced;
	uint64_t evictions;
	uint64_t expired;
	uint64_t in_flight;
	uint64_t entries;
};

static inline void resolve_req_init(struct resolve_req *req)
{
	*req = (struct resolve_req){ 0 };
}

/**
 * resolver_new() - create the resolver for one loop (one per worker thread)
 * @l:                 the loop whose thread will use the resolver
 * @servers_csv:       upstream servers as "ADDR[:PORT],[V6ADDR]:PORT,...";
 *                     NULL or "" means the servers of /etc/resolv.conf
 * @cache_max_entries: most answers kept (0: no cache, in-flight sharing only)
 * @err:               on failure, a message naming the bad value (NULL: not
 *                     wanted)
 *
 * Reads /etc/resolv.conf (start-up only: that read blocks). Search domains
 * are not used and /etc/hosts is not consulted: names are looked up as
 * given, upstream only. Every resolver_* call for this resolver must come
 * from @l's thread.
 *
 * Return: the resolver, or NULL with @err filled.
 */
struct resolver *resolver_new(struct loop *l, const char *servers_csv, size_t cache_max_entries,
			      struct sl_err *err);

/**
 * resolver_free() - cancel everything and free the resolver
 * @r: the resolver, or NULL
 *
 * Call before loop_free() of its loop (it unregisters its sockets there).
 * Pending callbacks are never called; their reqs are left idle (zeroed
 * links, so a later resolver_cancel() on them is a harmless no-op). Must
 * not be called from within a resolve_cb.
 */
void resolver_free(struct resolver *r);

/**
 * resolver_lookup() - resolve @name (A and AAAA) asynchronously
 * @r:    the resolver
 * @name: a host name (letters, digits, '-', '_', dots; at most 253 bytes,
 *        labels of 1..63; one trailing dot allowed); case-insensitive
 * @req:  an idle request, owned by the caller, valid until the callback
 *        runs or resolver_cancel() returns
 * @cb:   called once, on the loop thread, from the loop, never from within
 *        resolver_lookup() (cache hits too are delivered on a later
 *        iteration)
 * @arg:  passed to @cb
 *
 * Return: 0 (then @cb will be called unless cancelled); -EINVAL for a bad
 * name; -EBUSY if @req is already pending; -EAGAIN if RESOLVE_MAX_INFLIGHT
 * queries are running; -ENOMEM. On error @cb is never called.
 */
int resolver_lookup(struct resolver *r, const char *name, struct resolve_req *req, resolve_cb *cb,
		    void *arg);

/**
 * resolver_set_deadline() - bound the wait of the lookups started from now on
 * @r:  the resolver
 * @ms: waiters hear -ETIMEDOUT this long after the lookup's upstream query
 *      began (RESOLVE_DEADLINE_MS until this is called); 0 leaves it as it is
 *
 * Lookups already waiting keep the deadline they started with.
 */
void resolver_set_deadline(struct resolver *r, uint32_t ms);

/**
 * resolver_cancel() - forget a pending lookup; its callback will not run
 * @r:   the resolver
 * @req: the request; idle requests are ignored
 *
 * The upstream query, if any, goes on (other waiters may share it, and its
 * answer still fills the cache). Safe from within any resolve_cb.
 */
void resolver_cancel(struct resolver *r, struct resolve_req *req);

/**
 * resolver_stats() - copy the counters
 * @r:  the resolver
 * @st: filled
 */
void resolver_stats(const struct resolver *r, struct resolver_stats *st);

#endif
