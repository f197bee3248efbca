/* SPDX-License-Identifier: MIT */
/* State shared by the files of sluiced: sandboxes, workers, connections. */
#ifndef SLUICE_BROKER_INTERNAL_H
#define SLUICE_BROKER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "broker/config.h"
#include "broker/loop.h"
#include "broker/resolve.h"
#include "common/addr.h"
#include "dnsfilter/dnsfilter.h"

struct policy;
struct http_request;
struct conn;
struct tlsca;
struct ssl_ctx_st;

#define SANDBOX_NAME_MAX 63
#define SANDBOX_MAX 65536

/*
 * A registered sandbox. Shared by reference between the control thread
 * (which owns the table) and workers (which hold a reference per
 * connection). The policy pointer changes only under the table's write lock.
 */
struct sandbox {
	atomic_int refs;
	char name[SANDBOX_NAME_MAX + 1];
	struct sl_addr addr;
	char policy_path[256];
	struct policy *policy;
	atomic_uint conns;
	atomic_uint dns_tcp; /* TCP connections to the DNS filter, all workers */
	atomic_bool dead;
	/* Names -> synthetic addresses, for the sandbox's life (its own lock). */
	struct dns_synth *synth;
	/* DNS query rate: dns_lock guards the buckets and the counters. */
	pthread_mutex_t dns_lock;
	struct dns_bucket dns_bucket;
	struct dns_bucket dns_refuse_bucket; /* REFUSED answers over the rate */
	uint64_t dns_limited;	     /* refused for rate since the last report */
	uint64_t dns_dropped;	     /* left unanswered since the last report */
	uint64_t dns_limited_log_ms; /* when that report was logged */
	/* Placeholders issued to this sandbox (its own lock). */
	struct cred_table *creds;
	/* The sandbox's own CA, for intercepted TLS (thread-safe). */
	struct tlsca *ca;
};

/* sandbox.c */
int sandbox_table_init(const struct broker_config *cfg);
/* Looks up the sandbox of a source address: takes a reference on it and on
 * its policy (*pol); both dropped by the caller. NULL when unknown. */
struct sandbox *sandbox_lookup(const struct sl_addr *src, struct policy **pol);
void sandbox_put(struct sandbox *sb);
/* The policy in force for @sb now, with a reference for the caller. */
struct policy *sandbox_policy(struct sandbox *sb);
/* @addr "auto" allocates the next free /30 of sandbox_pool; the address
 * registered is written to *@assigned when not NULL. */
int sandbox_register(const char *name, const char *addr, const char *policy_path,
		     bool persist, struct sl_addr *assigned, char *err, size_t errlen);
/* sandbox_register() of a new sandbox (saved) with its CA made already,
 * tlsca_create(@name) (off the control thread: see control.c); @ca is
 * taken in any case. NULL: one is made here. */
int sandbox_register_ca(const char *name, const char *addr, const char *policy_path,
			struct tlsca *ca, struct sl_addr *assigned, char *err, size_t errlen);
int sandbox_unregister(const char *name, char *err, size_t errlen);
/* Writes "NAME ADDR POLICY" lines; returns the length or -ENOSPC. */
int sandbox_list(char *buf, size_t len);
size_t sandbox_count(void);
struct tlsca_stats;
/* The leaf-certificate caches of every registered sandbox, summed. */
void sandbox_tls_stats(struct tlsca_stats *sum);
/* The PEM of the sandbox's CA certificate (free() it); -ENOENT. */
int sandbox_ca_pem(const char *name, char **pem);
/* "ok\n" and the sandbox's "VAR=placeholder" lines. */
int sandbox_placeholders(const char *name, char *out, size_t len, char *err, size_t errlen);
/* Reloads every policy; all or nothing. */
int sandbox_reload_all(char *err, size_t errlen);
int sandbox_restore(char *err, size_t errlen);

/* A worker: one thread, one loop, one resolver, its listeners. */
struct worker {
	unsigned id;
	pthread_t thread;
	struct loop *loop;
	struct resolver *resolver;
	struct ev proxy_ev;
	struct ev transparent_ev;
	struct conn *conns; /* doubly linked through conn->next/prev */
	atomic_uint n_conns;
	bool draining;
};

struct broker {
	struct broker_config cfg;
	struct worker *workers;
	unsigned n_workers;
	atomic_uint total_conns;
	atomic_bool draining;
	struct sl_addr local[64]; /* the broker namespace's own addresses */
	/* Client context for intercepted connections' upstream side
	 * (upstream_ca, else the system store). */
	struct ssl_ctx_st *upstream_ctx;
	size_t n_local;
};

extern struct broker broker;

/* proxy.c */
void proxy_accept(struct ev *ev, uint32_t events);
void proxy_accept_transparent(struct ev *ev, uint32_t events);
/* Posted to each worker with a sandbox reference, which it drops: closes
 * that worker's connections of the (now dead) sandbox. */
void proxy_close_sandbox_post(void *sandbox);
/* On a worker after a reload (@worker: that worker): closes the tunnels and
 * intercepted connections whose host, address, raw TCP or credentials the
 * new policy withdrew, and hands the new policy to the tunnels it keeps. */
void proxy_policy_changed_post(void *worker);
void proxy_close_all(struct worker *w);

/* control.c */
/* Opens the control socket at @path and serves it on @l (the main loop).
 * Return: 0 or a negative errno. */
int control_start(struct loop *l, const char *path);
/* Draining: no new connection; requests under way are finished. */
void control_stop(void);
/* After the main loop stopped: finishes what was asked, closes the rest
 * and stops the CA maker thread. */
void control_shutdown(void);

void proxy_set_worker(struct worker *w);

/* dns.c */
/* Opens this worker's DNS filter sockets (UDP and TCP, SO_REUSEPORT on
 * 0.0.0.0:dns_port) and registers them in w->loop. Before the worker runs. */
int dns_server_start(struct worker *w);
/* Closes them and this worker's TCP DNS connections; on the worker's loop
 * thread (e.g. posted by stop_listening) or after its loop has stopped. */
void dns_server_stop(struct worker *w);

/* creds.c */
struct cred_table;
struct cred_secret;
int creds_init(const char *state_dir);
/* Reads the secrets of @p's credentials and attaches them to @p. */
int creds_load_secrets(struct policy *p, char *err, size_t errlen);
/* The secrets attached to @p, by credential index (NULL: none). */
const struct cred_secret *const *creds_secrets(const struct policy *p);
struct cred_plan;
/* Largest number of credentials in a policy (policy/load.c refuses more). */
#define CREDS_MAX 256
/**
 * creds_acquire() - the secrets one request's plan needs, now
 * @p:    the policy the plan was made with
 * @sb:   the sandbox sending the request (a minted token's subject)
 * @host: the host the request goes to (a minted token's audience)
 * @plan: a CRED_FORWARD plan with nuse > 0
 * @out:  CREDS_MAX pointers; the entries plan->use names are set, the
 *        others left alone
 * @held: CRED_MAX_USES secrets owned by the caller, empty on entry: room
 *        for values made for this request (a copy of an OAuth2 token, a
 *        minted JWT); creds_release() them once the head is written
 *
 * Return: 0; -EAGAIN when a credential cannot be had now (a token not yet
 * fetched or its endpoint failing: the request is refused with 502
 * credential-unavailable, never sent without it); -ENOKEY; -ENOMEM.
 */
int creds_acquire(const struct policy *p, const struct sandbox *sb, const char *host,
		  const struct cred_plan *plan, const struct cred_secret **out,
		  struct cred_secret *held);
/* Wipes what creds_acquire() put in @held (CRED_MAX_USES entries). */
void creds_release(struct cred_secret *held);
int creds_sandbox_init(struct sandbox *sb, struct policy *p, bool restore);
int creds_sandbox_sync(struct sandbox *sb, struct policy *p, bool issue_expired);
void creds_sandbox_forget(struct sandbox *sb);
/* "VAR=placeholder" lines for the sandbox's environment. */
int creds_env(struct sandbox *sb, const struct policy *p, char *out, size_t len);
/* The JWK Set (JSON) of every jwt key of the loaded policies; its length,
 * or -ENOSPC, -ENOMEM. A key's kid is the policy's, else its RFC 7638
 * thumbprint; a key loaded by several policies is listed once. */
int creds_jwks(char *out, size_t len);
/* Minted JWTs kept for reuse, over every sandbox (`sluice status`). */
size_t creds_jwt_cached(void);
/* Stops the OAuth2 token fetcher and wipes its tokens (at shutdown). */
void creds_shutdown(void);

/* main.c */
bool broker_is_local(const struct sl_addr *a, uint16_t port);
/* Reloads configuration and every policy; all or nothing. */
int broker_reload(char *err, size_t errlen);

#endif
