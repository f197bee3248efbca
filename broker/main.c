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
#include "common/err.h"
#include "common/file.h"
#include "common/log.h"
#include "common/version.h"

/* Read when no --config is given and the file exists (README, "Run your own"). */
#define SLUICED_DEFAULT_CONFIG "/etc/sluice/sluiced.yaml"

/*
 * What the broker had as root becomes its user's before it switches: the
 * state directory's tree (an install from before this ran as root and
 * left it root's), and the audit log file. Logged, with how many.
 */
static void take_over_files(const struct broker *b)
{
	const struct broker_config *c = &b->cfg;
	struct sl_err err = { 0 };
	struct stat st;
	unsigned n = 0;

	if (isolation_take_over(c->state_dir, c->user_uid, c->user_gid, &n, &err) < 0)
		die("sluiced: state_dir `%s`: %s", c->state_dir, sl_err_msg(&err));
	if (n)
		log_info("sluiced: state_dir `%s`: %u files and directories taken over by user %s "
			 "(%u:%u)",
			 c->state_dir, n, c->user, (unsigned)c->user_uid, (unsigned)c->user_gid);
	if (sl_err_msg(&err)[0])
		log_warn("sluiced: state_dir `%s`: %s", c->state_dir, sl_err_msg(&err));
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
 *     opens root-only policy and secret files read-only, and a
 *     control_group member's as that member, and nothing else), bind the control socket (root's, its mode as README says) and
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
 *     Then the registrations are restored (sandbox_restore(b->sandboxes), as that user);
 *  3. confine(): the seccomp allowlist (isolation.c), on every thread: no
 *     exec, ptrace, namespace, mount or bpf call is left to it, nor
 *     setresuid, setgroups and the like: the switch must come before it.
 */
static void drop_privileges(const struct broker *b)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { { 0 } };
	struct sl_err err = { 0 };
	int cap;

	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		die("sluiced: prctl(PR_SET_DUMPABLE): %s", strerror(errno));
	if (b->switching) {
		take_over_files(b);
		if (isolation_switch_user(b->cfg.user_uid, b->cfg.user_gid, &err) < 0)
			die("sluiced: %s", sl_err_msg(&err));
		log_info("sluiced: running as user %s (%u:%u), no capability", b->cfg.user,
			 (unsigned)b->cfg.user_uid, (unsigned)b->cfg.user_gid);
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

/* The broker's spare inodes, as its user (common/file.c): a state file
 * removed becomes the next one made. Without them it works as before. */
static void spare_start(const struct broker *b)
{
	char path[PATH_MAX];
	int r;

	if (snprintf(path, sizeof(path), "%s/" FILE_SPARE_DIR, b->cfg.state_dir) >=
	    (int)sizeof(path))
		return;
	r = file_spare_init_at(AT_FDCWD, path);
	if (r < 0)
		log_warn("sluiced: %s: %s; state files are made afresh each time", path,
			 strerror(-r));
}

/* Stage 3, once the registrations are back (as the broker's user: the
 * token fetchers they start must not meet the switch, which each thread
 * would have to make, without the capabilities they dropped). */
static void confine(void)
{
	struct sl_err err = { 0 };

	if (isolation_seccomp_install(&err) < 0)
		die("sluiced: %s", sl_err_msg(&err));
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
static void check_ports_free(const struct broker *b)
{
	const struct {
		const char *key;
		int type;
		uint16_t port;
	} p[] = {
		{ "proxy_port", SOCK_STREAM, b->cfg.proxy_port },
		{ "transparent_port", SOCK_STREAM, b->cfg.transparent_port },
		{ "dns_port", SOCK_STREAM, b->cfg.dns_port },
		{ "dns_port", SOCK_DGRAM, b->cfg.dns_port },
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
	broker_dns_stop(w);
}

static void on_drain_timer(struct timer *t)
{
	struct broker *b = container_of(t, struct broker, drain_timer);
	unsigned open = atomic_load(&b->total_conns);

	if (open == 0 || loop_now_ms(b->main_loop) >= b->drain_deadline) {
		if (open)
			log_warn("drain: closing %u connections still open", open);
		loop_stop(b->main_loop);
		return;
	}
	loop_timer_arm(b->main_loop, t, 100);
}

/* Writes the audit log's folded and dropped counts whose interval ended. */
static void on_audit_timer(struct timer *t)
{
	struct broker *b = container_of(t, struct broker, audit_timer);

	audit_tick();
	loop_timer_arm(b->main_loop, t, 1000);
}

static void on_signal(struct ev *ev, uint32_t events)
{
	struct broker *b = container_of(ev, struct broker, signal_ev);
	struct signalfd_siginfo si;
	struct sl_err err = { 0 };
	unsigned i;

	(void)events;
	while (read(ev->fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			broker_reload(b, &err, NULL, 0);
			continue;
		}
		if (atomic_exchange(&b->draining, true))
			continue;
		log_info("sluiced: draining (at most %u ms)", b->cfg.drain_timeout_ms);
		for (i = 0; i < b->n_workers; i++)
			loop_post(b->workers[i].loop, stop_listening, &b->workers[i]);
		control_stop(b->control);
		unlink(b->cfg.control_socket);
		b->drain_deadline = loop_now_ms(b->main_loop) + b->cfg.drain_timeout_ms;
		b->drain_timer.cb = on_drain_timer;
		loop_timer_arm(b->main_loop, &b->drain_timer, 0);
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
	/* The broker's state, passed to what needs it; never freed: the
	 * process ends with it. */
	struct broker *b;
	struct rlimit rl;
	sigset_t mask;
	struct sl_err e = { 0 };
	unsigned i, n;
	uint32_t cap;
	bool check_only = false;
	int r, fd;

	/* Before anything can write to stderr: a log whose reader went away
	 * must not stop the broker (common/log.c), and sockets and pipes
	 * report EPIPE where they are written. */
	signal(SIGPIPE, SIG_IGN);
	b = calloc(1, sizeof(*b));
	if (!b) {
		fprintf(stderr, "sluiced: out of memory\n");
		return 1;
	}
	b->signal_ev.fd = -1;
	broker_config_defaults(&b->cfg);
	for (i = 1; i < (unsigned)argc; i++) {
		if (!strcmp(argv[i], "--config") && i + 1 < (unsigned)argc) {
			b->config_path = argv[++i];
		} else if (!strcmp(argv[i], "--check-config")) {
			check_only = true;
		} else if (!strcmp(argv[i], "--verbose")) {
			log_threshold = LOG_LVL_DEBUG;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			broker_free(b);
			return 0;
		} else if (!strcmp(argv[i], "--version")) {
			printf("sluiced %s\n", sluice_version);
			broker_free(b);
			return 0;
		} else {
			usage(stderr);
			broker_free(b);
			return 2;
		}
	}
	/* The default file is taken when it exists at all: one that is there
	 * but unreadable is an error below, not a silent fall-back to the
	 * defaults. */
	if (!b->config_path && access(SLUICED_DEFAULT_CONFIG, F_OK) == 0)
		b->config_path = SLUICED_DEFAULT_CONFIG;
	if (b->config_path && broker_config_load(b->config_path, &b->cfg, &e) < 0) {
		fprintf(stderr, "%s\n", sl_err_msg(&e));
		broker_free(b);
		return 1;
	}
	if (check_only) {
		if (b->config_path)
			printf("%s: ok\n", b->config_path);
		else
			printf("no %s and no --config: the built-in defaults are used: ok\n",
			       SLUICED_DEFAULT_CONFIG);
		broker_free(b);
		return 0;
	}
	/* What the broker creates is its own: keys and registrations are
	 * 0600 by their writers, nothing is ever world-readable. */
	umask(027);
	broker_resolve_user(&b->cfg);
	b->switching = getuid() == 0 && b->cfg.user_uid != 0;
	if (getuid() == 0 && !b->switching)
		log_warn("sluiced: user %s: the broker stays uid 0 (without capabilities) after "
			 "start-up; give it a user of its own (`user` in sluiced.yaml)",
			 b->cfg.user);
	/* Now, while this is the only thread (fork), and root: also when the
	 * broker stays uid 0, for what it reads as a control_group member. */
	if (getuid() == 0 && isolation_opener_start(&e) < 0)
		die("sluiced: %s", sl_err_msg(&e));
	audit_set_fold(b->cfg.audit_fold_ms);
	if (audit_open(b->cfg.audit_log, &e) < 0)
		die("sluiced: %s", sl_err_msg(&e));
	r = sandbox_table_new(&b->cfg, &b->sandboxes);
	if (r < 0)
		die("sluiced: state_dir `%s`: %s", b->cfg.state_dir, strerror(-r));
	lock_state_dir(b->cfg.state_dir);
	/* The CA keys' process (broker/keys/): still one thread and root, and
	 * the state_dir is ours (it takes over the keys an older broker left
	 * there). Without a switch the keys stay here, as before. */
	if (b->switching) {
		if (b->cfg.key_uid == b->cfg.user_uid || b->cfg.key_uid == 0)
			die("sluiced: key_user %s: must be neither root nor the broker's user %s",
			    b->cfg.key_user, b->cfg.user);
		if (keys_start(b->cfg.state_dir, b->cfg.key_uid, b->cfg.key_gid, &e) < 0)
			die("sluiced: %s", sl_err_msg(&e));
		log_info("sluiced: CA keys held by sluiced-keys (pid %d) as user %s (%u:%u)",
			 (int)keys_pid(), b->cfg.key_user, (unsigned)b->cfg.key_uid,
			 (unsigned)b->cfg.key_gid);
	}
	/* Before the control socket, which a refused broker must not touch. */
	check_ports_free(b);
	/* Intercepted connections' upstream side; read before privileges go. */
	b->upstream_ctx = tls_upstream_ctx(b->cfg.upstream_ca, &e);
	if (!b->upstream_ctx)
		die("sluiced: upstream_ca: %s", sl_err_msg(&e));
	broker_collect_local_addresses(b);

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

	b->main_loop = loop_new();
	if (!b->main_loop)
		die("sluiced: loop: %s", strerror(errno));
	r = control_start(b);
	if (r == -EADDRINUSE)
		die("sluiced: control socket `%s`: another sluiced answers on it: stop it, or give "
		    "this one a control_socket of its own",
		    b->cfg.control_socket);
	if (r < 0)
		die("sluiced: control socket `%s`: %s", b->cfg.control_socket, strerror(-r));

	n = b->cfg.workers ? b->cfg.workers : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	if (n == 0)
		n = 1;
	b->workers = calloc(n, sizeof(*b->workers));
	if (!b->workers)
		die("sluiced: out of memory");
	b->n_workers = n;
	sandbox_table_set_workers(b->sandboxes, b->workers, n);
	b->cfg.max_connections = broker_conn_limit_for_fds(b, b->cfg.max_connections, true, &cap);
	b->limits = broker_limits_new(&b->cfg, cap);
	if (!b->limits)
		die("sluiced: out of memory");
	for (i = 0; i < n; i++) {
		struct worker *w = &b->workers[i];

		w->b = b;
		w->id = i;
		w->limits = broker_limits_get(b->limits);
		w->loop = loop_new();
		if (!w->loop)
			die("sluiced: loop: %s", strerror(errno));
		w->resolver =
			resolver_new(w->loop, b->cfg.upstream_resolvers, b->cfg.dns_cache_size, &e);
		if (!w->resolver)
			die("sluiced: resolver: %s", sl_err_msg(&e));
		resolver_set_deadline(w->resolver, b->cfg.resolve_timeout_ms);
		fd = listen_tcp(b->cfg.proxy_port);
		if (fd < 0)
			die("sluiced: proxy port %u: %s", b->cfg.proxy_port, strerror(-fd));
		w->proxy_ev.fd = fd;
		w->proxy_ev.cb = proxy_accept;
		loop_add(w->loop, &w->proxy_ev, EPOLLIN);
		fd = listen_tcp(b->cfg.transparent_port);
		if (fd < 0)
			die("sluiced: transparent port %u: %s", b->cfg.transparent_port,
			    strerror(-fd));
		w->transparent_ev.fd = fd;
		w->transparent_ev.cb = proxy_accept_transparent;
		loop_add(w->loop, &w->transparent_ev, EPOLLIN);
		r = broker_dns_start(w);
		if (r < 0)
			die("sluiced: dns port %u: %s", b->cfg.dns_port, strerror(-r));
	}
	drop_privileges(b);
	spare_start(b);
	/* Registrations come back before anything is accepted, read by the
	 * broker's user from the state_dir just taken over; it logs each one
	 * it cannot restore (its result is not used, as before). */
	sandbox_restore(b->sandboxes, NULL);
	/* Last: what is left of the kernel to ask for (isolation.c). */
	confine();

	for (i = 0; i < n; i++) {
		if (pthread_create(&b->workers[i].thread, NULL, worker_main, &b->workers[i]))
			die("sluiced: cannot start worker %u", i);
	}
	fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		die("sluiced: signalfd: %s", strerror(errno));
	b->signal_ev.fd = fd;
	b->signal_ev.cb = on_signal;
	loop_add(b->main_loop, &b->signal_ev, EPOLLIN);
	b->audit_timer.cb = on_audit_timer;
	loop_timer_arm(b->main_loop, &b->audit_timer, 1000);
	log_info("sluiced %s: ready: config %s, %u workers, proxy port %u, control %s, "
		 "%zu sandboxes",
		 sluice_version, b->config_path ? b->config_path : "(built-in defaults)", n,
		 b->cfg.proxy_port, b->cfg.control_socket, sandbox_count(b->sandboxes));

	loop_run(b->main_loop);

	for (i = 0; i < n; i++)
		loop_stop(b->workers[i].loop);
	for (i = 0; i < n; i++)
		pthread_join(b->workers[i].thread, NULL);
	control_shutdown(b->control);
	b->control = NULL;
	creds_shutdown(); /* the token fetcher stops; its tokens are wiped */
	log_info("sluiced: stopped");
	audit_close();
	broker_free(b);
	return 0;
}
