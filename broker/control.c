// SPDX-License-Identifier: MIT
/* The control socket: a unix stream socket (mode 0600, or 0660 with
 * control_group) on which `sluice` registers and unregisters sandboxes,
 * lists them, reads counters and asks for a reload. One request line per
 * connection, answered with "ok" and a body, or "error: message" (the
 * protocol: common/ctlproto.h). Runs on the main thread, never on a worker,
 * but for the CA of a new sandbox (see "Serving" below).
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
 * namespace (IFLA_LINK_NETNSID; getting the link assigns it), learnt once
 * per sandbox, through the route to its address (`seen` below). The pid is
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
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "broker/audit.h"
#include "broker/broker_internal.h"
#include "broker/creds/creds.h"
#include "broker/isolation.h"
#include "broker/keys/keys.h"
#include "broker/tls/tls.h"
#include "broker/metrics.h"
#include "common/ctlproto.h"
#include "common/err.h"
#include "common/file.h"
#include "common/log.h"
#include "common/version.h"
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

static int control_open(const struct broker *b, const char *path)
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
		bool group = b->cfg.control_group[0] != '\0';

		if ((group && chown(path, (uid_t)-1, b->cfg.control_gid) < 0) ||
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
	struct ucred cred; /* pid 0 when not visible from here */
	/* Its uid, gid and supplementary groups, whose right the files of a
	 * sandbox it registers or updates are read with (n_groups above
	 * FILE_WHO_GROUPS_MAX: more, or not known). */
	struct file_who who;
	char sandbox[SANDBOX_NAME_MAX + 1]; /* the sandbox it is in; "" none */
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

/* A log line that may come once per connection, bounded. */
struct ratelog {
	uint64_t window; /* start, loop_now_ms() */
	unsigned n;	 /* lines written in it */
	uint64_t quiet;	 /* not written since */
};

/*
 * What is known of the sandboxes' namespaces: the id the broker's namespace
 * gives each one (its wire's IFLA_LINK_NETNSID), by sandbox name, sorted.
 * A namespace keeps its id while it lives, so a sandbox's is learnt once,
 * by two requests (the route to its address names its wire, the wire its
 * namespace: getting the link also gives the namespace an id if it had
 * none), the first time a caller is checked after it registered; and it is
 * forgotten when the sandbox is unregistered. No request dumps every link
 * or address: a caller, a create and a delete cost the same with thousands
 * of sandboxes as with one. A sandbox whose wire is not found (registered
 * but not wired yet, or its wire gone) stays unknown, and is looked for
 * again at the next caller. Main thread only.
 */
struct ca_job;
struct approve_job;
struct cconn;

struct known {
	int32_t nsid;
	char name[SANDBOX_NAME_MAX + 1];
};

/*
 * The control socket's state, one object: made by control_start(), the
 * context of every request (main thread only, but for the maker's part,
 * under ctl->maker.lock).
 */
struct control {
	struct loop *loop;
	struct ev listen;
	struct timer retry; /* accept again after running out of descriptors */
	struct cconn *oldest, *newest;
	unsigned n;
	char *out;		 /* handle()'s answer, CTL_RESP_MAX */
	uint64_t timeouts, busy; /* for `sluice status` */
	struct ratelog log_timeout, log_busy, log_refused, log_fds;
	struct timer approvals; /* ends approvals made --for a while */
	bool approvals_armed;
	struct broker *b; /* whose control socket this is */
	uid_t owner;	  /* the broker's own uid, allowed besides root */
	/* What is known of the sandboxes' namespaces (see struct known). */
	struct {
		struct known *v;
		size_t n, cap;
	} seen;
	/* The CA maker (see struct ca_job). */
	struct {
		pthread_mutex_t lock;
		pthread_cond_t cond;
		struct ca_job *todo, *todo_tail; /* for the maker */
		struct ca_job *done, *done_tail; /* for the main thread */
		bool started, stop;
		pthread_t thread;
		struct ev done_ev; /* an eventfd: something is done */
	} maker;
};

static int known_cmp(const void *a, const void *b)
{
	return strcmp(((const struct known *)a)->name, ((const struct known *)b)->name);
}

static struct known *known_find(struct control *ctl, const char *name)
{
	struct known key = { 0 }; /* known_cmp() reads the name only */

	if (!ctl->seen.n)
		return NULL;
	snprintf(key.name, sizeof(key.name), "%s", name);
	return bsearch(&key, ctl->seen.v, ctl->seen.n, sizeof(*ctl->seen.v), known_cmp);
}

/* Sandbox @name (registered, or unregistered by now) is no longer known. */
static void seen_forget(struct control *ctl, const char *name)
{
	struct known *k = known_find(ctl, name);

	if (!k)
		return;
	memmove(k, k + 1, (size_t)(ctl->seen.v + ctl->seen.n - (k + 1)) * sizeof(*k));
	ctl->seen.n--;
}

static int seen_add(struct control *ctl, const char *name, int32_t nsid)
{
	size_t i;

	if (known_find(ctl, name))
		return 0;
	if (ctl->seen.n == ctl->seen.cap) {
		size_t cap = ctl->seen.cap ? 2 * ctl->seen.cap : 64;
		struct known *k = cap <= 2 * (size_t)SANDBOX_MAX
					  ? realloc(ctl->seen.v, cap * sizeof(*k))
					  : NULL;

		if (!k)
			return -ENOMEM;
		ctl->seen.v = k;
		ctl->seen.cap = cap;
	}
	for (i = ctl->seen.n; i > 0 && strcmp(ctl->seen.v[i - 1].name, name) > 0; i--)
		ctl->seen.v[i] = ctl->seen.v[i - 1];
	ctl->seen.v[i].nsid = nsid;
	snprintf(ctl->seen.v[i].name, sizeof(ctl->seen.v[i].name), "%s", name);
	ctl->seen.n++;
	return 0;
}

struct route_answer {
	int oif;
	unsigned char dst_len;	/* of the table's entry, with RTM_F_FIB_MATCH */
	unsigned char protocol; /* who put it there: RTPROT_* */
	bool gateway, unicast;
};

static int route_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
	struct route_answer *a = data;
	struct nlattr *at;

	if (nlh->nlmsg_type != RTM_NEWROUTE)
		return MNL_CB_OK;
	a->unicast = rtm->rtm_type == RTN_UNICAST;
	a->dst_len = rtm->rtm_dst_len;
	a->protocol = rtm->rtm_protocol;
	mnl_attr_for_each(at, nlh, sizeof(*rtm)) {
		if (mnl_attr_get_type(at) == RTA_OIF && mnl_attr_validate(at, MNL_TYPE_U32) == 0)
			a->oif = (int)mnl_attr_get_u32(at);
		else if (mnl_attr_get_type(at) == RTA_GATEWAY)
			a->gateway = true;
	}
	return MNL_CB_OK;
}

static int link_nsid_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nsid_answer *a = data;
	struct nlattr *at;

	if (nlh->nlmsg_type != RTM_NEWLINK)
		return MNL_CB_OK;
	mnl_attr_for_each(at, nlh, sizeof(struct ifinfomsg)) {
		if (mnl_attr_get_type(at) == IFLA_LINK_NETNSID &&
		    mnl_attr_validate(at, MNL_TYPE_U32) == 0) {
			a->nsid = (int32_t)mnl_attr_get_u32(at);
			a->got = true;
		}
	}
	return MNL_CB_OK;
}

/*
 * The route of the broker's namespace to address @a (IPv4 or IPv6), into
 * @ra; with @fib_match, the table's entry that the lookup matched (its
 * prefix length in ra->dst_len). Return: 0; -ENOENT when there is none;
 * another negative errno.
 */
static int route_to(struct mnl_socket *nl, uint32_t *seq, const struct sl_addr *a, bool fib_match,
		    struct route_answer *ra)
{
	char buf[256];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct rtmsg *rtm;
	bool v4 = addr_is_v4(a);
	uint32_t dst4 = htonl(addr_v4(a));
	int r;

	memset(ra, 0, sizeof(*ra));
	nlh->nlmsg_type = RTM_GETROUTE;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK; /* the ACK ends the answer */
	nlh->nlmsg_seq = (*seq)++;
	rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = v4 ? AF_INET : AF_INET6;
	rtm->rtm_dst_len = v4 ? 32 : 128;
	if (fib_match)
		rtm->rtm_flags = RTM_F_FIB_MATCH;
	if (v4)
		mnl_attr_put(nlh, RTA_DST, sizeof(dst4), &dst4);
	else
		mnl_attr_put(nlh, RTA_DST, sizeof(a->b), a->b);
	r = rtnl_talk(nl, nlh, route_cb, ra);
	if (r == -ENETUNREACH || r == -EHOSTUNREACH || r == -EINVAL)
		return -ENOENT;
	return r;
}

/* The id of the namespace that link @oif of the broker's namespace leads
 * into. Return: 0; -ENOENT when it is a link of the broker's own namespace
 * (or gone); another negative errno. */
static int link_nsid(struct mnl_socket *nl, uint32_t *seq, int oif, int32_t *nsid)
{
	char buf[256];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nsid_answer na = { 0 };
	struct ifinfomsg *ifi;
	int r;

	nlh->nlmsg_type = RTM_GETLINK;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = (*seq)++;
	ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = oif;
	/* Counters are most of a link's bytes, and not wanted here. */
	mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
	r = rtnl_talk(nl, nlh, link_nsid_cb, &na);
	if (r == -ENODEV)
		return -ENOENT;
	if (r < 0)
		return r;
	if (!na.got || na.nsid < 0)
		return -ENOENT;
	*nsid = na.nsid;
	return 0;
}

/*
 * The id of the namespace at the far end of the wire to address @a: the
 * link the broker's namespace reaches @a through directly (a route without
 * a gateway), a link into another namespace. Return: 0; -ENOENT when there
 * is no such wire; another negative errno.
 */
static int wire_nsid(struct mnl_socket *nl, uint32_t *seq, const struct sl_addr *a, int32_t *nsid)
{
	struct route_answer ra;
	int r = route_to(nl, seq, a, false, &ra);

	if (r < 0)
		return r;
	if (!ra.unicast || ra.gateway || ra.oif <= 0)
		return -ENOENT;
	return link_nsid(nl, seq, ra.oif, nsid);
}

/* way_out_nsid()'s cache, before it is asked: { WAY_OUT_UNASKED, ... }. */
#define WAY_OUT_UNASKED INT32_MIN

/*
 * The ids of the namespaces behind the broker's ways out: the far ends of
 * the links of its IPv4 and of its IPv6 default route ([0] and [1]), where
 * such a link leads into another namespace (in Layout 1, `uplink`: the
 * host's namespace; with dual stack, the two may leave by different links).
 * Those namespaces are no sandbox's: a sandbox is reached over a wire of
 * its own, and an address reached over such a link is refused at
 * `register` (register_refused()). Each route is the table's entry that a
 * lookup of 255.255.255.254 (class E), or of 100::1 (the discard prefix),
 * matches: no sandbox's route covers either; it is taken only when that
 * entry is the default route (prefix length 0) with a single next hop, and
 * not one the kernel learnt from a router advertisement (RTPROT_RA): a
 * neighbour on any link that takes them can put that route there, a
 * sandbox on a hand-wired link among them, and its namespace would then be
 * a way out.
 * @cache: { WAY_OUT_UNASKED } until asked, then the answers
 * (NETNSA_NSID_NOT_ASSIGNED: none), so that they are asked once per caller.
 * Return: 0; a negative errno.
 */
static int way_out_nsid(struct mnl_socket *nl, uint32_t *seq, int32_t cache[2])
{
	static const struct sl_addr probe6 = { .b = { 0x01, [15] = 0x01 } }; /* 100::1 */
	struct sl_addr probe[2];
	struct route_answer ra;
	int32_t nsid[2] = { NETNSA_NSID_NOT_ASSIGNED, NETNSA_NSID_NOT_ASSIGNED };
	int i, r;

	if (cache[0] != WAY_OUT_UNASKED)
		return 0;
	addr_from_v4(&probe[0], 0xfffffffeU);
	probe[1] = probe6;
	for (i = 0; i < 2; i++) {
		r = route_to(nl, seq, &probe[i], true, &ra);
		if (r == -ENOENT || (r == 0 && (!ra.unicast || ra.dst_len != 0 || ra.oif <= 0 ||
						ra.protocol == RTPROT_RA)))
			continue;
		if (r == 0)
			r = link_nsid(nl, seq, ra.oif, &nsid[i]); /* sets it only with 0 */
		if (r < 0 && r != -ENOENT)
			return r;
	}
	cache[0] = nsid[0];
	cache[1] = nsid[1];
	return 0;
}

/* Is @nsid that of a namespace behind one of the broker's ways out? */
static bool is_way_out(const int32_t way[2], int32_t nsid)
{
	return nsid != NETNSA_NSID_NOT_ASSIGNED && (nsid == way[0] || nsid == way[1]);
}

struct unknown {
	char name[SANDBOX_NAME_MAX + 1];
	struct sl_addr addr;
};

struct unknowns {
	struct control *ctl;
	struct unknown *v;
	size_t n, cap;
	bool nomem;
};

static void collect_unknown(const struct sandbox *sb, void *arg)
{
	struct unknowns *u = arg;
	struct control *ctl = u->ctl;

	if (known_find(ctl, sb->name))
		return;
	if (u->n == u->cap) {
		size_t cap = u->cap ? 2 * u->cap : 16;
		struct unknown *v = realloc(u->v, cap * sizeof(*v));

		if (!v) {
			u->nomem = true;
			return;
		}
		u->v = v;
		u->cap = cap;
	}
	snprintf(u->v[u->n].name, sizeof(u->v[u->n].name), "%s", sb->name);
	u->v[u->n++].addr = sb->addr;
}

/*
 * Learns the namespace of every registered sandbox not known yet. A wire
 * into a namespace behind one of the broker's ways out (way_out_nsid(),
 * @out) is no sandbox's: such a sandbox stays unknown.
 * Return: how many stay unknown (no wire found); a negative errno when
 * it cannot be told.
 */
static long learn_unknown(struct control *ctl, struct mnl_socket *nl, uint32_t *seq, int32_t out[2])
{
	struct unknowns u = { .ctl = ctl };
	long left = 0;
	size_t i;
	int r = 0;

	if (ctl->seen.n >= sandbox_count(ctl->b->sandboxes))
		return 0;
	sandbox_each(ctl->b->sandboxes, collect_unknown, &u);
	if (u.nomem) {
		free(u.v);
		return -ENOMEM;
	}
	for (i = 0; i < u.n && r >= 0; i++) {
		int32_t nsid;

		r = wire_nsid(nl, seq, &u.v[i].addr, &nsid);
		if (r == 0)
			r = way_out_nsid(nl, seq, out);
		if (r == 0 && is_way_out(out, nsid))
			r = -ENOENT;
		if (r == -ENOENT) {
			left++;
			r = 0;
		} else if (r == 0) {
			r = seen_add(ctl, u.v[i].name, nsid);
		}
	}
	free(u.v);
	return r < 0 ? r : left;
}

/* An rtnetlink socket for the requests above, that waits at most a second
 * for an answer: the main loop waits meanwhile, so a kernel that never
 * answers costs one refusal, not the control socket. NULL (errno set) when
 * it cannot be had. */
static struct mnl_socket *rtnl_open(void)
{
	struct timeval tmo = { .tv_sec = 1 };
	struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
	int e;

	if (nl &&
	    setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo)) == 0 &&
	    mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) == 0)
		return nl;
	e = errno;
	if (nl)
		mnl_socket_close(nl);
	errno = e;
	return NULL;
}

/*
 * Sets @p->sandbox to the sandbox whose network namespace the process
 * @p->cred.pid is in ("" for none), @pidfd pinning that process.
 * Return: 0; a negative errno, @why filled, when it cannot be told.
 */
static int peer_netns(struct control *ctl, struct peer *p, int pidfd, char *why, size_t whylen)
{
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
	struct mnl_socket *nl = rtnl_open();
	uint32_t seq = (uint32_t)time(NULL);
	int32_t nsid = NETNSA_NSID_NOT_ASSIGNED, out_nsid[2] = { WAY_OUT_UNASKED };
	long left = 0;
	size_t i;
	int r;

	p->sandbox[0] = '\0';
	if (!nl) {
		r = -errno;
		snprintf(why, whylen, "rtnetlink: %s", strerror(-r));
		goto out;
	}
	r = pid_nsid(nl, p->cred.pid, seq++, &nsid);
	if (r == 0) {
		left = learn_unknown(ctl, nl, &seq, out_nsid);
		r = left < 0 ? (int)left : 0;
		/* Getting a wire may have given the caller's namespace its id. */
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
	for (i = 0; i < ctl->seen.n; i++) {
		if (ctl->seen.v[i].nsid == nsid) {
			snprintf(p->sandbox, sizeof(p->sandbox), "%s", ctl->seen.v[i].name);
			goto out;
		}
	}
	/* Some sandbox's wire was not found: its namespace may be this one,
	 * unless this is a namespace behind one of the broker's ways out (the
	 * host, in Layout 1), which is no sandbox's. So a sandbox that cuts its
	 * own wire, or one registered before it is wired, does not shut the
	 * host's callers out. */
	if (left > 0) {
		r = way_out_nsid(nl, &seq, out_nsid);
		if (r < 0) {
			snprintf(why, whylen, "rtnetlink: %s", strerror(-r));
			goto out;
		}
		if (is_way_out(out_nsid, nsid))
			goto out;
		r = -ENOENT;
		snprintf(why, whylen,
			 "%ld of %zu sandboxes have no wire in the broker's "
			 "namespace to tell their namespace by",
			 left, sandbox_count(ctl->b->sandboxes));
	}
out:
	if (nl)
		mnl_socket_close(nl);
	return r;
}

/* The uid the broker was started as (control_start() runs before the switch
 * to its own user): besides root and control_group, only it may call. Not
 * the uid it runs as afterwards, which no person logs in as. */

struct cconn;

/* Fills @p->who from @p->cred and the caller's supplementary groups
 * (SO_PEERGROUPS); says whether it holds control_group, as primary or
 * supplementary group. */
static bool peer_groups(struct control *ctl, int fd, struct peer *p)
{
	gid_t small[FILE_WHO_GROUPS_MAX], *g = small;
	socklen_t len = sizeof(small);
	bool in = ctl->b->cfg.control_group[0] && p->cred.gid == ctl->b->cfg.control_gid;
	size_t i, n;

	p->who.uid = (uint32_t)p->cred.uid;
	p->who.gid = (uint32_t)p->cred.gid;
	p->who.n_groups = FILE_WHO_GROUPS_MAX + 1; /* until known */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) < 0) {
		if (errno != ERANGE || !(g = malloc(len)))
			return in;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) < 0) {
			free(g);
			return in;
		}
	}
	n = len / sizeof(gid_t);
	for (i = 0; i < n; i++) {
		in |= ctl->b->cfg.control_group[0] && g[i] == ctl->b->cfg.control_gid;
		if (i < FILE_WHO_GROUPS_MAX)
			p->who.groups[i] = (uint32_t)g[i];
	}
	p->who.n_groups = n > FILE_WHO_GROUPS_MAX ? FILE_WHO_GROUPS_MAX + 1 : (uint32_t)n;
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
static int peer_check(struct control *ctl, int fd, struct peer *p, char *why, size_t whylen)
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
	if (!peer_groups(ctl, fd, p) && p->cred.uid != 0 && p->cred.uid != ctl->owner) {
		if (ctl->b->cfg.control_group[0])
			snprintf(why, whylen, "uid %u is neither root nor in control_group `%s`",
				 (unsigned)p->cred.uid, ctl->b->cfg.control_group);
		else
			snprintf(why, whylen, "uid %u is not root (and no control_group is set)",
				 (unsigned)p->cred.uid);
		return -EACCES;
	}
	if (p->cred.pid <= 0) {
		snprintf(why, whylen,
			 "the caller's process is not visible from the broker's PID "
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
	r = peer_netns(ctl, p, pidfd, inner, sizeof(inner));
	close(pidfd);
	if (r < 0) {
		snprintf(why, whylen, "cannot determine the caller's network namespace: %s", inner);
		return r;
	}
	if (p->sandbox[0]) {
		snprintf(why, whylen,
			 "the caller is in the network namespace of sandbox `%s`; "
			 "the control socket answers only from outside every sandbox",
			 p->sandbox);
		return -EACCES;
	}
	return 0;
}

/* An audit line for a control request from @p; a refusal is counted too
 * (sluice_decisions_total{proto="control"}), for an alert on attempts at
 * the control plane. */
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
	if (!strcmp(decision, "deny"))
		metrics_decision(ev.proto, decision, reason);
}

static bool ratelog_ok(struct control *ctl, struct ratelog *rl, const char *what);

/* The sandboxes @p may see and change: every one (OWNER_ANY) for root and
 * the broker's own uid; a control_group member's own (its uid). */
static uint32_t peer_sees(const struct control *ctl, const struct peer *p)
{
	return p->cred.uid == 0 || p->cred.uid == ctl->owner ? OWNER_ANY : (uint32_t)p->cred.uid;
}

/*
 * May @p act on sandbox @name (@verb: unregister, update, approve, refuse,
 * pending, placeholders; @what: how the refusal says it, NULL: @verb)? Root
 * and the broker's own uid on any sandbox; a control_group member only on
 * those it registered, whose files are read with its right
 * (sandbox_owner(); root's update makes a sandbox root's). A name no
 * sandbox has is left to the verb to answer. Return: true; or false, with
 * the refusal in @out, logged and audited (control-refused).
 */
static bool may_change(struct control *ctl, const struct peer *p, const char *verb,
		       const char *what, const char *name, char *out, size_t outlen)
{
	uint32_t owner, sees = peer_sees(ctl, p);

	if (sees == OWNER_ANY || sandbox_owner(ctl->b->sandboxes, name, &owner) < 0 ||
	    owner == sees)
		return true;
	snprintf(out, outlen,
		 CTL_ERR CTL_REFUSED
		 "uid %u may not %s sandbox `%s`: it is uid %u's (a "
		 "control_group member sees and changes only the sandboxes it registered; "
		 "root, any)\n",
		 (unsigned)p->cred.uid, what ? what : verb, name, (unsigned)owner);
	if (ratelog_ok(ctl, &ctl->log_refused, "lines about callers"))
		log_warn("control: refused pid %d uid %u: %s of sandbox `%s`, uid %u's",
			 (int)p->cred.pid, (unsigned)p->cred.uid, verb, name, (unsigned)owner);
	peer_audit(p, name, verb, "deny", "control-refused");
	return false;
}

/*
 * Is the `register` of @w (NAME ADDR ...) refused for its address: one the
 * broker's namespace reaches over the link of one of its ways out
 * (way_out_nsid(): its IPv4 or its IPv6 default route's), into the host's
 * namespace in Layout 1? That namespace is no sandbox's,
 * and taken for one it would shut every control caller in it out (root's
 * `sluice` on the host included). "auto" and an address with no wire yet
 * pass: their wire is not that link. Fails closed when the
 * routes cannot be read. Return: true, @out filled and the refusal logged
 * and audited, when refused.
 */
static bool register_refused(struct control *ctl, const struct peer *p, char **w, char *out,
			     size_t outlen)
{
	struct sl_addr a;
	struct mnl_socket *nl;
	uint32_t seq = (uint32_t)time(NULL);
	int32_t nsid = NETNSA_NSID_NOT_ASSIGNED, way[2] = { WAY_OUT_UNASKED };
	int r = -EIO;

	if (!strcmp(w[2], "auto") || addr_parse(w[2], &a) < 0)
		return false;
	nl = rtnl_open();
	if (!nl) {
		r = errno ? -errno : r;
	} else {
		r = wire_nsid(nl, &seq, &a, &nsid);
		if (r == 0)
			r = way_out_nsid(nl, &seq, way);
		mnl_socket_close(nl);
	}
	if (r == -ENOENT || (r == 0 && !is_way_out(way, nsid)))
		return false;
	if (r < 0)
		snprintf(out, outlen,
			 CTL_ERR CTL_REFUSED "cannot tell where address %s leads: rtnetlink: %s\n",
			 w[2], strerror(-r));
	else
		snprintf(out, outlen,
			 CTL_ERR CTL_REFUSED
			 "address %s is reached over the link of the broker's default route (its "
			 "way out), not over a wire of its own: that namespace is no sandbox's\n",
			 w[2]);
	if (ratelog_ok(ctl, &ctl->log_refused, "lines about callers"))
		log_warn("control: refused pid %d uid %u: register of `%s` at %s: %s",
			 (int)p->cred.pid, (unsigned)p->cred.uid, w[1], w[2],
			 r < 0 ? "its route cannot be read" : "over the broker's way out");
	peer_audit(p, w[1], w[0], "deny", "control-refused");
	return true;
}

/*
 * Serving. Every connection is non-blocking and driven by the main loop,
 * so that a client that is slow to ask, or to take its answer, holds up
 * nobody else: accepted, its caller checked at once (while it is still
 * connected, so that its pid is its own), its request read as it comes,
 * answered, closed. Bounds: CONNS_MAX open at once (the oldest that has
 * not asked yet makes room for a new one, told "busy"; when none can, the
 * new one is told so), REQUEST_MS from accept to a whole request,
 * ANSWER_MS to take the answer. `register` makes the sandbox's CA (key
 * generation) on a thread of its own, and finishes on this one.
 */
#define CONNS_MAX 64
#define REQUEST_MS 2000
#define ANSWER_MS 10000
#define ACCEPT_BATCH 16
/* Log lines of each kind (deadline, busy, refusal): at most LOG_BURST in
 * LOG_WINDOW_MS; the rest are counted and reported when the next window
 * opens. */
#define LOG_BURST 5
#define LOG_WINDOW_MS 10000

enum conn_state {
	C_READ,	 /* reading the request */
	C_WORK,	 /* register: its CA is being made (not watched, no deadline) */
	C_WRITE, /* writing the answer */
};

struct cconn {
	struct control *ctl; /* whose connection it is */
	struct ev ev;
	struct timer timer;
	struct cconn *prev, *next; /* accept order: the oldest first */
	enum conn_state state;
	bool watched; /* in the loop */
	int check;    /* peer_check()'s result */
	struct peer peer;
	char why[600]; /* its refusal, when check < 0 */
	size_t got;
	char req[CTL_REQ_MAX + 1];
	char *resp;
	size_t len, off;
	struct ca_job *job;	  /* C_WORK */
	struct approve_job *ajob; /* C_WORK: an approval being checked */
};

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

/* Registers sandbox @name, with @ca made for it already (taken; NULL: made
 * here), and writes the answer to @out: the address, then the sandbox CA's
 * certificate for its trust bundle. */
static void register_answer(struct control *ctl, const char *name, const char *addr,
			    const char *policy, bool netns, bool audit, struct tls_ca *ca,
			    bool reserved, const struct file_who *who, char *out, size_t outlen)
{
	struct sl_err err = { 0 };
	char as[ADDR_STRLEN], *pem = NULL;
	struct sl_addr a;
	int r;

	/* Until a caller's check learns its namespace, the new sandbox is
	 * unknown (see learn_unknown()): nothing to do here. */
	r = sandbox_register_ca(ctl->b->sandboxes, name, addr, policy, netns, audit, ca, reserved,
				who, &a, &err);
	if (r < 0) {
		snprintf(out, outlen, CTL_ERR "%s\n", sl_err_msg(&err));
		return;
	}
	addr_format(&a, as, sizeof(as));
	sandbox_ca_pem(ctl->b->sandboxes, name, &pem);
	snprintf(out, outlen, CTL_OK "%s\n%s", as, pem ? pem : "");
	free(pem);
}

/* Does register's optional word @word appear after NAME ADDR POLICY? */
static bool register_has(char **w, int n, const char *word)
{
	int i;

	for (i = 4; i < n; i++)
		if (!strcmp(w[i], word))
			return true;
	return false;
}

/* A register request's words: NAME ADDR POLICY, then CTL_REGISTER_NETNS
 * and CTL_REGISTER_AUDIT, each at most once, in either order. */
static bool register_words(char **w, int n)
{
	int i;

	if (n < 4 || n > 6 || strcmp(w[0], CTL_REGISTER))
		return false;
	for (i = 4; i < n; i++)
		if ((strcmp(w[i], CTL_REGISTER_NETNS) && strcmp(w[i], CTL_REGISTER_AUDIT)) ||
		    (i == 5 && !strcmp(w[4], w[5])))
			return false;
	return true;
}

/* `sluice update`: one audit line whatever the outcome, with who asked, and
 * on success the policy before and after (path and content hash). */
static void update_answer(struct control *ctl, const struct peer *p, const char *name,
			  const char *policy, bool keep_open, char *out, size_t outlen)
{
	struct sandbox_update_info info;
	struct sl_err err = { 0 };
	int r = sandbox_update(ctl->b->sandboxes, name, policy, keep_open, &p->who, &info, &err);
	struct audit_event ev = {
		.sandbox = name,
		.proto = "control",
		.name = CTL_UPDATE,
		.decision = r < 0 ? "error" : "allow",
		.reason = "policy-update",
		.has_peer = true,
		.peer_pid = (uint32_t)p->cred.pid,
		.peer_uid = (uint32_t)p->cred.uid,
		.old_policy = r < 0 ? NULL : info.old_path,
		.old_sha256 = r < 0 ? NULL : info.old_sha256,
		.new_policy = r < 0 ? policy : info.new_path,
		.new_sha256 = r < 0 ? NULL : info.new_sha256,
	};

	audit_log(&ev);
	if (r < 0)
		snprintf(out, outlen, CTL_ERR "%s\n", sl_err_msg(&err));
	else
		snprintf(out, outlen, CTL_OK);
}

/* A host and port of approve or refuse, as the broker takes them whatever
 * the CLI checked: an exact name (no wildcard, no address), a port 0
 * (approve: 80 and 443; refuse: any) to 65535. Return: 0, or -EINVAL with
 * @err saying why. */
static int hold_target(const char *host, const char *port, uint16_t *pn, struct sl_err *err)
{
	struct sl_addr a;
	const char *why = NULL;
	char *end;
	unsigned long v;

	if (addr_parse(host, &a) == 0) {
		sl_err_set(err, 0,
			   "`%.64s` is an address: approve and refuse take a name (for an address, "
			   "a `cidr` rule in the policy file)",
			   host);
		return -EINVAL;
	}
	if (!policy_check_name(host, strlen(host), false, &why)) {
		sl_err_set(err, 0, "bad host name `%.253s`: %s", host, why ? why : "invalid");
		return -EINVAL;
	}
	errno = 0;
	v = strtoul(port, &end, 10);
	if (errno || *end || end == port || v > 65535 || port[0] == '-') {
		sl_err_set(err, 0, "bad port `%.16s` (0 to 65535)", port);
		return -EINVAL;
	}
	*pn = (uint16_t)v;
	return 0;
}

struct pending_ctx {
	const char *only; /* a sandbox's name, or NULL for all */
	uint32_t uid;	  /* whose sandboxes (OWNER_ANY: all) */
	char *out;
	size_t len, o;
	int r;
};

static void pending_one(const struct sandbox *sb, void *arg)
{
	struct pending_ctx *pc = arg;

	if (pc->r == 0 && (!pc->only || !strcmp(pc->only, sb->name)) && sandbox_of(sb, pc->uid))
		pc->r = proxy_hold_list(sb, pc->out, pc->len, &pc->o);
}

/* `sluice pending [NAME]`: what waits, in every sandbox or in NAME's. */
static void pending_answer(struct control *ctl, const struct peer *p, const char *name, char *out,
			   size_t outlen)
{
	struct pending_ctx pc = {
		.only = name, .uid = peer_sees(ctl, p), .out = out, .len = outlen
	};
	struct sandbox *sb;

	if (name) {
		sb = sandbox_get(ctl->b->sandboxes, name);
		if (!sb) {
			snprintf(out, outlen, CTL_ERR "no such sandbox `%s`\n", name);
			return;
		}
		sandbox_put(sb);
	}
	pc.o = (size_t)snprintf(out, outlen, CTL_OK);
	sandbox_each(ctl->b->sandboxes, pending_one, &pc);
	if (pc.r < 0)
		snprintf(out, outlen, CTL_ERR "pending list too long\n");
}

/* An audit line for approve or refuse: who asked, which sandbox, host and
 * port, and the outcome. */
static void hold_audit(const struct peer *p, const char *sandbox, const char *host, uint16_t port,
		       const char *decision, enum sl_reason reason, const char *rule)
{
	struct audit_event ev = {
		.sandbox = sandbox,
		.proto = "control",
		.name = host,
		.target = host, /* as the caller wrote it: the broker checked it is a plain name */
		.dst_port = port,
		.decision = decision,
		.reason = sl_reason_name(reason),
		.rule = rule,
		.has_peer = true,
		.peer_pid = (uint32_t)p->cred.pid,
		.peer_uid = (uint32_t)p->cred.uid,
	};

	audit_log(&ev);
}

/* `sluice refuse NAME HOST PORT`: what waits for HOST (on PORT; 0: any)
 * is refused at once, hold-refused. */
static void refuse_answer(struct control *ctl, const struct peer *p, const char *name,
			  const char *host, const char *port, char *out, size_t outlen)
{
	struct sandbox *sb;
	struct sl_err err = { 0 };
	uint16_t pn;

	if (hold_target(host, port, &pn, &err) < 0) {
		snprintf(out, outlen, CTL_ERR "%s\n", sl_err_msg(&err));
		return;
	}
	sb = sandbox_get(ctl->b->sandboxes, name);
	if (!sb) {
		snprintf(out, outlen, CTL_ERR "no such sandbox `%s`\n", name);
		return;
	}
	if (!proxy_hold_pending(sb, host, pn)) {
		snprintf(out, outlen, CTL_ERR "nothing of sandbox `%s` waits for %s%s%s\n", name,
			 host, pn ? ":" : "", pn ? port : "");
	} else if (proxy_hold_answer_all(ctl->b, sb, host, pn, false, SL_REASON_HOLD_REFUSED, 403) <
		   0) {
		snprintf(out, outlen, CTL_ERR "out of memory\n");
	} else {
		hold_audit(p, name, host, pn, "deny", SL_REASON_HOLD_REFUSED, NULL);
		snprintf(out, outlen, CTL_OK);
	}
	sandbox_put(sb);
}

/*
 * `sluice approve NAME HOST PORT SECONDS`, in two steps: the name is
 * resolved and judged by the address guard on a worker (the control thread
 * never waits on DNS), then, back here, the approval is made (its
 * sandbox's policy compiled anew with it) and what waits for it is decided
 * again; or, where every answer is in a denied range, refused with a clear
 * error, and what waits is refused address-denied.
 */
static void conn_answer(struct cconn *c, char *resp);
static void conn_close(struct cconn *c);

struct approve_job {
	struct hold_check chk;
	struct control *ctl;
	struct cconn *conn; /* NULL once its caller is gone */
	struct peer peer;
	char name[SANDBOX_NAME_MAX + 1];
	char port_text[8];
	uint64_t secs;
};

static void on_approvals(struct timer *t)
{
	struct control *ctl = container_of(t, struct control, approvals);

	(void)t;
	ctl->approvals_armed = false;
	if (sandbox_approvals_expire(ctl->b->sandboxes, loop_now_ms(ctl->loop)) > 0 &&
	    loop_timer_arm(ctl->loop, &ctl->approvals, 1000) == 0)
		ctl->approvals_armed = true;
}

static void approve_done(void *arg)
{
	struct approve_job *job = arg;
	struct control *ctl = job->ctl;
	struct hold_check *chk = &job->chk;
	struct sl_err err = { 0 };
	char out[1200], rule[300], *resp;
	struct cconn *c = job->conn;
	uint16_t port = chk->port;
	int r;

	snprintf(rule, sizeof(rule), "host %s ports %s", chk->host,
		 port ? job->port_text : "80,443");
	if (chk->status < 0) {
		snprintf(out, sizeof(out),
			 CTL_ERR "cannot resolve `%s` (%s): not approved; what waits for it is "
				 "refused (dns-failure)\n",
			 chk->host, chk->status == -ETIMEDOUT ? "timed out" : "no answer");
		proxy_hold_answer_all(ctl->b, chk->sb, chk->host, port, false,
				      SL_REASON_DNS_FAILURE, 502);
		hold_audit(&job->peer, job->name, chk->host, port, "deny", SL_REASON_DNS_FAILURE,
			   rule);
	} else if (!chk->allowed) {
		snprintf(out, sizeof(out),
			 CTL_ERR "`%s` resolves only into denied ranges (%s%s): not approved; what "
				 "waits for it is refused (address-denied)\n",
			 chk->host, chk->first_denied[0] ? chk->first_denied : "no address",
			 chk->denied > 1 ? ", ..." : "");
		proxy_hold_answer_all(ctl->b, chk->sb, chk->host, port, false,
				      SL_REASON_ADDRESS_DENIED, 403);
		hold_audit(&job->peer, job->name, chk->host, port, "deny", SL_REASON_ADDRESS_DENIED,
			   rule);
	} else if (!may_change(ctl, &job->peer, CTL_APPROVE, NULL, job->name, out, sizeof(out))) {
		/* Its owner changed while the name was checked (an update by
		 * root, say): what waits for it keeps waiting. */
	} else {
		r = sandbox_approve(ctl->b->sandboxes, job->name, chk->host, port,
				    job->secs ? loop_now_ms(ctl->loop) + job->secs * 1000 : 0,
				    &err);
		hold_audit(&job->peer, job->name, chk->host, port, r < 0 ? "error" : "allow",
			   SL_REASON_HOLD_APPROVED, rule);
		if (r < 0) {
			snprintf(out, sizeof(out), CTL_ERR "%s\n", sl_err_msg(&err));
		} else {
			proxy_hold_answer_all(ctl->b, chk->sb, chk->host, port, true,
					      SL_REASON_ALLOWED, 0);
			if (job->secs && !ctl->approvals_armed &&
			    loop_timer_arm(ctl->loop, &ctl->approvals, 1000) == 0)
				ctl->approvals_armed = true;
			snprintf(out, sizeof(out), CTL_OK "    - host: %s\n      ports: [%s]\n",
				 chk->host, port ? job->port_text : "80, 443");
		}
	}
	sandbox_put(chk->sb);
	policy_unref(chk->pol);
	free(job);
	if (!c)
		return;
	c->ajob = NULL;
	resp = strdup(out);
	if (resp)
		conn_answer(c, resp);
	else
		conn_close(c);
}

/* Starts the approval @c asks for (@w: its words). Return: 0 when under
 * way (C_WORK); else a negative errno, with the answer in @out. */
static int approve_start(struct cconn *c, char **w, int n, char *out, size_t outlen)
{
	struct control *ctl = c->ctl;
	struct approve_job *job;
	struct sl_err err = { 0 };
	unsigned long long secs;
	uint16_t port;
	char *end;

	if (n != 5) {
		snprintf(out, outlen, CTL_ERR "usage: approve NAME HOST PORT SECONDS\n");
		return -EINVAL;
	}
	if (hold_target(w[2], w[3], &port, &err) < 0) {
		snprintf(out, outlen, CTL_ERR "%s\n", sl_err_msg(&err));
		return -EINVAL;
	}
	if (!may_change(ctl, &c->peer, w[0], NULL, w[1], out, outlen))
		return -EACCES;
	errno = 0;
	secs = strtoull(w[4], &end, 10);
	if (errno || *end || end == w[4] || w[4][0] == '-' || secs > 366ull * 86400) {
		snprintf(out, outlen, CTL_ERR "bad duration `%.20s` (seconds, at most 366 days)\n",
			 w[4]);
		return -EINVAL;
	}
	job = calloc(1, sizeof(*job));
	if (!job) {
		snprintf(out, outlen, CTL_ERR "out of memory\n");
		return -ENOMEM;
	}
	job->ctl = ctl;
	job->chk.sb = sandbox_get(ctl->b->sandboxes, w[1]);
	if (!job->chk.sb) {
		free(job);
		snprintf(out, outlen, CTL_ERR "no such sandbox `%s`\n", w[1]);
		return -ENOENT;
	}
	job->chk.pol = sandbox_policy(job->chk.sb);
	snprintf(job->chk.host, sizeof(job->chk.host), "%s", w[2]);
	job->chk.port = port;
	job->chk.back = ctl->loop;
	job->chk.done = approve_done;
	job->conn = c;
	job->peer = c->peer;
	job->secs = secs;
	snprintf(job->name, sizeof(job->name), "%s", w[1]);
	snprintf(job->port_text, sizeof(job->port_text), "%u", port);
	if (proxy_hold_check(ctl->b, &job->chk) < 0) {
		sandbox_put(job->chk.sb);
		policy_unref(job->chk.pol);
		free(job);
		snprintf(out, outlen, CTL_ERR "cannot check `%s` now\n", w[2]);
		return -ENOMEM;
	}
	c->ajob = job;
	return 0;
}

static void handle(struct control *ctl, char *line, char *out, size_t outlen, const struct peer *p)
{
	struct sl_err err = { 0 };
	char *w[8];
	int n = words(line, w, 8), r;

	if (n == 0) {
		snprintf(out, outlen, CTL_ERR "empty request\n");
		return;
	}
	if (!strcmp(w[0], CTL_PING) && n == 1) {
		snprintf(out, outlen, CTL_OK);
	} else if (register_words(w, n)) {
		/* Only when no CA could be made off this thread (see
		 * conn_dispatch()): made here then. */
		peer_audit(p, w[1], w[0], "allow", "control-register");
		register_answer(ctl, w[1], w[2], w[3], register_has(w, n, CTL_REGISTER_NETNS),
				register_has(w, n, CTL_REGISTER_AUDIT), NULL, false, &p->who, out,
				outlen);
	} else if (!strcmp(w[0], CTL_UNREGISTER) && n == 2) {
		if (!may_change(ctl, p, w[0], NULL, w[1], out, outlen))
			return;
		peer_audit(p, w[1], w[0], "allow", "control-unregister");
		r = sandbox_unregister(ctl->b->sandboxes, w[1], &err);
		seen_forget(ctl, w[1]);
		snprintf(out, outlen, r < 0 ? CTL_ERR "%s\n" : CTL_OK, sl_err_msg(&err));
	} else if (!strcmp(w[0], CTL_LIST) && n == 1) {
		int k = snprintf(out, outlen, CTL_OK);

		r = sandbox_list(ctl->b->sandboxes, peer_sees(ctl, p), out + k, outlen - (size_t)k);
		if (r < 0)
			snprintf(out, outlen, CTL_ERR "list too long\n");
	} else if (!strcmp(w[0], CTL_STATUS) && n == 1) {
		struct tls_leaf_stats ts;
		uint64_t wdropped;
		unsigned nwatch;
		int k;

		/* Leaf certificates of intercepted hosts, over live sandboxes. */
		sandbox_tls_stats(ctl->b->sandboxes, &ts);
		watch_counts(&nwatch, &wdropped);
		k = snprintf(
			out, outlen,
			CTL_OK "version %s\nsandboxes %zu\nsandboxes_audit %zu\n"
			       "sandboxes_state_lost %zu\n"
			       "tls_leaf_hits %llu\ntls_leaf_misses %llu\n"
			       "tls_leaf_cached %zu\njwt_cached %zu\n"
			       "control_timeouts %llu\ncontrol_busy %llu\nseccomp_refused %llu\n"
			       "key_process %s\n"
			       "watchers %u\nwatchers_dropped %llu\n",
			sluice_version, sandbox_count(ctl->b->sandboxes),
			sandbox_audit_count(ctl->b->sandboxes),
			sandbox_state_lost_count(ctl->b->sandboxes), (unsigned long long)ts.hits,
			(unsigned long long)ts.misses, ts.entries, creds_jwt_cached(),
			(unsigned long long)ctl->timeouts, (unsigned long long)ctl->busy,
			(unsigned long long)isolation_seccomp_refused(),
			!keys_active() ? "none"
			: keys_alive() ? "ok"
				       : "gone",
			nwatch, (unsigned long long)wdropped);

		if (metrics_render_text(out + k, outlen - (size_t)k) < 0)
			snprintf(out, outlen, CTL_ERR "status too long\n");
	} else if (!strcmp(w[0], CTL_METRICS) && n == 1) {
		int k = snprintf(out, outlen, CTL_OK);

		if (metrics_render_prometheus(out + k, outlen - (size_t)k) < 0)
			snprintf(out, outlen, CTL_ERR "metrics too long\n");
	} else if (!strcmp(w[0], CTL_JWKS) && n == 1) {
		/* Public keys only: what a service needs to verify minted JWTs. */
		int k = snprintf(out, outlen, CTL_OK);

		r = creds_jwks(out + k, outlen - (size_t)k - 1);
		if (r < 0) {
			snprintf(out, outlen, CTL_ERR "cannot list the JWT keys: %s\n",
				 strerror(-r));
		} else {
			out[k + r] = '\n';
			out[k + r + 1] = '\0';
		}
	} else if (!strcmp(w[0], CTL_CONFIG) && n == 1) {
		char pool[ADDR_STRLEN + 8], synth[ADDR_STRLEN + 8];
		int k;

		addr_format_cidr(&ctl->b->cfg.pool_net, ctl->b->cfg.pool_plen, pool, sizeof(pool));
		addr_format_cidr(&ctl->b->cfg.synthetic_net, ctl->b->cfg.synthetic_plen, synth,
				 sizeof(synth));
		k = snprintf(out, outlen,
			     CTL_OK "proxy_port %u\ntransparent_port %u\ndns_port %u\n"
				    "sandbox_pool %s\nsynthetic_pool %s\n",
			     ctl->b->cfg.proxy_port, ctl->b->cfg.transparent_port,
			     ctl->b->cfg.dns_port, pool, synth);
		/* Where the audit lines go, when that is a file a caller can read
		 * (`sluice report` with no AUDIT_LOG): an absolute path, not
		 * stderr. */
		if (k > 0 && (size_t)k < outlen && ctl->b->cfg.audit_log[0] == '/')
			snprintf(out + k, outlen - (size_t)k, "audit_log %s\n",
				 ctl->b->cfg.audit_log);
	} else if (!strcmp(w[0], CTL_CA) && n == 2) {
		char *pem = NULL;

		r = sandbox_ca_pem(ctl->b->sandboxes, w[1], &pem);
		if (r < 0)
			snprintf(out, outlen, CTL_ERR "no such sandbox `%s`\n", w[1]);
		else
			snprintf(out, outlen, CTL_OK "%s", pem);
		free(pem);
	} else if (!strcmp(w[0], CTL_PLACEHOLDERS) && n == 2) {
		if (!may_change(ctl, p, w[0], "read the placeholders of", w[1], out, outlen))
			return;
		r = sandbox_placeholders(ctl->b->sandboxes, w[1], out, outlen, &err);
		if (r < 0)
			snprintf(out, outlen, CTL_ERR "%s\n", sl_err_msg(&err));
	} else if (!strcmp(w[0], CTL_PRIVILEGED) && n == 2) {
		/* `sluice exec --privileged` says so before it runs anything:
		 * the record of an uncontained run, with the caller's pid and
		 * uid. */
		peer_audit(p, w[1], w[0], "allow", "privileged-exec");
		log_warn("control: pid %d uid %u runs an uncontained command in sandbox `%s` "
			 "(--privileged)",
			 (int)p->cred.pid, (unsigned)p->cred.uid, w[1]);
		snprintf(out, outlen, CTL_OK);
	} else if (!strcmp(w[0], CTL_UPDATE) &&
		   (n == 3 || (n == 4 && !strcmp(w[3], CTL_UPDATE_KEEP_OPEN)))) {
		if (!may_change(ctl, p, w[0], NULL, w[1], out, outlen))
			return;
		update_answer(ctl, p, w[1], w[2], n == 4, out, outlen);
	} else if (!strcmp(w[0], CTL_PENDING) && n <= 2) {
		if (n == 2 && !may_change(ctl, p, w[0], "see what waits in", w[1], out, outlen))
			return;
		pending_answer(ctl, p, n == 2 ? w[1] : NULL, out, outlen);
	} else if (!strcmp(w[0], CTL_REFUSE) && n == 4) {
		if (!may_change(ctl, p, w[0], NULL, w[1], out, outlen))
			return;
		refuse_answer(ctl, p, w[1], w[2], w[3], out, outlen);
	} else if (!strcmp(w[0], CTL_RELOAD) && n == 1) {
		char said[1024];

		peer_audit(p, NULL, w[0], "allow", "control-reload");
		ctl->seen.n = 0; /* learnt again, sandbox by sandbox, as callers come */
		r = broker_reload(ctl->b, &err, said, sizeof(said));
		if (r < 0)
			snprintf(out, outlen, CTL_ERR "%s\n", sl_err_msg(&err));
		else
			snprintf(out, outlen, CTL_OK "%s", said);
	} else {
		snprintf(out, outlen, CTL_ERR "unknown request `%s`\n", w[0]);
	}
}

/* Whether a line of @rl may be written now. A window that opens after
 * lines were held back first says how many. */
static bool ratelog_ok(struct control *ctl, struct ratelog *rl, const char *what)
{
	uint64_t now = loop_now_ms(ctl->loop);

	if (now - rl->window >= LOG_WINDOW_MS) {
		if (rl->quiet)
			log_warn("control: %llu more %s not logged in %u s",
				 (unsigned long long)rl->quiet, what, LOG_WINDOW_MS / 1000);
		rl->window = now;
		rl->n = 0;
		rl->quiet = 0;
	}
	if (rl->n < LOG_BURST) {
		rl->n++;
		return true;
	}
	rl->quiet++;
	return false;
}

/* A short answer on a connection that is being dropped: best effort, it
 * fits the empty socket buffer. */
static void say(int fd, const char *msg)
{
	(void)!send(fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT);
}

/*
 * `register` off the main thread. Making a sandbox's CA means generating
 * two keys and signing a certificate; one thread (the maker, started with
 * the first register, after start-up dropped privileges, so that it holds
 * no capability) does it, and hands the job back through an eventfd: the
 * registration itself (table, state_dir, placeholders) happens on the
 * main thread as before, in the order the CAs are made.
 */
struct ca_job {
	struct ca_job *next;
	struct control *ctl;
	struct cconn *conn; /* main thread only: NULL once the caller is gone */
	char *line;	    /* the request; w[] point into it */
	char *w[6];
	int n;		   /* words in w[] */
	struct tls_ca *ca; /* made by the maker; NULL: it failed */
	/* For "auto": the address sandbox_reserve() held for it (@reserved),
	 * and the head of the answer sent before the CA was made (@early, the
	 * first @sent bytes of it gone; see job_start()). */
	bool reserved;
	char addr[ADDR_STRLEN];
	char early[ADDR_STRLEN + 8];
	size_t sent;
	struct file_who who; /* the caller's: see struct peer */
};

static void job_push(struct ca_job **head, struct ca_job **tail, struct ca_job *job)
{
	job->next = NULL;
	if (*tail)
		(*tail)->next = job;
	else
		*head = job;
	*tail = job;
}

static void *maker_main(void *arg)
{
	struct control *ctl = arg;
	struct ca_job *job;
	uint64_t one = 1;

	(void)arg;
	pthread_mutex_lock(&ctl->maker.lock);
	for (;;) {
		while (!ctl->maker.todo && !ctl->maker.stop)
			pthread_cond_wait(&ctl->maker.cond, &ctl->maker.lock);
		if (ctl->maker.stop)
			break;
		job = ctl->maker.todo;
		ctl->maker.todo = job->next;
		if (!ctl->maker.todo)
			ctl->maker.todo_tail = NULL;
		pthread_mutex_unlock(&ctl->maker.lock);
		/* On failure the main thread tries again and reports it. */
		job->ca = tls_ca_create(job->w[1], NULL);
		pthread_mutex_lock(&ctl->maker.lock);
		job_push(&ctl->maker.done, &ctl->maker.done_tail, job);
		(void)!write(ctl->maker.done_ev.fd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&ctl->maker.lock);
	return NULL;
}

static void conn_close(struct cconn *c);
static void conn_answer_at(struct cconn *c, char *resp, size_t off);

/* Registers @job's sandbox and answers its caller, if still there. */
static void job_finish(struct ca_job *job)
{
	char out[16384], *resp;
	struct cconn *c = job->conn;
	struct control *ctl = job->ctl;
	size_t sent = job->sent, elen = strlen(job->early);

	register_answer(ctl, job->w[1], job->w[2], job->w[3],
			register_has(job->w, job->n, CTL_REGISTER_NETNS),
			register_has(job->w, job->n, CTL_REGISTER_AUDIT), job->ca, job->reserved,
			&job->who, out, sizeof(out));
	if (!c) {
		free(job->line);
		free(job);
		return;
	}
	c->job = NULL;
	/* Once its head is out, the answer goes on from there: the rest of a
	 * success (which starts with that head: the address held), or the
	 * error after it. */
	if (sent && strncmp(out, job->early, elen) != 0) {
		resp = malloc(elen + strlen(out) + 1);
		if (resp)
			sprintf(resp, "%s%s", job->early, out);
	} else {
		resp = strdup(out);
	}
	free(job->line);
	free(job);
	if (!resp) {
		conn_close(c);
		return;
	}
	conn_answer_at(c, resp, sent);
}

static void on_jobs_done(struct ev *ev, uint32_t events)
{
	struct control *ctl = container_of(ev, struct control, maker.done_ev);
	struct ca_job *list, *job;
	uint64_t v;

	(void)events;
	(void)!read(ev->fd, &v, sizeof(v));
	pthread_mutex_lock(&ctl->maker.lock);
	list = ctl->maker.done;
	ctl->maker.done = ctl->maker.done_tail = NULL;
	pthread_mutex_unlock(&ctl->maker.lock);
	while ((job = list)) {
		list = job->next;
		job_finish(job);
	}
}

/*
 * A register of NAME with "auto" from `sluice create` (CTL_REGISTER_NETNS:
 * the one caller that reads the answer in two parts; `sluice register`
 * reads it whole): the address is held for it now, and the head of its
 * answer (CTL_OK, the address, a newline) goes to the caller at once,
 * before the CA is made; job_finish() sends the rest, the CA's
 * certificate or CTL_ERR and why. The caller builds the sandbox's wire
 * meanwhile (netns/create.c). One who reads the answer whole sees the
 * same bytes as before, when it succeeds. Without an address held (the
 * name is taken, the pool is full), nothing is sent early, and the
 * registration says why as before.
 */
static void job_reserve(struct cconn *c, struct ca_job *job)
{
	struct sl_err err = { 0 };
	struct sl_addr a;
	ssize_t k;

	if (job->n < 4 || strcmp(job->w[2], "auto") ||
	    !register_has(job->w, job->n, CTL_REGISTER_NETNS) ||
	    sandbox_reserve(c->ctl->b->sandboxes, job->w[1], &a, &err) < 0)
		return;
	job->reserved = true;
	addr_format(&a, job->addr, sizeof(job->addr));
	job->w[2] = job->addr;
	snprintf(job->early, sizeof(job->early), CTL_OK "%s\n", job->addr);
	/* An empty socket takes these few bytes; what it does not is sent
	 * with the rest. */
	k = send(c->ev.fd, job->early, strlen(job->early), MSG_NOSIGNAL | MSG_DONTWAIT);
	job->sent = k > 0 ? (size_t)k : 0;
}

/*
 * Hands the `register` request of @c to the maker (audited now, as
 * handle() does). Return: 0; a negative errno when it cannot (then the
 * request is served here, as any other).
 */
static int job_start(struct cconn *c)
{
	struct control *ctl = c->ctl;
	struct ca_job *job = calloc(1, sizeof(*job));
	int r;

	if (!job || !(job->line = strdup(c->req))) {
		free(job);
		return -ENOMEM;
	}
	job->ctl = ctl;
	job->who = c->peer.who;
	job->n = words(job->line, job->w, 6);
	pthread_mutex_lock(&ctl->maker.lock);
	if (!ctl->maker.started) {
		r = -pthread_create(&ctl->maker.thread, NULL, maker_main, ctl);
		ctl->maker.started = r == 0;
		if (r < 0) {
			pthread_mutex_unlock(&ctl->maker.lock);
			log_warn("control: cannot start the CA maker thread: %s; CAs are made "
				 "on the main thread",
				 strerror(-r));
			free(job->line);
			free(job);
			return r;
		}
	}
	pthread_mutex_unlock(&ctl->maker.lock);
	/* As handle() does, before the registration. */
	peer_audit(&c->peer, job->w[1], job->w[0], "allow", "control-register");
	/* Once the job will be done: from here the caller has its answer's
	 * head, and only job_finish() can send the rest. */
	job_reserve(c, job);
	job->conn = c;
	c->job = job;
	pthread_mutex_lock(&ctl->maker.lock);
	job_push(&ctl->maker.todo, &ctl->maker.todo_tail, job);
	pthread_cond_signal(&ctl->maker.cond);
	pthread_mutex_unlock(&ctl->maker.lock);
	return 0;
}

/* Unlinks @c from the connections, closes and frees it. */
static void conn_close(struct cconn *c)
{
	struct control *ctl = c->ctl;

	if (c->watched)
		loop_del(ctl->loop, &c->ev);
	loop_timer_cancel(ctl->loop, &c->timer);
	if (c->ev.fd >= 0)
		close(c->ev.fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		ctl->oldest = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		ctl->newest = c->prev;
	ctl->n--;
	if (c->job)
		c->job->conn = NULL; /* the registration goes on */
	if (c->ajob)
		c->ajob->conn = NULL; /* so does the approval */
	free(c->resp);
	free(c);
}

static void conn_write(struct cconn *c)
{
	struct control *ctl = c->ctl;

	while (c->off < c->len) {
		ssize_t k = send(c->ev.fd, c->resp + c->off, c->len - c->off, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int r = c->watched ? loop_mod(ctl->loop, &c->ev, EPOLLOUT)
					   : loop_add(ctl->loop, &c->ev, EPOLLOUT);

			c->watched = true;
			if (r < 0)
				break;
			return;
		}
		if (k < 0) {
			int e = errno;

			if (ratelog_ok(ctl, &ctl->log_refused, "lines about callers"))
				log_warn("control: could not answer pid %d: %s",
					 (int)c->peer.cred.pid, strerror(e));
			break;
		}
		c->off += (size_t)k;
	}
	conn_close(c);
}

/* Answers @resp (malloc'd, taken) on @c, and closes it once written. */
static void conn_answer(struct cconn *c, char *resp)
{
	conn_answer_at(c, resp, 0);
}

/* conn_answer() of @resp, whose first @off bytes the caller has already. */
static void conn_answer_at(struct cconn *c, char *resp, size_t off)
{
	struct control *ctl = c->ctl;

	c->state = C_WRITE;
	c->resp = resp;
	c->len = strlen(resp);
	c->off = off < c->len ? off : c->len;
	if (loop_timer_arm(ctl->loop, &c->timer, ANSWER_MS) < 0) {
		conn_close(c);
		return;
	}
	conn_write(c);
}

/* The caller of @c was refused at accept: logged and audited, with the
 * verb only (what was asked, never the arguments of someone refused). */
static char *refusal(struct cconn *c)
{
	struct control *ctl = c->ctl;
	char verb[32], *resp = malloc(sizeof(c->why) + 64);

	snprintf(verb, sizeof(verb), "%.*s", (int)strcspn(c->req, " \t\r\n"), c->req);
	if (ratelog_ok(ctl, &ctl->log_refused, "lines about callers"))
		log_warn("control: refused pid %d uid %u: %s", (int)c->peer.cred.pid,
			 (unsigned)c->peer.cred.uid, c->why);
	peer_audit(&c->peer, c->peer.sandbox, verb, "deny", "control-refused");
	if (resp)
		snprintf(resp, sizeof(c->why) + 64, CTL_ERR CTL_REFUSED "%s\n", c->why);
	return resp;
}

/* `sluice watch`: the connection becomes a watcher (watch.c), or is told
 * why not. */
static void watch_take(struct cconn *c)
{
	struct control *ctl = c->ctl;
	int fd = c->ev.fd, r;

	if (c->watched)
		loop_del(ctl->loop, &c->ev);
	c->watched = false;
	r = watch_add(fd, peer_sees(ctl, &c->peer));
	if (r == 0) {
		c->ev.fd = -1; /* the watcher's now */
	} else {
		say(fd, r == -EBUSY ? CTL_ERR "too many watchers (at most 8): try again later\n"
				    : CTL_ERR "cannot watch now\n");
	}
	conn_close(c);
}

/* The request went to work (a CA made, an approval asked): no timer and no
 * reading until its answer comes back on this thread. */
static void conn_to_work(struct control *ctl, struct cconn *c)
{
	c->state = C_WORK;
	loop_timer_cancel(ctl->loop, &c->timer);
	if (c->watched)
		loop_del(ctl->loop, &c->ev);
	c->watched = false;
}

/* The request of @c is in (whole, cut at CTL_REQ_MAX, or ended by EOF). */
static void conn_dispatch(struct cconn *c)
{
	struct control *ctl = c->ctl;
	char copy[CTL_REQ_MAX + 1], *w[7], *resp, msg[1024];
	int n;

	c->req[c->got] = '\0';
	if (c->check < 0) {
		resp = refusal(c);
	} else if (!memchr(c->req, '\n', c->got)) {
		resp = strdup(CTL_ERR "request not terminated by a newline\n");
	} else {
		memcpy(copy, c->req, c->got + 1);
		/* One word more than a register takes, so that an extra one is
		 * seen (and the request refused by handle()). */
		n = words(copy, w, 7);
		if (n == 1 && !strcmp(w[0], CTL_WATCH) && c->check >= 0) {
			watch_take(c);
			return;
		}
		if (n >= 1 && !strcmp(w[0], CTL_APPROVE) && c->check >= 0) {
			if (approve_start(c, w, n, msg, sizeof(msg)) >= 0) {
				conn_to_work(ctl, c);
				return;
			}
			resp = strdup(msg);
		} else if (register_words(w, n) &&
			   register_refused(ctl, &c->peer, w, msg, sizeof(msg))) {
			resp = strdup(msg);
		} else if (register_words(w, n) && job_start(c) == 0) {
			conn_to_work(ctl, c);
			return;
		} else {
			/* One buffer for the largest answer, kept: the answer
			 * is copied out at its length. */
			if (!ctl->out)
				ctl->out = malloc(CTL_RESP_MAX);
			resp = NULL;
			if (ctl->out) {
				handle(ctl, c->req, ctl->out, CTL_RESP_MAX, &c->peer);
				resp = strdup(ctl->out);
			}
		}
	}
	if (!resp) {
		conn_close(c);
		return;
	}
	conn_answer(c, resp);
}

/* Takes what the caller has sent, without waiting. Return: 1 when the
 * request is whole (its newline, the caller's end, or CTL_REQ_MAX bytes),
 * 0 when more is to come, -1 on an error. */
static int conn_take(struct cconn *c)
{
	while (c->got < CTL_REQ_MAX) {
		ssize_t k = recv(c->ev.fd, c->req + c->got, CTL_REQ_MAX - c->got, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (k < 0)
			return -1;
		if (k == 0)
			return 1; /* the caller wrote all it will */
		c->got += (size_t)k;
		if (memchr(c->req + c->got - (size_t)k, '\n', (size_t)k))
			return 1;
	}
	return 1;
}

static void conn_read(struct cconn *c)
{
	int r = conn_take(c);

	if (r < 0) {
		conn_close(c);
		return;
	}
	if (r == 0) {
		/* Watched only from now: a request that came with the
		 * connection costs no epoll_ctl. */
		if (!c->watched && loop_add(c->ctl->loop, &c->ev, EPOLLIN) < 0) {
			conn_close(c);
			return;
		}
		c->watched = true;
		return;
	}
	conn_dispatch(c);
}

static void on_conn(struct ev *ev, uint32_t events)
{
	struct cconn *c = container_of(ev, struct cconn, ev);

	(void)events;
	if (c->state == C_READ)
		conn_read(c);
	else if (c->state == C_WRITE)
		conn_write(c);
}

static void on_deadline(struct timer *t)
{
	struct cconn *c = container_of(t, struct cconn, timer);
	struct control *ctl = c->ctl;

	if (c->state == C_READ && c->check < 0) {
		/* Refused all the same, and audited as such. */
		ctl->timeouts++;
		conn_dispatch(c);
		return;
	}
	/* The loop runs its timers before it looks at the sockets again: after
	 * a wake-up that held it past this deadline (another request's work,
	 * a machine that gave it no CPU), the request may be here, unread. */
	if (c->state == C_READ) {
		int r = conn_take(c);

		if (r > 0) {
			conn_dispatch(c);
			return;
		}
		if (r < 0) {
			conn_close(c);
			return;
		}
	}
	ctl->timeouts++;
	if (ratelog_ok(ctl, &ctl->log_timeout, "lines about deadlines"))
		log_warn("control: pid %d %s within %u s; closed (%llu so far)",
			 (int)c->peer.cred.pid,
			 c->state == C_READ ? "sent no complete request"
					    : "did not take its answer",
			 (c->state == C_READ ? REQUEST_MS : ANSWER_MS) / 1000,
			 (unsigned long long)ctl->timeouts);
	if (c->state == C_READ)
		say(c->ev.fd, CTL_ERR "no complete request within 2 s\n");
	conn_close(c);
}

static const char busy_msg[] =
	CTL_ERR CTL_BUSY "too many control connections (at most 64 at once); try again\n";
_Static_assert(CONNS_MAX == 64 && REQUEST_MS == 2000, "the messages say 64 and 2 s");

/* Over the bound: the oldest connection still waiting for its request
 * makes room, told why. Return: whether one did. */
static bool make_room(struct control *ctl)
{
	struct cconn *c;

	for (c = ctl->oldest; c && c->state != C_READ; c = c->next)
		;
	if (!c)
		return false;
	ctl->busy++;
	if (ratelog_ok(ctl, &ctl->log_busy, "lines about the bound"))
		log_warn("control: %u connections open: closed pid %d's, which had not asked "
			 "yet (%llu so far)",
			 CONNS_MAX, (int)c->peer.cred.pid, (unsigned long long)ctl->busy);
	if (c->check < 0)
		free(refusal(c)); /* audited all the same */
	say(c->ev.fd, busy_msg);
	conn_close(c);
	return true;
}

static void conn_new(struct control *ctl, int fd)
{
	struct cconn *c;

	if (ctl->n >= CONNS_MAX && !make_room(ctl)) {
		ctl->busy++;
		if (ratelog_ok(ctl, &ctl->log_busy, "lines about the bound"))
			log_warn("control: %u connections open, all at work: a new one is refused "
				 "(%llu so far)",
				 CONNS_MAX, (unsigned long long)ctl->busy);
		say(fd, busy_msg);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->ctl = ctl;
	c->ev.fd = fd;
	c->ev.cb = on_conn;
	c->timer.cb = on_deadline;
	c->state = C_READ;
	c->prev = ctl->newest;
	if (ctl->newest)
		ctl->newest->next = c;
	else
		ctl->oldest = c;
	ctl->newest = c;
	ctl->n++;
	/* Checked first, while the caller waits for its answer (so that it
	 * cannot have exited yet, and its pid is its own). */
	c->check = peer_check(ctl, fd, &c->peer, c->why, sizeof(c->why));
	if (loop_timer_arm(ctl->loop, &c->timer, REQUEST_MS) < 0) {
		conn_close(c);
		return;
	}
	/* The request is usually there already (`sluice` sends it with the
	 * connection): read it now rather than on the next wake-up. */
	conn_read(c);
}

static void on_retry(struct timer *t)
{
	struct control *ctl = container_of(t, struct control, retry);

	(void)t;
	if (ctl->listen.fd >= 0)
		loop_mod(ctl->loop, &ctl->listen, EPOLLIN);
}

static void on_accept(struct ev *ev, uint32_t events)
{
	struct control *ctl = container_of(ev, struct control, listen);
	int i, fd, e;

	(void)events;
	for (i = 0; i < ACCEPT_BATCH; i++) {
		fd = accept4(ev->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd >= 0) {
			conn_new(ctl, fd);
			continue;
		}
		e = errno;
		if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
			/* The listener would wake the loop again at once: rest. */
			if (ratelog_ok(ctl, &ctl->log_fds, "lines about accept"))
				log_warn("control: cannot accept: %s; trying again in 100 ms",
					 strerror(e));
			loop_mod(ctl->loop, ev, 0);
			loop_timer_arm(ctl->loop, &ctl->retry, 100);
		}
		return;
	}
}

struct control *control_new(struct broker *b)
{
	struct control *ctl = calloc(1, sizeof(*ctl));

	if (!ctl)
		return NULL;
	if (pthread_mutex_init(&ctl->maker.lock, NULL)) {
		free(ctl);
		return NULL;
	}
	if (pthread_cond_init(&ctl->maker.cond, NULL)) {
		pthread_mutex_destroy(&ctl->maker.lock);
		free(ctl);
		return NULL;
	}
	ctl->b = b;
	ctl->loop = b->main_loop;
	ctl->owner = geteuid();
	ctl->listen.fd = -1;
	ctl->maker.done_ev.fd = -1;
	return ctl;
}

void control_free(struct control *ctl)
{
	if (!ctl)
		return;
	free(ctl->out);
	free(ctl->seen.v);
	pthread_cond_destroy(&ctl->maker.cond);
	pthread_mutex_destroy(&ctl->maker.lock);
	free(ctl);
}

void control_handle(struct control *ctl, char *line, char *out, size_t outlen)
{
	struct peer p = { .cred = { .pid = getpid(), .uid = getuid(), .gid = getgid() } };

	handle(ctl, line, out, outlen, &p);
}

int control_start(struct broker *b)
{
	struct loop *l = b->main_loop;
	struct control *ctl;
	int fd, efd;

	ctl = control_new(b);
	if (!ctl)
		return -ENOMEM;
	efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (efd < 0) {
		efd = -errno;
		control_free(ctl);
		return efd;
	}
	fd = control_open(b, b->cfg.control_socket);
	if (fd < 0) {
		close(efd);
		control_free(ctl);
		return fd;
	}
	if (watch_start(l, b->sandboxes) < 0) {
		close(fd);
		close(efd);
		control_free(ctl);
		return -ENOMEM;
	}
	ctl->retry.cb = on_retry;
	ctl->approvals.cb = on_approvals;
	ctl->listen.fd = fd;
	ctl->listen.cb = on_accept;
	ctl->maker.done_ev.fd = efd;
	ctl->maker.done_ev.cb = on_jobs_done;
	if (loop_add(l, &ctl->listen, EPOLLIN) < 0 ||
	    loop_add(l, &ctl->maker.done_ev, EPOLLIN) < 0) {
		loop_del(l, &ctl->listen);
		close(fd);
		close(efd);
		control_free(ctl);
		return -ENOMEM;
	}
	/* Approvals made --for a while that a restart restores (after this,
	 * before the loop runs) end on time too: the first tick looks. */
	if (loop_timer_arm(l, &ctl->approvals, 1000) == 0)
		ctl->approvals_armed = true;
	b->control = ctl;
	return 0;
}

void control_stop(struct control *ctl)
{
	struct cconn *c, *next;

	if (ctl->listen.fd < 0)
		return;
	loop_del(ctl->loop, &ctl->listen);
	loop_timer_cancel(ctl->loop, &ctl->retry);
	loop_timer_cancel(ctl->loop, &ctl->approvals);
	ctl->approvals_armed = false;
	close(ctl->listen.fd);
	ctl->listen.fd = -1;
	watch_stop();
	/* Those that have not asked yet are told so; a request under way
	 * is finished and answered while the broker drains. */
	for (c = ctl->oldest; c; c = next) {
		next = c->next;
		if (c->state != C_READ)
			continue;
		say(c->ev.fd, CTL_ERR "sluiced is stopping\n");
		conn_close(c);
	}
}

void control_shutdown(struct control *ctl)
{
	if (!ctl)
		return;
	struct ca_job *job;
	struct cconn *c, *next;

	control_stop(ctl);
	pthread_mutex_lock(&ctl->maker.lock);
	ctl->maker.stop = true;
	pthread_cond_signal(&ctl->maker.cond);
	pthread_mutex_unlock(&ctl->maker.lock);
	if (ctl->maker.started)
		pthread_join(ctl->maker.thread, NULL);
	ctl->maker.started = false;
	/* What was asked before the broker stopped is done, CA made here if
	 * the maker had not: as when requests were served one by one. */
	if (ctl->maker.done_tail)
		ctl->maker.done_tail->next = ctl->maker.todo;
	else
		ctl->maker.done = ctl->maker.todo;
	ctl->maker.todo = ctl->maker.todo_tail = NULL;
	while ((job = ctl->maker.done)) {
		ctl->maker.done = job->next;
		job_finish(job);
	}
	ctl->maker.done_tail = NULL;
	for (c = ctl->oldest; c; c = next) {
		next = c->next;
		conn_close(c);
	}
	if (ctl->maker.done_ev.fd >= 0) {
		loop_del(ctl->loop, &ctl->maker.done_ev);
		close(ctl->maker.done_ev.fd);
		ctl->maker.done_ev.fd = -1;
	}
	control_free(ctl);
}
