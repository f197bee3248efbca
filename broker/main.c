// SPDX-License-Identifier: MIT
/* sluiced: the broker daemon. Start-up, privilege, workers and signals.
 *
 * Theory of operation: the main thread reads the configuration, restores
 * registrations, binds every socket (control socket, one SO_REUSEPORT proxy
 * listener per worker), then drops every capability and starts the
 * workers. Afterwards it serves the control socket and signals (through a
 * signalfd) on its own loop: SIGHUP reloads, SIGTERM/SIGINT drain. SIGPIPE is
 * ignored: a lost log reader or client is an EPIPE where it is written. */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <pwd.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "broker/audit.h"
#include "broker/broker_internal.h"
#include "broker/creds/creds.h"
#include "broker/isolation.h"
#include "broker/keys/keys.h"
#include "broker/tls/tls.h"
#include "broker/metrics.h"
#include "common/log.h"
#include "common/version.h"

/* Read when no --config is given and the file exists (README, "Run your own"). */
#define SLUICED_DEFAULT_CONFIG "/etc/sluice/sluiced.yaml"

struct broker broker;

static const char *config_path;
static struct loop *main_loop;
static struct ev signal_ev;
static struct timer drain_timer;
static struct timer audit_timer;
static uint64_t drain_deadline;

static void resolve_user(struct broker_config *c);

bool broker_is_local(const struct sl_addr *a, uint16_t port)
{
	size_t i;

	(void)port;
	/* Sandbox gateways live in the pool and come and go with sandboxes. */
	if (addr_in_prefix(a, &broker.cfg.pool_net, broker.cfg.pool_plen))
		return true;
	for (i = 0; i < broker.n_local; i++) {
		if (memcmp(&broker.local[i], a, sizeof(*a)) == 0)
			return true;
	}
	return false;
}

static void collect_local_addresses(void)
{
	struct ifaddrs *ifa, *i;

	broker.n_local = 0;
	if (getifaddrs(&ifa) < 0)
		return;
	for (i = ifa; i && broker.n_local < sizeof(broker.local) / sizeof(broker.local[0]);
	     i = i->ifa_next) {
		if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET ||
				    i->ifa_addr->sa_family == AF_INET6))
			addr_from_sockaddr(i->ifa_addr, &broker.local[broker.n_local++], NULL);
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

static void restart_only_changes(const struct broker_config *n, char *out, size_t len)
{
	const struct broker_config *o = &broker.cfg;
	const struct changed_key k[] = {
		{ "control_socket", strcmp(n->control_socket, o->control_socket) != 0 },
		{ "state_dir", strcmp(n->state_dir, o->state_dir) != 0 },
		{ "sandbox_pool", n->pool_plen != o->pool_plen ||
					  memcmp(&n->pool_net, &o->pool_net, sizeof(n->pool_net)) },
		{ "proxy_port", n->proxy_port != o->proxy_port },
		{ "transparent_port", n->transparent_port != o->transparent_port },
		{ "dns_port", n->dns_port != o->dns_port },
		{ "synthetic_pool", n->synthetic_plen != o->synthetic_plen ||
					    memcmp(&n->synthetic_net, &o->synthetic_net,
						   sizeof(n->synthetic_net)) },
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
static void reload_changes(const struct broker_config *n, char *out, size_t len)
{
	const struct broker_config *o = &broker.cfg;
	const struct changed_key k[] = {
		{ "max_connections", n->max_connections != o->max_connections },
		{ "head_timeout", n->head_timeout_ms != o->head_timeout_ms },
		{ "connect_timeout", n->connect_timeout_ms != o->connect_timeout_ms },
		{ "response_timeout", n->response_timeout_ms != o->response_timeout_ms },
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
 * socket, the audit log, resolver sockets (a few per worker). */
#define FDS_BASE(workers) (64u + (workers) * 16u)
/* Each worker's TCP connections to the DNS filter (256 at most, dns.c). */
#define FDS_DNS_TCP(workers) ((workers) * 256u)

/*
 * @want, or fewer: as many connections as RLIMIT_NOFILE can hold with the
 * broker's other descriptors, so that the connection limit is met before
 * the descriptors run out (running out of descriptors stalls accept(),
 * the sandbox waits; the limit answers at once). Under a small limit the
 * DNS filter's TCP connections get at most half of what the base leaves
 * (beyond that, its accept waits for a descriptor as the proxy's does),
 * so that a broker under 256 descriptors still serves a few connections
 * rather than one. Also sets broker.sandbox_conn_cap, the most
 * connections one sandbox may hold whatever its policy says: half of what
 * the descriptors hold, so that one sandbox cannot take every descriptor
 * from the others. Logs what it derived (@say), and always when it lowers.
 */
static uint32_t conn_limit_for_fds(uint32_t want, bool say)
{
	struct rlimit rl;
	unsigned workers = broker.n_workers ? broker.n_workers : 1;
	uint64_t fit, base = FDS_BASE(workers), dns = FDS_DNS_TCP(workers), reserved;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY) {
		atomic_store_explicit(&broker.sandbox_conn_cap, UINT32_MAX, memory_order_relaxed);
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
	atomic_store_explicit(&broker.sandbox_conn_cap, fit > 1 ? (uint32_t)(fit / 2) : 1,
			      memory_order_relaxed);
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
			 (unsigned long long)rl.rlim_cur, want,
			 atomic_load_explicit(&broker.sandbox_conn_cap, memory_order_relaxed));
	return want;
}

int broker_reload(char *err, size_t errlen, char *said, size_t saidlen)
{
	struct broker_config c = broker.cfg;
	char now[300], later[300];
	int r;

	if (config_path) {
		broker_config_defaults(&c);
		r = broker_config_load(config_path, &c, err, errlen);
		if (r < 0) {
			log_err("reload: configuration refused, the old one stays: %s", err);
			return r;
		}
		resolve_user(&c);
	}
	r = sandbox_reload_all(err, errlen);
	if (r < 0) {
		log_err("reload: policy refused, every old policy stays: %s", err);
		return r;
	}
	/* The timeouts, max_connections and audit_log take effect now; the
	 * rest on a restart, and the log (and the caller) hear what waits for
	 * one. */
	reload_changes(&c, now, sizeof(now));
	restart_only_changes(&c, later, sizeof(later));
	if (later[0])
		log_warn("reload: changed, in force after a restart only: %s", later);
	/* Workers read these as they go (config.h): atomic stores, each on
	 * its own; relaxed, as nothing else is published through them. */
	atomic_store_explicit(&broker.cfg.max_connections, conn_limit_for_fds(c.max_connections, false),
			      memory_order_relaxed);
	atomic_store_explicit(&broker.cfg.head_timeout_ms, c.head_timeout_ms,
			      memory_order_relaxed);
	broker.cfg.audit_fold_ms = c.audit_fold_ms;
	audit_set_fold(c.audit_fold_ms);
	atomic_store_explicit(&broker.cfg.connect_timeout_ms, c.connect_timeout_ms,
			      memory_order_relaxed);
	atomic_store_explicit(&broker.cfg.response_timeout_ms, c.response_timeout_ms,
			      memory_order_relaxed);
	atomic_store_explicit(&broker.cfg.drain_timeout_ms, c.drain_timeout_ms,
			      memory_order_relaxed);
	/* control_group: the callers' check follows now (control.c, on this
	 * thread); the socket's group and mode were set at start-up, when the
	 * broker could still chown it, and follow on a restart. */
	if (strcmp(c.control_group, broker.cfg.control_group))
		log_warn("reload: control_group `%s` checked from now on; the control socket's "
			 "group and mode change on a restart", c.control_group);
	memcpy(broker.cfg.control_group, c.control_group, sizeof(c.control_group));
	broker.cfg.control_gid = c.control_gid;
	if (strcmp(c.audit_log, broker.cfg.audit_log)) {
		char e[300];

		audit_close();
		if (audit_open(c.audit_log, e, sizeof(e)) < 0) {
			log_err("reload: %s; audit goes to stderr", e);
			audit_open("-", e, sizeof(e));
		}
		snprintf(broker.cfg.audit_log, sizeof(broker.cfg.audit_log), "%s", c.audit_log);
	} else {
		audit_reopen();
	}
	log_info("reload: configuration and %zu policies in force", sandbox_count());
	if (said)
		snprintf(said, saidlen,
			 "configuration: %s\n"
			 "policies: %zu read again, in force\n"
			 "changed, in force now: %s\n"
			 "changed, in force after a restart only: %s\n",
			 config_path ? config_path : "(defaults, no file)", sandbox_count(),
			 now[0] ? now : "nothing", later[0] ? later : "nothing");
	return 0;
}

/* Whether the broker becomes cfg.user after start-up: started as root,
 * and the user is not root. Set once, before the opener is forked. */
static bool switching;

/* `user` not set: the system user `sluice` if there is one, else the
 * fixed ids of config.h (so the broker never stays root by default). */
static void resolve_user(struct broker_config *c)
{
	struct passwd pw, *res = NULL;
	char buf[16384];

	/* The key process's likewise: `sluice-keys`, else fixed ids. */
	if (!c->key_user[0]) {
		if (getpwnam_r(BROKER_KEYS_DEFAULT_USER, &pw, buf, sizeof(buf), &res) == 0 &&
		    res) {
			c->key_uid = res->pw_uid;
			c->key_gid = res->pw_gid;
			snprintf(c->key_user, sizeof(c->key_user), "%s", BROKER_KEYS_DEFAULT_USER);
		} else {
			c->key_uid = BROKER_KEYS_DEFAULT_UID;
			c->key_gid = BROKER_KEYS_DEFAULT_GID;
			snprintf(c->key_user, sizeof(c->key_user), "%u:%u",
				 BROKER_KEYS_DEFAULT_UID, BROKER_KEYS_DEFAULT_GID);
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

/*
 * What the broker had as root becomes its user's before it switches: the
 * state directory's tree (an install from before this ran as root and
 * left it root's), and the audit log file. Logged, with how many.
 */
static void take_over_files(void)
{
	const struct broker_config *c = &broker.cfg;
	char err[PATH_MAX + 100];
	struct stat st;
	unsigned n = 0;

	if (isolation_take_over(c->state_dir, c->user_uid, c->user_gid, &n, err, sizeof(err)) < 0)
		die("sluiced: state_dir `%s`: %s", c->state_dir, err);
	if (n)
		log_info("sluiced: state_dir `%s`: %u files and directories taken over by user %s "
			 "(%u:%u)",
			 c->state_dir, n, c->user, (unsigned)c->user_uid, (unsigned)c->user_gid);
	if (err[0])
		log_warn("sluiced: state_dir `%s`: %s", c->state_dir, err);
	/* The audit log: the file, never its directory (often /var/log). A
	 * file with a second name, or reached through a symlink, is left
	 * alone (isolation_give() says why). */
	if (strcmp(c->audit_log, "-") && lstat(c->audit_log, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid != c->user_uid) {
		if (isolation_give(c->audit_log, &st, c->user_uid, c->user_gid) != 2)
			log_warn("sluiced: audit_log `%s` stays owned by uid %u: the broker keeps "
				 "writing to the file it has open, but cannot open it again "
				 "after a rotation",
				 c->audit_log, (unsigned)st.st_uid);
		else
			log_info("sluiced: audit_log `%s` taken over by user %s", c->audit_log,
				 c->user);
	}
}

/*
 * Privilege, in stages:
 *  1. start-up as root (or CAP_NET_BIND_SERVICE when proxy_port < 1024):
 *     fork the opener (isolation.c: what is left of root, a child that
 *     opens root-only policy and secret files read-only and nothing
 *     else), bind the control socket (root's, its mode as README says) and
 *     the listeners;
 *  2. drop_privileges(): make the state directory and the audit log the
 *     broker user's, then become that user (`user`, config.h) with no
 *     supplementary group and no capability in any set: it keeps none. It only
 *     accepts on sockets it holds, connects out (no IP_TRANSPARENT, no
 *     SO_MARK: the transparent path is an nftables redirect read with
 *     SO_ORIGINAL_DST), and writes files it owns in state_dir. Started
 *     unprivileged, or with `user: root`, it keeps its uid and drops every
 *     capability, as before. It is made non-dumpable so its memory
 *     (secrets) never lands in a core, and no-new-privs so nothing it could
 *     exec gains any;
 *     Then the registrations are restored (sandbox_restore(), as that user);
 *  3. confine(): the seccomp allowlist (isolation.c), on every thread: no
 *     exec, ptrace, namespace, mount or bpf call is left to it, nor
 *     setresuid, setgroups and the like: the switch must come before it.
 */
static void drop_privileges(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { { 0 } };
	char err[300];
	int cap;

	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		die("sluiced: prctl(PR_SET_DUMPABLE): %s", strerror(errno));
	if (switching) {
		take_over_files();
		if (isolation_switch_user(broker.cfg.user_uid, broker.cfg.user_gid, err,
					  sizeof(err)) < 0)
			die("sluiced: %s", err);
		log_info("sluiced: running as user %s (%u:%u), no capability", broker.cfg.user,
			 (unsigned)broker.cfg.user_uid, (unsigned)broker.cfg.user_gid);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		die("sluiced: prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
	for (cap = 0; cap <= 63; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL && errno != EPERM)
			break;
	}
	if (syscall(SYS_capset, &hdr, data) < 0)
		die("sluiced: capset: %s", strerror(errno));
}

/* Stage 3, once the registrations are back (as the broker's user: the
 * token fetchers they start must not meet the switch, which each thread
 * would have to make, without the capabilities they dropped). */
static void confine(void)
{
	char err[300];

	if (isolation_seccomp_install(err, sizeof(err)) < 0)
		die("sluiced: %s", err);
}

static int listen_tcp(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 4096) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

/*
 * Whether something already holds @port (TCP listening, or UDP bound) on
 * this namespace's addresses. The listeners are SO_REUSEPORT, so a second
 * broker's would silently join the first's and take about half of the
 * sandboxes' connections (refused there as unknown-source): a bind
 * without SO_REUSEPORT fails where any socket holds the port, and is the
 * test. SO_REUSEADDR for TCP only, so that a port in TIME_WAIT (a broker
 * just restarted) does not count; on UDP it would let the bind share the
 * port with the other broker's socket, which has it too.
 * Return: 0 free, -EADDRINUSE taken, another negative errno on failure.
 */
static int port_taken(int type, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd, one = 1, r = 0;

	fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if ((type == SOCK_STREAM &&
	     setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* Refuses to start (die()) when another process holds one of the ports. */
static void check_ports_free(void)
{
	const struct {
		const char *key;
		int type;
		uint16_t port;
	} p[] = {
		{ "proxy_port", SOCK_STREAM, broker.cfg.proxy_port },
		{ "transparent_port", SOCK_STREAM, broker.cfg.transparent_port },
		{ "dns_port", SOCK_STREAM, broker.cfg.dns_port },
		{ "dns_port", SOCK_DGRAM, broker.cfg.dns_port },
	};
	size_t i;
	int r;

	for (i = 0; i < sizeof(p) / sizeof(p[0]); i++) {
		r = port_taken(p[i].type, p[i].port);
		if (r == -EADDRINUSE)
			die("sluiced: %s %u (%s) is taken in this network namespace, by another "
			    "sluiced? Stop it, or give this one ports of its own",
			    p[i].key, p[i].port, p[i].type == SOCK_STREAM ? "TCP" : "UDP");
		if (r < 0)
			die("sluiced: %s %u: %s", p[i].key, p[i].port, strerror(-r));
	}
}

/*
 * One broker per state_dir: a second would restore the same
 * registrations and hand out the same addresses. An flock on
 * state_dir/.sluiced.lock (a dot file: restore reads no such name), held
 * until the broker exits however it exits: the descriptor is never
 * closed. The file holds the holder's pid, for the message.
 */
static void lock_state_dir(const char *dir)
{
	char path[300], pid[24] = "";
	ssize_t n;
	int fd, e;

	snprintf(path, sizeof(path), "%s/.sluiced.lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		die("sluiced: state_dir lock `%s`: %s", path, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		e = errno;
		n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		if (e == EWOULDBLOCK)
			die("sluiced: another sluiced%s%s%s uses state_dir `%s`: stop it, or give "
			    "this one a state_dir, control_socket and ports of its own",
			    pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "", dir);
		die("sluiced: state_dir lock `%s`: %s", path, strerror(e));
	}
	n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		log_warn("sluiced: cannot write the pid into `%s`", path);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	proxy_set_worker(w);
	/* Audit lines go out a loop iteration at a time (audit_defer()). */
	audit_defer(true);
	loop_set_idle(w->loop, audit_flush);
	loop_run(w->loop);
	proxy_close_all(w);
	audit_defer(false); /* and the lines of the connections just closed */
	return NULL;
}

static void stop_listening(void *arg)
{
	struct worker *w = arg;

	struct ev *evs[] = { &w->proxy_ev, &w->transparent_ev };
	size_t i;

	for (i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
		if (evs[i]->fd >= 0) {
			loop_del(w->loop, evs[i]);
			close(evs[i]->fd);
			evs[i]->fd = -1;
		}
	}
	dns_server_stop(w);
}

static void on_drain_timer(struct timer *t)
{
	unsigned open = atomic_load(&broker.total_conns);

	if (open == 0 || loop_now_ms(main_loop) >= drain_deadline) {
		if (open)
			log_warn("drain: closing %u connections still open", open);
		loop_stop(main_loop);
		return;
	}
	loop_timer_arm(main_loop, t, 100);
}

/* Writes the audit log's folded and dropped counts whose interval ended. */
static void on_audit_timer(struct timer *t)
{
	audit_tick();
	loop_timer_arm(main_loop, t, 1000);
}

static void on_signal(struct ev *ev, uint32_t events)
{
	struct signalfd_siginfo si;
	char err[700];
	unsigned i;

	(void)events;
	while (read(ev->fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			broker_reload(err, sizeof(err), NULL, 0);
			continue;
		}
		if (atomic_exchange(&broker.draining, true))
			continue;
		log_info("sluiced: draining (at most %u ms)", broker.cfg.drain_timeout_ms);
		for (i = 0; i < broker.n_workers; i++)
			loop_post(broker.workers[i].loop, stop_listening, &broker.workers[i]);
		control_stop();
		unlink(broker.cfg.control_socket);
		drain_deadline = loop_now_ms(main_loop) + broker.cfg.drain_timeout_ms;
		drain_timer.cb = on_drain_timer;
		loop_timer_arm(main_loop, &drain_timer, 0);
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: sluiced [--config FILE] [--check-config] [--verbose] [--version]\n"
		   "  foreground; logs to stderr; SIGHUP reloads; SIGTERM drains\n"
		   "  --config FILE   default " SLUICED_DEFAULT_CONFIG " when it exists, else the\n"
		   "                  built-in defaults (see sluiced(8))\n"
		   "  --check-config  read the configuration, say whether it is valid, exit\n");
}

int main(int argc, char **argv)
{
	struct rlimit rl;
	sigset_t mask;
	char err[700];
	unsigned i, n;
	bool check_only = false;
	int r, fd;

	/* Before anything can write to stderr: a log whose reader went away
	 * must not stop the broker (common/log.c), and sockets and pipes
	 * report EPIPE where they are written. */
	signal(SIGPIPE, SIG_IGN);
	broker_config_defaults(&broker.cfg);
	for (i = 1; i < (unsigned)argc; i++) {
		if (!strcmp(argv[i], "--config") && i + 1 < (unsigned)argc) {
			config_path = argv[++i];
		} else if (!strcmp(argv[i], "--check-config")) {
			check_only = true;
		} else if (!strcmp(argv[i], "--verbose")) {
			log_threshold = LOG_LVL_DEBUG;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--version")) {
			printf("sluiced %s\n", sluice_version);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	/* The default file is taken when it exists at all: one that is there
	 * but unreadable is an error below, not a silent fall-back to the
	 * defaults. */
	if (!config_path && access(SLUICED_DEFAULT_CONFIG, F_OK) == 0)
		config_path = SLUICED_DEFAULT_CONFIG;
	if (config_path &&
	    broker_config_load(config_path, &broker.cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (check_only) {
		if (config_path)
			printf("%s: ok\n", config_path);
		else
			printf("no %s and no --config: the built-in defaults are used: ok\n",
			       SLUICED_DEFAULT_CONFIG);
		return 0;
	}
	/* What the broker creates is its own: keys and registrations are
	 * 0600 by their writers, nothing is ever world-readable. */
	umask(027);
	resolve_user(&broker.cfg);
	switching = getuid() == 0 && broker.cfg.user_uid != 0;
	if (getuid() == 0 && !switching)
		log_warn("sluiced: user %s: the broker stays uid 0 (without capabilities) after "
			 "start-up; give it a user of its own (`user` in sluiced.yaml)",
			 broker.cfg.user);
	/* Now, while this is the only thread (fork), and root. */
	if (switching && isolation_opener_start(err, sizeof(err)) < 0)
		die("sluiced: %s", err);
	audit_set_fold(broker.cfg.audit_fold_ms);
	if (audit_open(broker.cfg.audit_log, err, sizeof(err)) < 0)
		die("sluiced: %s", err);
	r = sandbox_table_init(&broker.cfg);
	if (r < 0)
		die("sluiced: state_dir `%s`: %s", broker.cfg.state_dir, strerror(-r));
	lock_state_dir(broker.cfg.state_dir);
	/* The CA keys' process (broker/keys/): still one thread and root, and
	 * the state_dir is ours (it takes over the keys an older broker left
	 * there). Without a switch the keys stay here, as before. */
	if (switching) {
		if (broker.cfg.key_uid == broker.cfg.user_uid || broker.cfg.key_uid == 0)
			die("sluiced: key_user %s: must be neither root nor the broker's user %s",
			    broker.cfg.key_user, broker.cfg.user);
		if (keys_start(broker.cfg.state_dir, broker.cfg.key_uid, broker.cfg.key_gid, err,
			       sizeof(err)) < 0)
			die("sluiced: %s", err);
		log_info("sluiced: CA keys held by sluiced-keys (pid %d) as user %s (%u:%u)",
			 (int)keys_pid(), broker.cfg.key_user, (unsigned)broker.cfg.key_uid,
			 (unsigned)broker.cfg.key_gid);
	}
	/* Before the control socket, which a refused broker must not touch. */
	check_ports_free();
	/* Intercepted connections' upstream side; read before privileges go. */
	broker.upstream_ctx = tls_upstream_ctx(broker.cfg.upstream_ca, err, sizeof(err));
	if (!broker.upstream_ctx)
		die("sluiced: upstream_ca: %s", err);
	collect_local_addresses();

	/* Signals are taken by the main loop's signalfd; workers never see them. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);

	/* Connections and tunnel pipes need file descriptors: take the hard limit. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}

	main_loop = loop_new();
	if (!main_loop)
		die("sluiced: loop: %s", strerror(errno));
	r = control_start(main_loop, broker.cfg.control_socket);
	if (r == -EADDRINUSE)
		die("sluiced: control socket `%s`: another sluiced answers on it: stop it, or give "
		    "this one a control_socket of its own",
		    broker.cfg.control_socket);
	if (r < 0)
		die("sluiced: control socket `%s`: %s", broker.cfg.control_socket, strerror(-r));

	n = broker.cfg.workers ? broker.cfg.workers : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	if (n == 0)
		n = 1;
	broker.workers = calloc(n, sizeof(*broker.workers));
	if (!broker.workers)
		die("sluiced: out of memory");
	broker.n_workers = n;
	broker.cfg.max_connections = conn_limit_for_fds(broker.cfg.max_connections, true);
	for (i = 0; i < n; i++) {
		struct worker *w = &broker.workers[i];

		w->id = i;
		w->loop = loop_new();
		if (!w->loop)
			die("sluiced: loop: %s", strerror(errno));
		w->resolver = resolver_new(w->loop, broker.cfg.upstream_resolvers,
					   broker.cfg.dns_cache_size, err, sizeof(err));
		if (!w->resolver)
			die("sluiced: resolver: %s", err);
		fd = listen_tcp(broker.cfg.proxy_port);
		if (fd < 0)
			die("sluiced: proxy port %u: %s", broker.cfg.proxy_port, strerror(-fd));
		w->proxy_ev.fd = fd;
		w->proxy_ev.cb = proxy_accept;
		loop_add(w->loop, &w->proxy_ev, EPOLLIN);
		fd = listen_tcp(broker.cfg.transparent_port);
		if (fd < 0)
			die("sluiced: transparent port %u: %s", broker.cfg.transparent_port,
			    strerror(-fd));
		w->transparent_ev.fd = fd;
		w->transparent_ev.cb = proxy_accept_transparent;
		loop_add(w->loop, &w->transparent_ev, EPOLLIN);
		r = dns_server_start(w);
		if (r < 0)
			die("sluiced: dns port %u: %s", broker.cfg.dns_port, strerror(-r));
	}
	drop_privileges();
	/* Registrations come back before anything is accepted, read by the
	 * broker's user from the state_dir just taken over. */
	sandbox_restore(err, sizeof(err));
	/* Last: what is left of the kernel to ask for (isolation.c). */
	confine();

	for (i = 0; i < n; i++) {
		if (pthread_create(&broker.workers[i].thread, NULL, worker_main, &broker.workers[i]))
			die("sluiced: cannot start worker %u", i);
	}
	fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		die("sluiced: signalfd: %s", strerror(errno));
	signal_ev.fd = fd;
	signal_ev.cb = on_signal;
	loop_add(main_loop, &signal_ev, EPOLLIN);
	audit_timer.cb = on_audit_timer;
	loop_timer_arm(main_loop, &audit_timer, 1000);
	log_info("sluiced %s: ready: config %s, %u workers, proxy port %u, control %s, "
		 "%zu sandboxes",
		 sluice_version, config_path ? config_path : "(built-in defaults)", n,
		 broker.cfg.proxy_port, broker.cfg.control_socket, sandbox_count());

	loop_run(main_loop);

	for (i = 0; i < n; i++)
		loop_stop(broker.workers[i].loop);
	for (i = 0; i < n; i++)
		pthread_join(broker.workers[i].thread, NULL);
	control_shutdown();
	creds_shutdown(); /* the token fetcher stops; its tokens are wiped */
	log_info("sluiced: stopped");
	audit_close();
	return 0;
}
