// SPDX-License-Identifier: MIT
/* The control socket: a unix stream socket (mode 0600, or 0660 with
 * control_group) on which `sluice` registers and unregisters sandboxes,
 * lists them, reads counters and asks for a reload. One request line per
 * connection, answered with "ok" and a body, or "error: message". Runs on
 * the main thread, never on a worker.
 *
 * Theory of operation: who may ask. A sandbox is hostile and may be root
 * in its network namespace, and root there shares the host's files (`ip
 * netns exec`), the socket's included; so neither the socket's mode nor
 * the caller's uid tells a sandbox from its operator. Each caller is
 * checked twice before its request runs: its credentials (SO_PEERCRED,
 * SO_PEERGROUPS: uid 0, the broker's own uid, or holding control_group),
 * and its network namespace, which must not be a registered sandbox's.
 * A refusal is answered with the reason and audited (`control-refused`);
 * every request that changes something is audited with who asked.
 *
 * The namespace: the broker has no capability left when it answers (see
 * main.c), and /proc/PID/ns/net of a caller that holds capabilities, or
 * runs under another uid, needs ptrace access the broker no longer has
 * (EACCES). What needs no privilege is rtnetlink, in the broker's own
 * namespace: RTM_GETNSID names the namespace of a pid by the id the
 * broker's namespace gives it (none: no link of the broker's namespace
 * leads there, so it is no sandbox's), and each sandbox's wire (a veth
 * whose broker end holds the sandbox's gateway address, on the broker's
 * side where the sandbox cannot touch it) carries the id of the sandbox's
 * namespace (IFLA_LINK_NETNSID; dumping links assigns it), learnt by a
 * scan that is redone only when sandboxes come or go (`seen` below). The pid is
 * pinned by a pidfd (SO_PEERPIDFD, else pidfd_open) and the process must
 * still be alive after the lookup, so that a pid reused meanwhile is not
 * the one looked up. Anything that cannot be determined refuses, a
 * caller from a namespace with an id while some sandbox's wire cannot be
 * found included. */
#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/net_namespace.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "broker/audit.h"
#include "broker/broker_internal.h"
#include "broker/tlsca.h"
#include "broker/metrics.h"
#include "common/log.h"
#include "policy/policy.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* Linux 5.3 */
#endif

#define REQ_MAX 4096
#define RESP_MAX (1 << 20)

int control_open(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	size_t plen = strlen(path);
	int fd, e;
	mode_t old;

	if (plen >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	memcpy(sun.sun_path, path, plen + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A stale socket from a previous run; a live broker would answer. */
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0) {
		close(fd);
		return -EADDRINUSE;
	}
	unlink(path);
	old = umask(0177);
	e = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	/* With control_group, its members must be able to connect: the
	 * socket's group becomes it, before privileges drop (a chown to a
	 * group the broker is not in needs CAP_CHOWN). The peer checks below
	 * still decide; the mode only keeps everyone else off. */
	if (e == 0) {
		bool group = broker.cfg.control_group[0] != '\0';

		if ((group && chown(path, (uid_t)-1, broker.cfg.control_gid) < 0) ||
		    chmod(path, group ? 0660 : 0600) < 0)
			e = -1;
	}
	if (e < 0 || listen(fd, 64) < 0) {
		e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

/* Who is on the other end of a control connection. */
struct peer {
	struct ucred cred;			/* pid 0 when not visible from here */
	char sandbox[SANDBOX_NAME_MAX + 1];	/* the sandbox it is in; "" none */
};

/* One rtnetlink request on @nl; each answer message goes to @cb. */
/* Does @buf hold the end of a dump (NLMSG_DONE, or an error)? */
static bool dump_ends(const char *buf, ssize_t len)
{
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf;
	int n = (int)len;

	for (; mnl_nlmsg_ok(nlh, n); nlh = mnl_nlmsg_next(nlh, &n))
		if (nlh->nlmsg_type == NLMSG_DONE || nlh->nlmsg_type == NLMSG_ERROR)
			return true;
	return false;
}

/*
 * Sends @nlh and runs @cb on the answer. Return: 0; -EINTR when a dump
 * changed while the kernel made it (NLM_F_DUMP_INTR: links came or went,
 * as they do while sandboxes are created and deleted): the rest of it is
 * read and dropped, so that the socket can be used again, and the caller
 * dumps again; another negative errno.
 */
static int rtnl_talk(struct mnl_socket *nl, struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	unsigned portid = mnl_socket_get_portid(nl);
	uint32_t seq = nlh->nlmsg_seq;
	bool intr = false;
	int r = 1, guard;
	ssize_t k;

	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	/* Bounded: a dump of every link and address a broker can hold
	 * (a few per sandbox) is far below this many reads. */
	for (guard = 0; r > 0 && guard < 100000; guard++) {
		k = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (k < 0)
			return -errno;
		if (intr) {
			r = dump_ends(buf, k) ? 0 : 1;
			continue;
		}
		r = mnl_cb_run(buf, (size_t)k, seq, portid, cb, data);
		if (r < 0 && errno == EINTR) {
			intr = true;
			r = dump_ends(buf, k) ? 0 : 1;
		}
	}
	if (r < 0)
		return -errno;
	if (r > 0)
		return -EOVERFLOW;
	return intr ? -EINTR : 0;
}

struct nsid_answer {
	int32_t nsid;
	bool got;
};

static int nsid_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nsid_answer *a = data;
	struct nlattr *at;

	if (nlh->nlmsg_type != RTM_NEWNSID)
		return MNL_CB_OK;
	mnl_attr_for_each(at, nlh, sizeof(struct rtgenmsg)) {
		if (mnl_attr_get_type(at) == NETNSA_NSID &&
		    mnl_attr_validate(at, MNL_TYPE_U32) == 0) {
			a->nsid = (int32_t)mnl_attr_get_u32(at);
			a->got = true;
		}
	}
	return MNL_CB_OK;
}

/* The id the broker's namespace gives the network namespace of @pid, into
 * *@nsid (NETNSA_NSID_NOT_ASSIGNED: none). */
static int pid_nsid(struct mnl_socket *nl, pid_t pid, uint32_t seq, int32_t *nsid)
{
	char buf[256];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct rtgenmsg *g;
	struct nsid_answer a = { 0 };
	int r;

	nlh->nlmsg_type = RTM_GETNSID;
	/* The ACK ends the answer (one message, no NLMSG_DONE). */
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->rtgen_family = AF_UNSPEC;
	mnl_attr_put_u32(nlh, NETNSA_PID, (uint32_t)pid);
	r = rtnl_talk(nl, nlh, nsid_cb, &a);
	if (r < 0)
		return r;
	if (!a.got)
		return -EPROTO;
	*nsid = a.nsid;
	return 0;
}

/*
 * What the last scan of the broker's links learned: the namespace id each
 * sandbox's wire leads to. A namespace keeps its id while it lives, so the
 * scan is redone only when sandboxes come or go (register, unregister,
 * reload: control_changed()) or when it missed a sandbox (one registered
 * but not wired yet, or whose wire is gone); otherwise a caller costs one
 * RTM_GETNSID, with thousands of sandboxes as with one. Main thread only.
 */
struct wire {
	int ifindex;
	int32_t nsid;
};

struct known {
	int32_t nsid;
	char name[SANDBOX_NAME_MAX + 1];
};

static struct {
	struct wire *wires; /* during a scan: links that lead elsewhere */
	size_t n_wires, cap_wires;
	struct known *v;
	size_t n, cap;
	bool valid;    /* no sandbox came or went since */
	bool complete; /* every registered sandbox's wire was found */
} seen;

#define WIRES_MAX (4 * (size_t)SANDBOX_MAX)

static void control_changed(void)
{
	seen.valid = false;
}

static int link_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	struct nlattr *at;

	(void)data;
	if (nlh->nlmsg_type != RTM_NEWLINK)
		return MNL_CB_OK;
	mnl_attr_for_each(at, nlh, sizeof(*ifi)) {
		if (mnl_attr_get_type(at) != IFLA_LINK_NETNSID ||
		    mnl_attr_validate(at, MNL_TYPE_U32) < 0)
			continue;
		if (seen.n_wires == seen.cap_wires) {
			size_t cap = seen.cap_wires ? 2 * seen.cap_wires : 256;
			struct wire *w;

			if (cap > WIRES_MAX || !(w = realloc(seen.wires, cap * sizeof(*w)))) {
				errno = ENOMEM;
				return MNL_CB_ERROR;
			}
			seen.wires = w;
			seen.cap_wires = cap;
		}
		seen.wires[seen.n_wires].ifindex = ifi->ifi_index;
		seen.wires[seen.n_wires++].nsid = (int32_t)mnl_attr_get_u32(at);
	}
	return MNL_CB_OK;
}

static int wire_cmp(const void *a, const void *b)
{
	const struct wire *x = a, *y = b;

	return (x->ifindex > y->ifindex) - (x->ifindex < y->ifindex);
}

/* An IPv4 address on a wire: a sandbox registered at another address of
 * its /30 or /31 (the pool's blocks) is the sandbox at the far end. */
static int addr_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
	struct wire key = { .ifindex = (int)ifa->ifa_index }, *w;
	struct nlattr *at;
	uint32_t local = 0, net, h;
	bool have = false;

	(void)data;
	if (nlh->nlmsg_type != RTM_NEWADDR || ifa->ifa_family != AF_INET ||
	    ifa->ifa_prefixlen < 30 || ifa->ifa_prefixlen > 31)
		return MNL_CB_OK;
	w = seen.n_wires ? bsearch(&key, seen.wires, seen.n_wires, sizeof(*w), wire_cmp) : NULL;
	if (!w)
		return MNL_CB_OK;
	mnl_attr_for_each(at, nlh, sizeof(*ifa)) {
		if ((mnl_attr_get_type(at) == IFA_LOCAL || mnl_attr_get_type(at) == IFA_ADDRESS) &&
		    mnl_attr_get_payload_len(at) == 4) {
			memcpy(&local, mnl_attr_get_payload(at), 4);
			have = true;
		}
	}
	if (!have)
		return MNL_CB_OK;
	local = ntohl(local);
	net = local & ~((1u << (32 - ifa->ifa_prefixlen)) - 1);
	for (h = net; h < net + (1u << (32 - ifa->ifa_prefixlen)); h++) {
		struct sandbox *sb;
		struct policy *pol = NULL;
		struct sl_addr a;

		if (h == local)
			continue;
		addr_from_v4(&a, h);
		sb = sandbox_lookup(&a, &pol);
		if (!sb)
			continue;
		if (seen.n == seen.cap) {
			size_t cap = seen.cap ? 2 * seen.cap : 64;
			struct known *k = cap <= SANDBOX_MAX ? realloc(seen.v, cap * sizeof(*k))
							     : NULL;

			if (!k) {
				policy_unref(pol);
				sandbox_put(sb);
				errno = ENOMEM;
				return MNL_CB_ERROR;
			}
			seen.v = k;
			seen.cap = cap;
		}
		seen.v[seen.n].nsid = w->nsid;
		snprintf(seen.v[seen.n].name, sizeof(seen.v[seen.n].name), "%s", sb->name);
		seen.n++;
		policy_unref(pol);
		sandbox_put(sb);
	}
	return MNL_CB_OK;
}

/* Dumps @type (RTM_GETLINK, RTM_GETADDR) of the broker's namespace. */
static int rtnl_dump(struct mnl_socket *nl, uint16_t type, uint32_t seq, mnl_cb_t cb, void *data)
{
	char buf[256];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = seq;
	if (type == RTM_GETADDR) {
		struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));

		ifa->ifa_family = AF_INET;
	} else {
		struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));

		ifi->ifi_family = AF_UNSPEC;
		/* Counters are most of a link's bytes, and not wanted here. */
		mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
	}
	return rtnl_talk(nl, nlh, cb, data);
}

/* Learns every sandbox's namespace id anew. Dumping the links also gives
 * a namespace an id if it had none, so that no sandbox is without one. */
static int scan(struct mnl_socket *nl, uint32_t *seq)
{
	int r, tries = 0;

again:
	seen.valid = false;
	seen.n = 0;
	seen.n_wires = 0;
	r = rtnl_dump(nl, RTM_GETLINK, (*seq)++, link_cb, NULL);
	if (r == 0) {
		if (seen.n_wires > 1) /* none: wires may be NULL, which qsort may not take */
			qsort(seen.wires, seen.n_wires, sizeof(*seen.wires), wire_cmp);
		r = rtnl_dump(nl, RTM_GETADDR, (*seq)++, addr_cb, NULL);
	}
	if (r == -EINTR && ++tries < 10)
		goto again; /* links changed during the dump: take it again */
	if (r < 0) {
		seen.n = 0;
		return r;
	}
	seen.valid = true;
	seen.complete = seen.n >= sandbox_count();
	return 0;
}

/*
 * Sets @p->sandbox to the sandbox whose network namespace the process
 * @p->cred.pid is in ("" for none), @pidfd pinning that process.
 * Return: 0; a negative errno, @why filled, when it cannot be told.
 */
static int peer_netns(struct peer *p, int pidfd, char *why, size_t whylen)
{
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
	struct timeval tmo = { .tv_sec = 1 };
	struct mnl_socket *nl = NULL;
	uint32_t seq = (uint32_t)time(NULL);
	int32_t nsid = NETNSA_NSID_NOT_ASSIGNED;
	size_t i;
	int r;

	p->sandbox[0] = '\0';
	nl = mnl_socket_open(NETLINK_ROUTE);
	/* The main loop waits meanwhile: a kernel that never answers costs
	 * one refusal, not the control socket. */
	if (!nl ||
	    setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo)) < 0 ||
	    mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		r = -errno;
		snprintf(why, whylen, "rtnetlink: %s", strerror(-r));
		goto out;
	}
	r = pid_nsid(nl, p->cred.pid, seq++, &nsid);
	if (r == 0 && (!seen.valid || !seen.complete)) {
		r = scan(nl, &seq);
		/* The scan may have given the caller's namespace its id. */
		if (r == 0 && nsid == NETNSA_NSID_NOT_ASSIGNED)
			r = pid_nsid(nl, p->cred.pid, seq++, &nsid);
	}
	if (r < 0) {
		snprintf(why, whylen, "rtnetlink: %s", strerror(-r));
		goto out;
	}
	/* The pid named the caller only if the caller still runs: else it
	 * may be another process's by now. */
	if (poll(&pfd, 1, 0) != 0) {
		r = -ESRCH;
		snprintf(why, whylen, "the caller exited before it could be checked");
		goto out;
	}
	if (nsid == NETNSA_NSID_NOT_ASSIGNED)
		goto out; /* no link of ours leads there: no sandbox's */
	for (i = 0; i < seen.n; i++) {
		if (seen.v[i].nsid == nsid) {
			snprintf(p->sandbox, sizeof(p->sandbox), "%s", seen.v[i].name);
			goto out;
		}
	}
	/* Some sandbox's wire was not found: its namespace may be this one. */
	if (!seen.complete) {
		r = -ENOENT;
		snprintf(why, whylen, "%zu of %zu sandboxes have no wire in the broker's "
			 "namespace to tell their namespace by", sandbox_count() - seen.n,
			 sandbox_count());
	}
out:
	if (nl)
		mnl_socket_close(nl);
	return r;
}

/* Whether the caller holds control_group, as primary or supplementary group. */
static bool peer_in_group(int fd, const struct ucred *cred)
{
	gid_t small[64], *g = small;
	socklen_t len = sizeof(small);
	bool in = false;
	size_t i;

	if (!broker.cfg.control_group[0])
		return false;
	if (cred->gid == broker.cfg.control_gid)
		return true;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) < 0) {
		if (errno != ERANGE || !(g = malloc(len)))
			return false;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) < 0) {
			free(g);
			return false;
		}
	}
	for (i = 0; i < len / sizeof(gid_t); i++)
		in |= g[i] == broker.cfg.control_gid;
	if (g != small)
		free(g);
	return in;
}

/*
 * peer_check() - may the caller on @fd use the control socket
 * @fd:  the accepted connection
 * @p:   filled with who it is (as far as known)
 * @why: the reason of a refusal, for the caller and the log
 *
 * Return: 0 when it may; -EACCES when it may not; another negative errno
 * when it cannot be told (refused as well).
 */
static int peer_check(int fd, struct peer *p, char *why, size_t whylen)
{
	socklen_t cl = sizeof(p->cred);
	char inner[200];
	int pidfd, r;

	memset(p, 0, sizeof(*p));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &p->cred, &cl) < 0) {
		r = -errno;
		snprintf(why, whylen, "cannot read the caller's credentials: %s", strerror(-r));
		return r;
	}
	if (p->cred.uid != 0 && p->cred.uid != geteuid() && !peer_in_group(fd, &p->cred)) {
		if (broker.cfg.control_group[0])
			snprintf(why, whylen, "uid %u is neither root nor in control_group `%s`",
				 (unsigned)p->cred.uid, broker.cfg.control_group);
		else
			snprintf(why, whylen, "uid %u is not root (and no control_group is set)",
				 (unsigned)p->cred.uid);
		return -EACCES;
	}
	if (p->cred.pid <= 0) {
		snprintf(why, whylen, "the caller's process is not visible from the broker's PID "
			 "namespace, so its network namespace cannot be checked");
		return -ESRCH;
	}
	/* The process as it connected (SO_PEERPIDFD, Linux 6.5). Before
	 * that, pidfd_open: it pins the pid from now on, and the caller is
	 * still connected, so its pid is free for reuse only if it exited and
	 * handed its socket on; the liveness check after the lookup covers
	 * the rest of the time. */
	cl = sizeof(pidfd);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &cl) < 0)
		pidfd = (int)syscall(SYS_pidfd_open, p->cred.pid, 0);
	if (pidfd < 0) {
		r = -errno;
		snprintf(why, whylen, "cannot pin the caller's process (pid %d): %s",
			 (int)p->cred.pid, strerror(-r));
		return r;
	}
	r = peer_netns(p, pidfd, inner, sizeof(inner));
	close(pidfd);
	if (r < 0) {
		snprintf(why, whylen, "cannot determine the caller's network namespace: %s", inner);
		return r;
	}
	if (p->sandbox[0]) {
		snprintf(why, whylen, "the caller is in the network namespace of sandbox `%s`; "
			 "the control socket answers only from outside every sandbox",
			 p->sandbox);
		return -EACCES;
	}
	return 0;
}

/* An audit line for a control request from @p. */
static void peer_audit(const struct peer *p, const char *sandbox, const char *verb,
		       const char *decision, const char *reason)
{
	struct audit_event ev = {
		.sandbox = sandbox && sandbox[0] ? sandbox : NULL,
		.proto = "control",
		.name = verb,
		.decision = decision,
		.reason = reason,
		.has_peer = true,
		.peer_pid = (uint32_t)p->cred.pid,
		.peer_uid = (uint32_t)p->cred.uid,
	};

	audit_log(&ev);
}

/* Splits @line in place into at most @max words. */
static int words(char *line, char **w, int max)
{
	int n = 0;
	char *save = NULL, *t;

	for (t = strtok_r(line, " \t\r\n", &save); t && n < max;
	     t = strtok_r(NULL, " \t\r\n", &save))
		w[n++] = t;
	return n;
}

static void handle(char *line, char *out, size_t outlen, const struct peer *p)
{
	char *w[8], err[700] = "";
	int n = words(line, w, 8), r;

	if (n == 0) {
		snprintf(out, outlen, "error: empty request\n");
		return;
	}
	if (!strcmp(w[0], "ping") && n == 1) {
		snprintf(out, outlen, "ok\n");
	} else if (!strcmp(w[0], "register") && n == 4) {
		struct sl_addr a;
		char as[ADDR_STRLEN];

		peer_audit(p, w[1], w[0], "allow", "control-register");
		control_changed();
		r = sandbox_register(w[1], w[2], w[3], true, &a, err, sizeof(err));
		if (r < 0) {
			snprintf(out, outlen, "error: %s\n", err);
		} else {
			char *pem = NULL;

			/* The address, then the sandbox CA's certificate for its
			 * trust bundle. */
			addr_format(&a, as, sizeof(as));
			sandbox_ca_pem(w[1], &pem);
			snprintf(out, outlen, "ok\n%s\n%s", as, pem ? pem : "");
			free(pem);
		}
	} else if (!strcmp(w[0], "unregister") && n == 2) {
		peer_audit(p, w[1], w[0], "allow", "control-unregister");
		control_changed();
		r = sandbox_unregister(w[1], err, sizeof(err));
		snprintf(out, outlen, r < 0 ? "error: %s\n" : "ok\n", err);
	} else if (!strcmp(w[0], "list") && n == 1) {
		int k = snprintf(out, outlen, "ok\n");

		r = sandbox_list(out + k, outlen - (size_t)k);
		if (r < 0)
			snprintf(out, outlen, "error: list too long\n");
	} else if (!strcmp(w[0], "status") && n == 1) {
		struct tlsca_stats ts;
		int k;

		/* Leaf certificates of intercepted hosts, over live sandboxes. */
		sandbox_tls_stats(&ts);
		k = snprintf(out, outlen,
			     "ok\nsandboxes %zu\ntls_leaf_hits %llu\ntls_leaf_misses %llu\n"
			     "tls_leaf_cached %zu\njwt_cached %zu\n",
			     sandbox_count(), (unsigned long long)ts.hits,
			     (unsigned long long)ts.misses, ts.entries, creds_jwt_cached());

		if (metrics_render_text(out + k, outlen - (size_t)k) < 0)
			snprintf(out, outlen, "error: status too long\n");
	} else if (!strcmp(w[0], "metrics") && n == 1) {
		int k = snprintf(out, outlen, "ok\n");

		if (metrics_render_prometheus(out + k, outlen - (size_t)k) < 0)
			snprintf(out, outlen, "error: metrics too long\n");
	} else if (!strcmp(w[0], "jwks") && n == 1) {
		/* Public keys only: what a service needs to verify minted JWTs. */
		int k = snprintf(out, outlen, "ok\n");

		r = creds_jwks(out + k, outlen - (size_t)k - 1);
		if (r < 0) {
			snprintf(out, outlen, "error: cannot list the JWT keys: %s\n", strerror(-r));
		} else {
			out[k + r] = '\n';
			out[k + r + 1] = '\0';
		}
	} else if (!strcmp(w[0], "config") && n == 1) {
		char pool[ADDR_STRLEN + 8], synth[ADDR_STRLEN + 8];

		addr_format_cidr(&broker.cfg.pool_net, broker.cfg.pool_plen, pool, sizeof(pool));
		addr_format_cidr(&broker.cfg.synthetic_net, broker.cfg.synthetic_plen, synth,
				 sizeof(synth));
		snprintf(out, outlen,
			 "ok\nproxy_port %u\ntransparent_port %u\ndns_port %u\n"
			 "sandbox_pool %s\nsynthetic_pool %s\n",
			 broker.cfg.proxy_port, broker.cfg.transparent_port, broker.cfg.dns_port,
			 pool, synth);
	} else if (!strcmp(w[0], "ca") && n == 2) {
		char *pem = NULL;

		r = sandbox_ca_pem(w[1], &pem);
		if (r < 0)
			snprintf(out, outlen, "error: no such sandbox `%s`\n", w[1]);
		else
			snprintf(out, outlen, "ok\n%s", pem);
		free(pem);
	} else if (!strcmp(w[0], "placeholders") && n == 2) {
		r = sandbox_placeholders(w[1], out, outlen, err, sizeof(err));
		if (r < 0)
			snprintf(out, outlen, "error: %s\n", err);
	} else if (!strcmp(w[0], "privileged") && n == 2) {
		/* `sluice exec --privileged` says so before it runs anything:
		 * the record of an uncontained run, with the caller's pid and
		 * uid. */
		peer_audit(p, w[1], w[0], "allow", "privileged-exec");
		log_warn("control: pid %d uid %u runs an uncontained command in sandbox `%s` "
			 "(--privileged)",
			 (int)p->cred.pid, (unsigned)p->cred.uid, w[1]);
		snprintf(out, outlen, "ok\n");
	} else if (!strcmp(w[0], "reload") && n == 1) {
		peer_audit(p, NULL, w[0], "allow", "control-reload");
		control_changed();
		r = broker_reload(err, sizeof(err));
		snprintf(out, outlen, r < 0 ? "error: %s\n" : "ok\n", err);
	} else {
		snprintf(out, outlen, "error: unknown request `%s`\n", w[0]);
	}
}

void control_accept(struct ev *ev, uint32_t events)
{
	struct timeval tv = { .tv_sec = 2 };
	char req[REQ_MAX + 1], why[600];
	struct peer peer;
	char *resp;
	size_t got = 0;
	int fd, r;

	(void)events;
	fd = accept4(ev->fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	/* Checked first, while the caller waits for its answer (so that it
	 * cannot have exited yet, and its pid is its own). */
	r = peer_check(fd, &peer, why, sizeof(why));
	while (got < REQ_MAX) {
		ssize_t k = recv(fd, req + got, REQ_MAX - got, 0);

		if (k <= 0)
			break;
		got += (size_t)k;
		if (memchr(req, '\n', got))
			break;
	}
	req[got] = '\0';
	resp = malloc(RESP_MAX);
	if (!resp) {
		close(fd);
		return;
	}
	if (r < 0) {
		/* The verb only, for the audit line: what was asked, never
		 * the arguments of someone refused. */
		char verb[32];

		snprintf(verb, sizeof(verb), "%.*s", (int)strcspn(req, " \t\r\n"), req);
		log_warn("control: refused pid %d uid %u: %s", (int)peer.cred.pid,
			 (unsigned)peer.cred.uid, why);
		peer_audit(&peer, peer.sandbox, verb, "deny", "control-refused");
		snprintf(resp, RESP_MAX, "error: refused: %s\n", why);
	} else if (!memchr(req, '\n', got)) {
		snprintf(resp, RESP_MAX, "error: request not terminated by a newline\n");
	} else {
		handle(req, resp, RESP_MAX, &peer);
	}
	if (send(fd, resp, strlen(resp), MSG_NOSIGNAL) < 0)
		log_warn("control: could not answer: %s", strerror(errno));
	free(resp);
	close(fd);
}
