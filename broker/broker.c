// SPDX-License-Identifier: MIT
/* The broker's own state, as the rest of sluiced sees it: its addresses,
 * the connection limit RLIMIT_NOFILE allows, and a reload of the
 * configuration (main.c starts the broker; this is what runs later, on
 * the main thread, and what unit tests link without main()). */
#include <errno.h>
#include <ifaddrs.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "broker/audit.h"
#include "broker/broker_internal.h"
#include "common/err.h"
#include "common/log.h"

bool broker_is_local(const struct broker *b, const struct sl_addr *a, uint16_t port)
{
	size_t i;

	(void)port;
	/* Sandbox gateways live in the pool and come and go with sandboxes. */
	if (addr_in_prefix(a, &b->cfg.pool_net, b->cfg.pool_plen))
		return true;
	for (i = 0; i < b->n_local; i++) {
		if (memcmp(&b->local[i], a, sizeof(*a)) == 0)
			return true;
	}
	return false;
}

void broker_collect_local_addresses(struct broker *b)
{
	struct ifaddrs *ifa, *i;

	b->n_local = 0;
	if (getifaddrs(&ifa) < 0)
		return;
	for (i = ifa; i && b->n_local < sizeof(b->local) / sizeof(b->local[0]); i = i->ifa_next) {
		if (i->ifa_addr &&
		    (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6))
			addr_from_sockaddr(i->ifa_addr, &b->local[b->n_local++], NULL);
	}
	freeifaddrs(ifa);
}

/*
 * Names, comma-separated in @out, the keys of @n that differ from the
 * running configuration and take effect only on a restart: sockets bound,
 * threads and buffers sized, pools handed out, trust loaded at start-up.
 */
struct changed_key {
	const char *key;
	bool changed;
};

/* The keys of @k that changed, comma-separated in @out ("" when none). */
static void key_list(const struct changed_key *k, size_t n, char *out, size_t len)
{
	size_t i, w = 0;

	out[0] = '\0';
	for (i = 0; i < n && w < len; i++) {
		if (k[i].changed)
			w += (size_t)snprintf(out + w, len - w, "%s%s", w ? ", " : "", k[i].key);
	}
}

static void restart_only_changes(const struct broker *b, const struct broker_config *n, char *out,
				 size_t len)
{
	const struct broker_config *o = &b->cfg;
	const struct changed_key k[] = {
		{ "control_socket", strcmp(n->control_socket, o->control_socket) != 0 },
		{ "state_dir", strcmp(n->state_dir, o->state_dir) != 0 },
		{ "sandbox_pool", n->pool_plen != o->pool_plen ||
					  memcmp(&n->pool_net, &o->pool_net, sizeof(n->pool_net)) },
		{ "proxy_port", n->proxy_port != o->proxy_port },
		{ "transparent_port", n->transparent_port != o->transparent_port },
		{ "dns_port", n->dns_port != o->dns_port },
		{ "synthetic_pool",
		  n->synthetic_plen != o->synthetic_plen ||
			  memcmp(&n->synthetic_net, &o->synthetic_net, sizeof(n->synthetic_net)) },
		{ "upstream_resolvers", strcmp(n->upstream_resolvers, o->upstream_resolvers) != 0 },
		{ "upstream_ca", strcmp(n->upstream_ca, o->upstream_ca) != 0 },
		{ "workers", n->workers != o->workers },
		{ "max_head_bytes", n->max_head_bytes != o->max_head_bytes },
		{ "dns_cache_size", n->dns_cache_size != o->dns_cache_size },
		{ "user", n->user_uid != o->user_uid || n->user_gid != o->user_gid },
		{ "key_user", n->key_uid != o->key_uid || n->key_gid != o->key_gid },
	};

	key_list(k, sizeof(k) / sizeof(k[0]), out, len);
}

/* The keys of @n that differ from the running configuration and take
 * effect at a reload (broker_reload() applies them). */
static void reload_changes(const struct broker *b, const struct broker_config *n, char *out,
			   size_t len)
{
	const struct broker_config *o = &b->cfg;
	const struct changed_key k[] = {
		{ "max_connections", n->max_connections != o->max_connections },
		{ "head_timeout", n->head_timeout_ms != o->head_timeout_ms },
		{ "connect_timeout", n->connect_timeout_ms != o->connect_timeout_ms },
		{ "response_timeout", n->response_timeout_ms != o->response_timeout_ms },
		{ "resolve_timeout", n->resolve_timeout_ms != o->resolve_timeout_ms },
		{ "drain_timeout", n->drain_timeout_ms != o->drain_timeout_ms },
		{ "audit_fold", n->audit_fold_ms != o->audit_fold_ms },
		{ "audit_log", strcmp(n->audit_log, o->audit_log) != 0 },
		{ "control_group", strcmp(n->control_group, o->control_group) != 0 },
	};

	key_list(k, sizeof(k) / sizeof(k[0]), out, len);
}

/* Descriptors one proxied connection can hold: the client, the upstream
 * and a tunnel's two pipes (two each). */
#define FDS_PER_CONN 6
/* Held besides connections: listeners, epoll and wake fds, the control
 * socket, the audit log, resolver sockets (a few per worker), and the empty
 * pipes each worker keeps (WORKER_PIPES_MAX, two descriptors each). */
#define FDS_BASE(workers) (64u + (workers) * (16u + 2u * WORKER_PIPES_MAX))
/* Each worker's TCP connections to the DNS filter (256 at most, dnsfilter/server.c). */
#define FDS_DNS_TCP(workers) ((workers) * 256u)

/*
 * @want, or fewer: as many connections as RLIMIT_NOFILE can hold with the
 * broker's other descriptors, so that the connection limit is met before
 * the descriptors run out (running out of descriptors stalls accept(),
 * the sandbox waits; the limit answers at once). Under a small limit the
 * DNS filter's TCP connections get at most half of what the base leaves
 * (beyond that, its accept waits for a descriptor as the proxy's does),
 * so that a broker under 256 descriptors still serves a few connections
 * rather than one. Also sets *@sandbox_cap, the most connections one
 * sandbox may hold whatever its policy says: half of what the descriptors
 * hold, so that one sandbox cannot take every descriptor from the others.
 * Logs what it derived (@say), and always when it lowers.
 */
uint32_t broker_conn_limit_for_fds(const struct broker *b, uint32_t want, bool say,
				   uint32_t *sandbox_cap)
{
	struct rlimit rl;
	unsigned workers = b->n_workers ? b->n_workers : 1;
	uint64_t fit, base = FDS_BASE(workers), dns = FDS_DNS_TCP(workers), reserved;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY) {
		*sandbox_cap = UINT32_MAX;
		return want;
	}
	if (rl.rlim_cur > base && dns > (rl.rlim_cur - base) / 2)
		dns = (rl.rlim_cur - base) / 2;
	reserved = base + dns;
	fit = rl.rlim_cur > reserved ? (rl.rlim_cur - reserved) / FDS_PER_CONN : 1;
	if (fit == 0)
		fit = 1;
	if (fit > UINT32_MAX)
		fit = UINT32_MAX;
	*sandbox_cap = fit > 1 ? (uint32_t)(fit / 2) : 1;
	if (want > fit) {
		log_warn("sluiced: max_connections %u lowered to %llu: RLIMIT_NOFILE is %llu, a "
			 "tunnel holds %d descriptors and %llu are kept for the rest",
			 want, (unsigned long long)fit, (unsigned long long)rl.rlim_cur,
			 FDS_PER_CONN, (unsigned long long)reserved);
		want = (uint32_t)fit;
	}
	if (say)
		log_info("sluiced: RLIMIT_NOFILE %llu: at most %u connections, %u per sandbox "
			 "(limits.connections above that is lowered)",
			 (unsigned long long)rl.rlim_cur, want, *sandbox_cap);
	return want;
}

struct broker_limits *broker_limits_new(const struct broker_config *cfg, uint32_t sandbox_conn_cap)
{
	struct broker_limits *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	atomic_init(&l->refs, 1);
	l->max_connections = cfg->max_connections;
	l->sandbox_conn_cap = sandbox_conn_cap;
	l->head_timeout_ms = cfg->head_timeout_ms;
	l->connect_timeout_ms = cfg->connect_timeout_ms;
	l->response_timeout_ms = cfg->response_timeout_ms;
	l->resolve_timeout_ms = cfg->resolve_timeout_ms;
	return l;
}

const struct broker_limits *broker_limits_get(const struct broker_limits *l)
{
	atomic_fetch_add(&((struct broker_limits *)l)->refs, 1);
	return l;
}

void broker_limits_put(const struct broker_limits *l)
{
	if (l && atomic_fetch_sub(&((struct broker_limits *)l)->refs, 1) == 1)
		free((struct broker_limits *)l);
}

/* On a worker: its limits become @arg (a reference the poster took for
 * it); it drops its reference on the old ones. */
static void limits_swap_post(void *arg)
{
	struct worker *w = proxy_cur_worker();
	const struct broker_limits *old;

	if (!w) {
		broker_limits_put(arg);
		return;
	}
	old = w->limits;
	w->limits = arg;
	resolver_set_deadline(w->resolver, w->limits->resolve_timeout_ms);
	broker_limits_put(old);
}

void broker_limits_publish(struct broker *b, struct broker_limits *l)
{
	unsigned i;

	broker_limits_put(b->limits);
	b->limits = l;
	for (i = 0; i < b->n_workers; i++) {
		void *ref = (void *)broker_limits_get(l);

		if (loop_post(b->workers[i].loop, limits_swap_post, ref) < 0) {
			broker_limits_put(ref);
			log_warn("reload: worker %u keeps its old limits and timeouts: %s", i,
				 strerror(ENOMEM));
		}
	}
}

int broker_reload(struct broker *b, struct sl_err *err, char *said, size_t saidlen)
{
	struct broker_config c = b->cfg;
	struct broker_config lc;
	struct broker_limits *limits;
	char now[300], later[300];
	uint32_t cap, max;
	struct sl_err local = { 0 };
	int r;

	if (!err)
		err = &local; /* logged below */
	if (b->config_path) {
		broker_config_defaults(&c);
		r = broker_config_load(b->config_path, &c, err);
		if (r < 0) {
			log_err("reload: configuration refused, the old one stays: %s",
				sl_err_msg(err));
			return r;
		}
		broker_resolve_user(&c);
	}
	/* The workers' limits and timeouts, made before anything changes
	 * (out of memory, nothing does). */
	max = broker_conn_limit_for_fds(b, c.max_connections, false, &cap);
	lc = c;
	lc.max_connections = max;
	limits = broker_limits_new(&lc, cap);
	if (!limits) {
		sl_err_set(err, ENOMEM, "out of memory");
		log_err("reload: out of memory; the old configuration and policies stay");
		return -ENOMEM;
	}
	r = sandbox_reload_all(b->sandboxes, err);
	if (r < 0) {
		log_err("reload: policy refused, every old policy stays: %s", sl_err_msg(err));
		broker_limits_put(limits);
		return r;
	}
	/* The timeouts, max_connections and audit_log take effect now; the
	 * rest on a restart, and the log (and the caller) hear what waits for
	 * one. */
	reload_changes(b, &c, now, sizeof(now));
	restart_only_changes(b, &c, later, sizeof(later));
	if (later[0])
		log_warn("reload: changed, in force after a restart only: %s", later);
	/* b->cfg is the main thread's own; the workers get the limits and
	 * timeouts as one immutable struct (broker_limits_publish()). */
	b->cfg.max_connections = max;
	b->cfg.head_timeout_ms = c.head_timeout_ms;
	b->cfg.audit_fold_ms = c.audit_fold_ms;
	audit_set_fold(c.audit_fold_ms);
	b->cfg.connect_timeout_ms = c.connect_timeout_ms;
	b->cfg.response_timeout_ms = c.response_timeout_ms;
	b->cfg.resolve_timeout_ms = c.resolve_timeout_ms;
	b->cfg.drain_timeout_ms = c.drain_timeout_ms;
	broker_limits_publish(b, limits);
	/* control_group: the callers' check follows now (control.c, on this
	 * thread); the socket's group and mode were set at start-up, when the
	 * broker could still chown it, and follow on a restart. */
	if (strcmp(c.control_group, b->cfg.control_group))
		log_warn("reload: control_group `%s` checked from now on; the control socket's "
			 "group and mode change on a restart",
			 c.control_group);
	memcpy(b->cfg.control_group, c.control_group, sizeof(c.control_group));
	b->cfg.control_gid = c.control_gid;
	if (strcmp(c.audit_log, b->cfg.audit_log)) {
		struct sl_err e = { 0 };

		audit_close();
		if (audit_open(c.audit_log, &e) < 0) {
			log_err("reload: %s; audit goes to stderr", sl_err_msg(&e));
			audit_open("-", NULL);
		}
		snprintf(b->cfg.audit_log, sizeof(b->cfg.audit_log), "%s", c.audit_log);
	} else {
		audit_reopen();
	}
	log_info("reload: configuration and %zu policies in force", sandbox_count(b->sandboxes));
	if (said)
		snprintf(said, saidlen,
			 "configuration: %s\n"
			 "policies: %zu read again, in force\n"
			 "changed, in force now: %s\n"
			 "changed, in force after a restart only: %s\n",
			 b->config_path ? b->config_path : "(defaults, no file)",
			 sandbox_count(b->sandboxes), now[0] ? now : "nothing",
			 later[0] ? later : "nothing");
	return 0;
}

/* `user` not set: the system user `sluice` if there is one, else the
 * fixed ids of config.h (so the broker never stays root by default). */
void broker_resolve_user(struct broker_config *c)
{
	struct passwd pw, *res = NULL;
	char buf[16384];

	/* The key process's likewise: `sluice-keys`, else fixed ids. */
	if (!c->key_user[0]) {
		if (getpwnam_r(BROKER_KEYS_DEFAULT_USER, &pw, buf, sizeof(buf), &res) == 0 && res) {
			c->key_uid = res->pw_uid;
			c->key_gid = res->pw_gid;
			snprintf(c->key_user, sizeof(c->key_user), "%s", BROKER_KEYS_DEFAULT_USER);
		} else {
			c->key_uid = BROKER_KEYS_DEFAULT_UID;
			c->key_gid = BROKER_KEYS_DEFAULT_GID;
			snprintf(c->key_user, sizeof(c->key_user), "%u:%u", BROKER_KEYS_DEFAULT_UID,
				 BROKER_KEYS_DEFAULT_GID);
		}
		res = NULL;
	}
	if (c->user[0])
		return;
	if (getpwnam_r(BROKER_DEFAULT_USER, &pw, buf, sizeof(buf), &res) == 0 && res) {
		c->user_uid = res->pw_uid;
		c->user_gid = res->pw_gid;
		snprintf(c->user, sizeof(c->user), "%s", BROKER_DEFAULT_USER);
		return;
	}
	c->user_uid = BROKER_DEFAULT_UID;
	c->user_gid = BROKER_DEFAULT_GID;
	snprintf(c->user, sizeof(c->user), "%u:%u", BROKER_DEFAULT_UID, BROKER_DEFAULT_GID);
}

void broker_free(struct broker *b)
{
	unsigned i;

	if (!b)
		return;
	for (i = 0; b->workers && i < b->n_workers; i++) {
		struct worker *w = &b->workers[i];

		if (!w->loop)
			continue;
		/* Its loop has stopped: what the drain did not close yet. */
		broker_dns_stop(w);
		proxy_pipes_drop(w);
		resolver_free(w->resolver);
		loop_free(w->loop);
	}
	for (i = 0; b->workers && i < b->n_workers; i++)
		broker_limits_put(b->workers[i].limits);
	free(b->workers);
	broker_limits_put(b->limits);
	sandbox_table_free(b->sandboxes);
	SSL_CTX_free(b->upstream_ctx);
	if (b->signal_ev.fd >= 0)
		close(b->signal_ev.fd);
	loop_free(b->main_loop);
	free(b);
}
