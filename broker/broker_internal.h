/* SPDX-License-Identifier: MIT */
/* State shared by the files of sluiced: sandboxes, workers, connections. */
#ifndef SLUICE_BROKER_INTERNAL_H
#define SLUICE_BROKER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "broker/config.h"
#include "common/loop.h"
#include "broker/resolve.h"
#include "common/addr.h"
#include "common/reason.h"
#include "dnsfilter/dnsfilter.h"

struct policy;
struct http_request;
struct conn;
struct tls_ca;
struct creds_table;
struct ssl_ctx_st;
struct hold_table;
struct sl_err;
struct file_who;

#define SANDBOX_NAME_MAX 63
#define SANDBOX_MAX 65536

/*
 * A registered sandbox. Shared by reference between the control thread
 * (which owns the table) and workers (which hold a reference per
 * connection). The policy pointer changes only under the table's write lock.
 */
struct sandbox {
	atomic_int refs;
	struct sandbox_table *table; /* whose it is, for its life */
	size_t all_ix;		     /* its place in the table's list of all (under its lock) */
	char name[SANDBOX_NAME_MAX + 1];
	struct sl_addr addr;
	char policy_path[256];
	struct policy *policy;
	/* SHA-256 of the file @policy was compiled from, in hex: what the
	 * audit line of an update names (changes with @policy, same lock). */
	char policy_sha256[65];
	atomic_uint conns;
	atomic_bool dead;
	bool netns; /* made by `sluice create`: lives while /run/netns/NAME does */
	/* Names -> synthetic addresses, for the sandbox's life (its own lock). */
	struct dns_synth *synth;
	/* What the DNS filter server keeps of it: its query rate, its TCP
	 * connections (dnsfilter/server.c; dns.lock is initialised with the
	 * sandbox and destroyed with it). */
	struct dns_client_state dns;
	/* Placeholders issued to this sandbox (its own lock). */
	struct creds_table *creds;
	/* Its placeholders file was damaged or missing at the broker's start:
	 * set before the sandbox is served, read-only after. */
	bool placeholders_lost;
	/* Likewise for its synthetic-names journal (names lost their address). */
	bool names_lost;
	/* Registered in audit mode (`sluice create --audit`): set before the
	 * sandbox is served, read-only after; see sandbox_audit(). */
	bool audit;
	/* The sandbox's own CA, for intercepted TLS (thread-safe). */
	struct tls_ca *ca;
	/* Its held requests (`unlisted: hold`), made on first use
	 * (broker/proxy/hold.c; its own lock). */
	_Atomic(struct hold_table *) holds;
	/* Names approved while it runs (`sluice approve`), appended to its
	 * policy file's rules at every compile (approve, update, reload); the
	 * control thread's alone. NULL until the first. */
	struct sandbox_approval *approvals;
	size_t n_approvals;
	/* Whose right its policy and the files the policy names are read
	 * with, at every compile (register, update, approve, reload): the
	 * control_group member who registered it or last updated it; NULL:
	 * root. The control thread's alone. */
	struct file_who *reader;
};

/* Whose sandbox @sb is: its reader's uid, 0 for root's (see sandbox_owner()).
 * On the control thread, or under the table's lock. */
uint32_t sandbox_uid(const struct sandbox *sb);
/* For the listings that take an owner: every sandbox, whoever's. */
#define OWNER_ANY UINT32_MAX
/* Is @sb among the sandboxes of uid @only (OWNER_ANY: every one)? */
bool sandbox_of(const struct sandbox *sb, uint32_t only);

/* One `sluice approve NAME HOST[:PORT] [--for DURATION]`. */
struct sandbox_approval {
	char host[256];
	uint16_t port;	   /* 0: 80 and 443 */
	uint64_t until_ms; /* loop_now_ms() clock; 0: for the sandbox's life */
	/* The same end on CLOCK_REALTIME (0: none), what the registration
	 * keeps: the monotonic clock does not outlive the broker. */
	uint64_t until_wall_ms;
};

/* sandbox.c */
/*
 * The table of registered sandboxes, an object of its own (its own lock):
 * made by sandbox_table_new() from the configuration's state_dir and
 * pools (creating the directories), freed by sandbox_table_free() with
 * the table's references on its sandboxes. Every function below but
 * sandbox_put(), sandbox_policy() and sandbox_audit() takes it first.
 */
struct sandbox_table;
int sandbox_table_new(const struct broker_config *cfg, struct sandbox_table **out);
void sandbox_table_free(struct sandbox_table *tab);
struct worker;
/* The workers told of policies swapped and sandboxes gone; set once,
 * before any runs. */
void sandbox_table_set_workers(struct sandbox_table *tab, struct worker *workers, unsigned n);
/* Looks up the sandbox of a source address: takes a reference on it and on
 * its policy (*pol); both dropped by the caller. NULL when unknown. */
struct sandbox *sandbox_lookup(struct sandbox_table *tab, const struct sl_addr *src,
			       struct policy **pol);
void sandbox_put(struct sandbox *sb);
/* The policy in force for @sb now, with a reference for the caller. */
struct policy *sandbox_policy(struct sandbox *sb);
/* @addr "auto" allocates the next free /30 of sandbox_pool; the address
 * registered is written to *@assigned when not NULL. */
int sandbox_register(struct sandbox_table *tab, const char *name, const char *addr,
		     const char *policy_path, bool persist, struct sl_addr *assigned,
		     struct sl_err *err);
/* sandbox_register() of a new sandbox (saved) with its CA made already,
 * tls_ca_create(@name) (off the control thread: see control.c); @ca is
 * taken in any case. NULL: one is made here. @reserved: @addr is what
 * sandbox_reserve() gave, released here unless the sandbox now holds it.
 * @who: the caller, whose right its files are read with from now on
 * (NULL: root's). */
int sandbox_register_ca(struct sandbox_table *tab, const char *name, const char *addr,
			const char *policy_path, bool netns, bool audit, struct tls_ca *ca,
			bool reserved, const struct file_who *who, struct sl_addr *assigned,
			struct sl_err *err);
/* The address that a register of @name with "auto" will get, held for it
 * until sandbox_register_ca(..., reserved) (or sandbox_unreserve()):
 * `sluice create` builds the sandbox's wire while its CA is made. 0;
 * -EEXIST (@name is registered) or -ENOSPC (the pool is full), with @err. */
int sandbox_reserve(struct sandbox_table *tab, const char *name, struct sl_addr *out,
		    struct sl_err *err);
/* Lets go of a sandbox_reserve() address that no sandbox holds. */
void sandbox_unreserve(struct sandbox_table *tab, const struct sl_addr *a);
/* Is @sb in audit mode with policy @p (its registration says so, or the
 * policy's `mode: audit`)? Names outside the allowlist then pass, audited
 * would-deny. */
bool sandbox_audit(const struct sandbox *sb, const struct policy *p);
/* How many registered sandboxes are in audit mode now. */
size_t sandbox_audit_count(struct sandbox_table *tab);
int sandbox_unregister(struct sandbox_table *tab, const char *name, struct sl_err *err);
/* Writes "NAME ADDR POLICY" lines of the sandboxes of uid @only
 * (sandbox_uid(); OWNER_ANY: all); returns the length or -ENOSPC. */
int sandbox_list(struct sandbox_table *tab, uint32_t only, char *buf, size_t len);
/* Sandboxes whose placeholders or synthetic names were lost at start-up. */
size_t sandbox_state_lost_count(struct sandbox_table *tab);
size_t sandbox_count(struct sandbox_table *tab);
void sandbox_each(struct sandbox_table *tab, void (*fn)(const struct sandbox *sb, void *arg),
		  void *arg);
struct tls_leaf_stats;
/* The leaf-certificate caches of every registered sandbox, summed. */
void sandbox_tls_stats(struct sandbox_table *tab, struct tls_leaf_stats *sum);
/* The PEM of the sandbox's CA certificate (free() it); -ENOENT. */
int sandbox_ca_pem(struct sandbox_table *tab, const char *name, char **pem);
/* "ok\n" and the sandbox's "VAR=placeholder" lines. */
int sandbox_placeholders(struct sandbox_table *tab, const char *name, char *out, size_t len,
			 struct sl_err *err);
/* Reloads every policy; all or nothing. */
int sandbox_reload_all(struct sandbox_table *tab, struct sl_err *err);
/* What sandbox_update() swapped, for its audit line. */
struct sandbox_update_info {
	char old_path[256], old_sha256[65];
	char new_path[256], new_sha256[65];
};
/* Swaps sandbox @name's policy for the one in @policy_path (absolute), and
 * keeps it across a restart; closes the open connections it withdraws
 * unless @keep_open. -ENOENT: no such sandbox; -EINVAL and others: @err
 * says why (FILE:LINE:COL for a broken policy) and the old policy stays.
 * @who: the caller, as for sandbox_register_ca(): from then on the reader. */
int sandbox_update(struct sandbox_table *tab, const char *name, const char *policy_path,
		   bool keep_open, const struct file_who *who, struct sandbox_update_info *info,
		   struct sl_err *err);
int sandbox_restore(struct sandbox_table *tab, struct sl_err *err);
/* Adds (or renews) an approval of @host:@port to sandbox @name and swaps in
 * its policy compiled anew with it; @until_ms as in struct sandbox_approval.
 * -ENOENT: no such sandbox; others: @err says why, nothing changed. */
int sandbox_approve(struct sandbox_table *tab, const char *name, const char *host, uint16_t port,
		    uint64_t until_ms, struct sl_err *err);
/* Drops the approvals whose time is up at @now_ms (their sandboxes'
 * policies compiled anew without them); on the control thread. Return: how
 * many timed approvals remain (0: no need to call again). */
size_t sandbox_approvals_expire(struct sandbox_table *tab, uint64_t now_ms);
/* Whose sandbox @name is, in *@uid: its reader's uid (the control_group
 * member who registered or last updated it), 0 for root's. -ENOENT. */
int sandbox_owner(struct sandbox_table *tab, const char *name, uint32_t *uid);
/* A reference on sandbox @name (sandbox_put() it), or NULL. */
struct sandbox *sandbox_get(struct sandbox_table *tab, const char *name);
/* An audit line `state-damaged` for a state file @path of sandbox @name
 * found @what ("damaged", "missing", ...) when the broker read it. */
void sandbox_state_audit(const char *name, const char *path, const char *what);

struct dns_server;
struct control;

/*
 * The limits and timeouts a reload changes, as the workers read them: one
 * immutable struct, never written once published. The main thread makes
 * a new one at start-up and at each reload (broker_reload()) and publishes
 * it (broker_limits_publish()): b->limits is the main thread's reference,
 * and each worker holds a reference of its own in w->limits, swapped on
 * its own thread by a message the main thread posts with that reference
 * (so a worker reads w->limits with no lock and no atomic, and sees every
 * key of one reload at once, or none). The last reference dropped frees it.
 */
struct broker_limits {
	atomic_uint refs;
	uint32_t max_connections;  /* all sandboxes together, after RLIMIT_NOFILE */
	uint32_t sandbox_conn_cap; /* one sandbox at most, whatever its policy says */
	uint32_t head_timeout_ms;
	uint32_t connect_timeout_ms;
	uint32_t response_timeout_ms; /* request sent -> response head */
	uint32_t resolve_timeout_ms;  /* a name's lookup (resolver_set_deadline()) */
};

/* A worker: one thread, one loop, one resolver, its listeners. */
/* Empty pipes a worker keeps: 16 pages each, counted against the broker
 * user's pipe pages whether they hold bytes or not. */
#define WORKER_PIPES_MAX 32

struct worker {
	struct broker *b; /* the broker it works for */
	unsigned id;
	pthread_t thread;
	struct loop *loop;
	struct resolver *resolver;
	struct ev proxy_ev;
	struct ev transparent_ev;
	/* Out of descriptors, the listeners rest; this wakes them (proxy/accept.c). */
	struct timer accept_retry;
	/* This worker's reference on the limits in force: read and swapped on
	 * its own thread only (struct broker_limits). */
	const struct broker_limits *limits;
	/* Its DNS filter sockets (dnsfilter/server.c); this worker's alone. */
	struct dns_server *dns;
	struct conn *conns; /* doubly linked through conn->next/prev */
	atomic_uint n_conns;
	bool draining;
	/* Empty splice pipes kept for the next connection that moves bytes
	 * (proxy/tunnel.c proxy_pipe_get()); this worker's alone. */
	int pipes[WORKER_PIPES_MAX][2];
	unsigned n_pipes;
	/* Pipes it made smaller than PIPE_CAP (its user over its pipe pages)
	 * that connections still hold: never kept (proxy/tunnel.c). */
	unsigned small_pipes;
};

/*
 * The broker: made by main() and passed to what needs it (a worker points
 * at it, a connection reaches it through its worker, the control socket
 * holds it as its context). There is no global instance.
 */
struct broker {
	struct broker_config cfg;
	/* The configuration file read (NULL: the built-in defaults), read
	 * again by broker_reload(). */
	const char *config_path;
	struct worker *workers;
	unsigned n_workers;
	atomic_uint total_conns;
	/* The limits in force (struct broker_limits): the main thread's
	 * reference, read on the main thread only. */
	struct broker_limits *limits;
	atomic_bool draining;
	struct sl_addr local[64]; /* the broker namespace's own addresses */
	/* Client context for intercepted connections' upstream side
	 * (upstream_ca, else the system store). */
	struct ssl_ctx_st *upstream_ctx;
	size_t n_local;
	struct sandbox_table *sandboxes; /* the registered sandboxes */
	struct control *control;	 /* the control socket (control.c) */
	/* Whether the broker becomes cfg.user after start-up: started as
	 * root, and the user is not root. Set once, before the opener is
	 * forked (main.c). */
	bool switching;
	/* The main thread's loop and what it serves besides the control
	 * socket (main.c): signals, the drain and the audit log's tick. */
	struct loop *main_loop;
	struct ev signal_ev;
	struct timer drain_timer;
	struct timer audit_timer;
	uint64_t drain_deadline;
};

/* proxy/ (accept.c) */
void proxy_accept(struct ev *ev, uint32_t events);
void proxy_accept_transparent(struct ev *ev, uint32_t events);
/* Posted to each worker with a sandbox reference, which it drops: closes
 * that worker's connections of the (now dead) sandbox. */
void proxy_close_sandbox_post(void *sandbox);
/* On a worker after a reload (@worker: that worker): closes the tunnels and
 * intercepted connections whose host, address, raw TCP or credentials the
 * new policy withdrew, and hands the new policy to the tunnels it keeps. */
void proxy_policy_changed_post(void *worker);
/* The same, but keeps what the new policy withdrew open (`sluice update
 * --keep-open`): only the tunnels it still allows get it. */
void proxy_policy_changed_keep_post(void *worker);
void proxy_close_all(struct worker *w);
/* Closes the pipes @w keeps (its loop has ended). */
void proxy_pipes_drop(struct worker *w);
/* proxy/hold.c: held requests. Per sandbox, at most this many connections
 * held, and this many distinct names and ports waiting (hold-full). */
#define HOLD_CONNS_MAX 64
#define HOLD_NAMES_MAX 32
void proxy_hold_table_free(struct hold_table *t);
/* `sluice pending`: @sb's waiting names, as lines appended at *@o. */
int proxy_hold_list(const struct sandbox *sb, char *out, size_t len, size_t *o);
bool proxy_hold_pending(struct sandbox *sb, const char *host, uint16_t port);
/* Posts an answer to every worker for @sb's connections held for @host
 * (on @port; 0: any): @approve decides them again on the sandbox's policy
 * now; else each is refused with @status and @reason. */
int proxy_hold_answer_all(struct broker *b, struct sandbox *sb, const char *host, uint16_t port,
			  bool approve, enum sl_reason reason, int status);
/* An approval's check by the address guard (proxy_hold_check()). */
struct hold_check {
	struct broker *b;   /* whose worker 0 resolves; set by proxy_hold_check() */
	struct sandbox *sb; /* the caller's reference */
	struct policy *pol; /* the caller's reference: its ranges judge */
	char host[256];
	uint16_t port;
	struct resolve_req rr;
	struct loop *back; /* where @done runs */
	void (*done)(void *chk);
	void *arg;  /* the caller's */
	int status; /* the resolver's: < 0 when it failed */
	unsigned allowed, denied;
	char first_denied[64];
};
/* Resolves and judges @chk on worker 0, then runs @chk->done on @chk->back.
 * Return: 0, or a negative errno (nothing posted). */
int proxy_hold_check(struct broker *b, struct hold_check *chk);

/* watch.c: `sluice watch`, on the control loop. At most WATCH_MAX at once. */
#define WATCH_MAX 8
/* @tab: whose sandboxes are whose, for a member's watcher. */
int watch_start(struct loop *l, struct sandbox_table *tab);
/* Closes every watcher (the broker stops). */
void watch_stop(void);
/* Takes @fd (a control connection that asked `watch`) as a watcher: it gets
 * CTL_OK, then JSON lines: every line (@only OWNER_ANY), or those of the
 * sandboxes uid @only owns (sandbox_owner()). -EBUSY: WATCH_MAX watch
 * already (@fd not taken). */
int watch_add(int fd, uint32_t only);
bool watch_active(void);
/* For `sluice status` (control thread): watchers now, dropped since start. */
void watch_counts(unsigned *watchers, uint64_t *dropped);
/* A request held: {"event":"pending",...}. */
void watch_pending(const char *sandbox, const char *host, uint16_t port, const char *method,
		   const char *path, uint32_t count);

/* control.c */
/* Opens @b's control socket (cfg.control_socket) and serves it on
 * b->main_loop, with @b as its context. Return: 0 or a negative errno. */
int control_start(struct broker *b);
/* Draining: no new connection; requests under way are finished. */
void control_stop(struct control *ctl);
/* After the main loop stopped: finishes what was asked, closes the rest
 * and stops the CA maker thread; frees @ctl. */
void control_shutdown(struct control *ctl);
/* The control handler without a socket (unit tests): control_new() a
 * context for @b (its sandbox table, its configuration), control_handle()
 * one request line as the calling process would send it (its answer in
 * @out, as the socket would send it), control_free() it. */
struct control *control_new(struct broker *b);
void control_free(struct control *ctl);
void control_handle(struct control *ctl, char *line, char *out, size_t outlen);

void proxy_set_worker(struct worker *w);
/* proxy/accept.c: the worker whose loop runs now (NULL off the workers). */
struct worker *proxy_cur_worker(void);

/* dns_ops.c: the DNS filter server (dnsfilter/server.c) wired to the broker */
/* Opens this worker's DNS filter sockets (UDP and TCP, SO_REUSEPORT on
 * 0.0.0.0:dns_port) and registers them in w->loop. Before the worker runs. */
int broker_dns_start(struct worker *w);
/* Closes them and this worker's TCP DNS connections; on the worker's loop
 * thread (e.g. posted by stop_listening) or after its loop has stopped. */
void broker_dns_stop(struct worker *w);

/* broker.c */
/* Whether @a is one of the broker's own addresses (or a sandbox gateway). */
bool broker_is_local(const struct broker *b, const struct sl_addr *a, uint16_t port);
/* Notes the addresses of the broker's namespace (broker_is_local()). */
void broker_collect_local_addresses(struct broker *b);
/* `user` not set: the system user `sluice` if there is one, else the
 * fixed ids of config.h (so the broker never stays root by default). */
void broker_resolve_user(struct broker_config *c);
/* max_connections @want, or fewer: what RLIMIT_NOFILE holds; sets
 * *@sandbox_cap. Logs what it derived when @say. */
uint32_t broker_conn_limit_for_fds(const struct broker *b, uint32_t want, bool say,
				   uint32_t *sandbox_cap);
/* New limits from @cfg's (max_connections as it is) and @sandbox_conn_cap,
 * with one reference for the caller; NULL when out of memory. */
struct broker_limits *broker_limits_new(const struct broker_config *cfg, uint32_t sandbox_conn_cap);
const struct broker_limits *broker_limits_get(const struct broker_limits *l);
void broker_limits_put(const struct broker_limits *l);
/* Main thread: @l (the caller's reference, taken) is in force: b->limits
 * now, and posted to every worker with a reference each. */
void broker_limits_publish(struct broker *b, struct broker_limits *l);
/* Reloads configuration and every policy; all or nothing. */
int broker_reload(struct broker *b, struct sl_err *err, char *said, size_t saidlen);
/* Frees @b and what it owns (workers' loops and resolvers, the sandbox
 * table, the main loop); its threads must have stopped. NULL is fine. */
void broker_free(struct broker *b);

#endif
