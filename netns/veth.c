// SPDX-License-Identifier: MIT
/* The wire of a sandbox: a veth pair, its addresses, the sandbox's default
 * route, over rtnetlink with libmnl.
 *
 * Theory of operation: a netlink socket works in the network namespace it
 * was opened in, whichever namespace its user is in later; so is an ioctl
 * on it. A caller opens one socket per namespace, and then works on both
 * namespaces from where it is, without moving back and forth. Links are
 * named by index (ioctl SIOCGIFINDEX on the same socket), so that a name
 * is looked up once and in the right namespace. Requests that follow each
 * other (an address, then up, then a route) go to the kernel in one
 * message and are acknowledged one by one.
 *
 * Deleting a link makes the kernel wait for pending RCU callbacks
 * (rcu_barrier()) before the request returns: tens of milliseconds,
 * although the link is gone from its namespace (name and index free) about
 * a millisecond after the request starts. netns_link_del_begin() leaves
 * the deletion, and that wait, to a child; netns_link_retire() marks the
 * link meanwhile. */
#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"
#include "netns/netns_internal.h"

/* Every request is a few small messages, far below this. */
#define RTNL_BUF 8192
/* The most messages a batch holds, and the room kept for each. */
#define BATCH_MAX 8
#define BATCH_MSG_MAX 256

/**
 * netns_rtnl_open() - an rtnetlink socket in the calling thread's namespace
 * @r: filled on success; netns_rtnl_close() it
 *
 * Return: 0 or a negative errno.
 */
int netns_rtnl_open(struct netns_rtnl *r)
{
	struct timeval tv = { .tv_sec = 5 };
	int e;

	r->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (!r->nl)
		return -errno;
	/* A kernel that never answers must not hang sluice. */
	setsockopt(mnl_socket_get_fd(r->nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (mnl_socket_bind(r->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		e = -errno;
		mnl_socket_close(r->nl);
		r->nl = NULL;
		return e;
	}
	r->portid = mnl_socket_get_portid(r->nl);
	r->seq = (uint32_t)time(NULL);
	return 0;
}

void netns_rtnl_close(struct netns_rtnl *r)
{
	if (r && r->nl) {
		mnl_socket_close(r->nl);
		r->nl = NULL;
	}
}

/* Reads acknowledgements until the one for @seq. Return: 0 or the kernel's
 * negative errno for that message. */
static int wait_ack(struct netns_rtnl *r, uint32_t seq)
{
	char buf[RTNL_BUF];

	for (;;) {
		ssize_t n = mnl_socket_recvfrom(r->nl, buf, sizeof(buf));
		int k;

		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		errno = 0;
		k = mnl_cb_run(buf, (size_t)n, seq, r->portid, NULL, NULL);
		if (k == MNL_CB_ERROR)
			return errno ? -errno : -EIO;
		if (k == MNL_CB_STOP)
			return 0;
	}
}

/* Sends @nlh and waits for its acknowledgement. Return: 0 or the kernel's
 * negative errno. */
static int talk(struct netns_rtnl *r, struct nlmsghdr *nlh)
{
	nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = ++r->seq;
	if (mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	return wait_ack(r, nlh->nlmsg_seq);
}

/**
 * netns_rtnl_batch_init() - start a batch of requests for one socket
 * @b: the batch
 */
void netns_rtnl_batch_init(struct netns_rtnl_batch *b)
{
	b->len = 0;
	b->n = 0;
	b->overflow = false;
}

/* Room for the next message of @b (each is far below BATCH_MSG_MAX): a
 * fresh header, or NULL when @b is full, which then fails as a whole. */
static struct nlmsghdr *batch_next(struct netns_rtnl_batch *b)
{
	if (b->overflow || b->n >= BATCH_MAX || sizeof(b->buf) - b->len < BATCH_MSG_MAX) {
		b->overflow = true;
		return NULL;
	}
	memset(b->buf + b->len, 0, BATCH_MSG_MAX);
	return mnl_nlmsg_put_header(b->buf + b->len);
}

/* Closes the message @nlh that batch_next() gave. */
static void batch_done(struct netns_rtnl_batch *b, struct nlmsghdr *nlh)
{
	nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	b->len += NLMSG_ALIGN(nlh->nlmsg_len);
	b->n++;
}

/**
 * netns_rtnl_batch_send() - send a batch in one message, then read every
 * acknowledgement
 * @r:    the socket (its namespace is the batch's)
 * @b:    the batch; empty again after
 * @step: set to the index of the first request that failed; may be NULL
 *
 * The kernel carries out the requests in order, each whatever became of
 * the one before, and acknowledges each on its own; the first failure is
 * the one reported.
 *
 * Return: 0, -ENOSPC when the batch overflowed while being built, or the
 * first failed request's negative errno.
 */
int netns_rtnl_batch_send(struct netns_rtnl *r, struct netns_rtnl_batch *b, unsigned *step)
{
	uint32_t first = r->seq + 1;
	size_t off;
	unsigned i;
	int e = 0, k;

	if (step)
		*step = 0;
	if (b->overflow || b->n == 0) {
		e = b->overflow ? -ENOSPC : 0;
		netns_rtnl_batch_init(b);
		return e;
	}
	for (off = 0; off < b->len;) {
		struct nlmsghdr *nlh = (struct nlmsghdr *)(b->buf + off);

		nlh->nlmsg_seq = ++r->seq;
		off += NLMSG_ALIGN(nlh->nlmsg_len);
	}
	if (mnl_socket_sendto(r->nl, b->buf, b->len) < 0) {
		e = -errno;
		netns_rtnl_batch_init(b);
		return e;
	}
	/* One acknowledgement per request, in order, each in its own datagram. */
	for (i = 0; i < b->n; i++) {
		k = wait_ack(r, first + i);
		if (k < 0 && e == 0) {
			e = k;
			if (step)
				*step = i;
		}
		if (k == -ETIMEDOUT)
			break;
	}
	netns_rtnl_batch_init(b);
	return e;
}

static struct nlmsghdr *link_msg(char *buf, uint16_t type, uint16_t flags, struct ifinfomsg **ifm)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = flags;
	*ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(**ifm));
	(*ifm)->ifi_family = AF_UNSPEC;
	return nlh;
}

/**
 * netns_link_index() - the index of a link in the socket's namespace
 * @r:    the socket
 * @name: the link
 *
 * Return: the index (> 0); -ENODEV when there is no such link; another
 * negative errno.
 */
int netns_link_index(struct netns_rtnl *r, const char *name)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	if (!text_copy(ifr.ifr_name, sizeof(ifr.ifr_name), name))
		return -EINVAL;
	/* A netlink socket takes the interface ioctls, in its own namespace. */
	if (ioctl(mnl_socket_get_fd(r->nl), SIOCGIFINDEX, &ifr) < 0)
		return -errno;
	return ifr.ifr_ifindex;
}

/**
 * netns_link_mac() - a link's hardware address, as "aa:bb:cc:dd:ee:ff"
 * @r:    a socket in the link's namespace
 * @name: the link
 * @out:  the address, NUL-terminated
 *
 * Return: 0; -ENODEV when there is no such link; another negative errno.
 */
int netns_link_mac(struct netns_rtnl *r, const char *name, char out[18])
{
	const unsigned char *m;
	struct ifreq ifr;

	out[0] = '\0';
	memset(&ifr, 0, sizeof(ifr));
	if (!text_copy(ifr.ifr_name, sizeof(ifr.ifr_name), name))
		return -EINVAL;
	if (ioctl(mnl_socket_get_fd(r->nl), SIOCGIFHWADDR, &ifr) < 0)
		return -errno;
	m = (const unsigned char *)ifr.ifr_hwaddr.sa_data;
	snprintf(out, 18, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
	return 0;
}

/**
 * netns_ifname_ok() - may @name be a link's name (the kernel's rules:
 * 1-15 bytes, not "." or "..", no '/', ':' or white space)?
 * @name: the name
 *
 * Return: true when it may.
 */
bool netns_ifname_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n >= NETNS_IFNAMSIZ || !strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	for (; *name; name++) {
		unsigned char c = (unsigned char)*name;

		if (c == '/' || c == ':' || c <= ' ' || c >= 0x7f)
			return false;
	}
	return true;
}

/**
 * netns_veth_add() - a veth pair whose peer starts life in another namespace
 * @r:         a socket in the namespace of @name
 * @name:      this end's name
 * @peer:      the other end's name, in @peer_nsfd
 * @peer_nsfd: the namespace of the other end
 *
 * Both ends are made down; they inherit their namespace's IPv6 defaults.
 *
 * Return: 0; -EEXIST when @name (or @peer there) exists; another negative errno.
 */
int netns_veth_add(struct netns_rtnl *r, const char *name, const char *peer, int peer_nsfd)
{
	char buf[RTNL_BUF];
	struct ifinfomsg *ifm;
	struct nlmsghdr *nlh = link_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifm);
	struct nlattr *info, *data, *pa;

	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	pa = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	/* The peer is described by an ifinfomsg of its own, then attributes. */
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, peer);
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)peer_nsfd);
	mnl_attr_nest_end(nlh, pa);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, info);
	return talk(r, nlh);
}

/**
 * netns_link_del() - delete a link, and wait until the kernel is done
 * @r:     a socket in the link's namespace
 * @index: the link (a veth takes its peer along)
 *
 * Return: 0; -ENODEV when there is no such link; another negative errno.
 */
int netns_link_del(struct netns_rtnl *r, int index)
{
	char buf[RTNL_BUF];
	struct ifinfomsg *ifm;
	struct nlmsghdr *nlh = link_msg(buf, RTM_DELLINK, 0, &ifm);

	ifm->ifi_index = index;
	return talk(r, nlh);
}

/**
 * netns_link_retire() - mark a link as a deleted sandbox's (its alias is
 * NETNS_LINK_RETIRED), so that a later create may remove it should it still
 * be there (netns_link_retired())
 * @r:     a socket in the link's namespace
 * @index: the link
 *
 * The link is not set down: that makes the kernel flush the namespace's
 * routing table, whose length grows with the number of sandboxes; its
 * deletion does that a moment later, off the caller's path.
 *
 * Return: 0 or a negative errno.
 */
int netns_link_retire(struct netns_rtnl *r, int index)
{
	char buf[RTNL_BUF];
	struct ifinfomsg *ifm;
	struct nlmsghdr *nlh = link_msg(buf, RTM_NEWLINK, 0, &ifm);

	ifm->ifi_index = index;
	mnl_attr_put_strz(nlh, IFLA_IFALIAS, NETNS_LINK_RETIRED);
	return talk(r, nlh);
}

struct alias_seen {
	bool retired;
};

static int alias_cb(const struct nlmsghdr *nlh, void *data)
{
	struct alias_seen *a = data;
	const size_t mlen = sizeof(NETNS_LINK_RETIRED) - 1;
	const struct nlattr *at;

	if (nlh->nlmsg_type != RTM_NEWLINK)
		return MNL_CB_OK;
	mnl_attr_for_each(at, nlh, sizeof(struct ifinfomsg)) {
		const char *v = mnl_attr_get_payload(at);
		size_t n = mnl_attr_get_payload_len(at);

		if (mnl_attr_get_type(at) == IFLA_IFALIAS && n >= mlen &&
		    !memcmp(v, NETNS_LINK_RETIRED, mlen) && (n == mlen || v[mlen] == '\0'))
			a->retired = true;
	}
	return MNL_CB_OK;
}

/**
 * netns_link_retired() - was the link @name marked by
 * netns_link_retire()?
 * @r:    a socket in the link's namespace
 * @name: the link
 *
 * Return: 1, 0, -ENODEV when there is no such link, or another negative
 * errno.
 */
int netns_link_retired(struct netns_rtnl *r, const char *name)
{
	char buf[RTNL_BUF];
	struct alias_seen a = { false };
	struct ifinfomsg *ifm;
	struct nlmsghdr *nlh = link_msg(buf, RTM_GETLINK, NLM_F_REQUEST, &ifm);
	ssize_t n;
	int k;

	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	nlh->nlmsg_seq = ++r->seq;
	if (mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	/* The answer is the link itself, or an error; no acknowledgement. */
	n = mnl_socket_recvfrom(r->nl, buf, sizeof(buf));
	if (n < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	errno = 0;
	k = mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, r->portid, alias_cb, &a);
	if (k == MNL_CB_ERROR)
		return errno ? -errno : -EIO;
	return a.retired;
}

/* Links that lead nowhere by themselves: their packets go out, if at all,
 * over another link of the namespace (sluice's, to the broker, whose guard
 * refuses what is not TCP or DNS). The kernel makes fallback devices of
 * these kinds (tunl0, sit0, gre0, ...) in every new namespace once their
 * module is loaded. */
static bool leads_nowhere(const char *kind)
{
	static const char *const kinds[] = { "ipip",	  "sit",    "gre",    "gretap",
					     "erspan",	  "ip6tnl", "ip6gre", "ip6gretap",
					     "ip6erspan", "vti",    "vti6",   "dummy" };
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(kind, kinds[i]))
			return true;
	return false;
}

struct others_seen {
	char *names;
	size_t len;
	int n;
};

static int others_cb(const struct nlmsghdr *nlh, void *data)
{
	struct others_seen *o = data;
	const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
	const char *name = "?", *kind = NULL;
	struct nlattr *at, *li;
	size_t used;

	if (nlh->nlmsg_type != RTM_NEWLINK || (ifm->ifi_flags & IFF_LOOPBACK))
		return MNL_CB_OK;
	mnl_attr_for_each(at, nlh, sizeof(*ifm)) {
		if (mnl_attr_get_type(at) == IFLA_IFNAME &&
		    mnl_attr_validate(at, MNL_TYPE_NUL_STRING) == 0)
			name = mnl_attr_get_str(at);
		else if (mnl_attr_get_type(at) == IFLA_LINKINFO)
			mnl_attr_for_each_nested(li, at)
				if (mnl_attr_get_type(li) == IFLA_INFO_KIND &&
				    mnl_attr_validate(li, MNL_TYPE_NUL_STRING) == 0)
					kind = mnl_attr_get_str(li);
	}
	if (kind && leads_nowhere(kind))
		return MNL_CB_OK;
	used = strlen(o->names);
	if (used + 1 < o->len)
		snprintf(o->names + used, o->len - used, "%s%s (%s)", used ? ", " : "", name,
			 kind ? kind : "a device");
	o->n++;
	return MNL_CB_OK;
}

/**
 * netns_link_others() - the links of the socket's namespace that could lead
 * out of it: every one but loopback and those leads_nowhere() names
 * @r:     a socket in the namespace
 * @names: their names and kinds, ", " between them (cut to fit)
 * @len:   its size
 *
 * Return: how many there are, or a negative errno.
 */
int netns_link_others(struct netns_rtnl *r, char *names, size_t len)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct others_seen o = { names, len, 0 };
	struct ifinfomsg *ifm;
	struct nlmsghdr *nlh = link_msg(buf, RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, &ifm);
	unsigned seq;
	int k;

	names[0] = '\0';
	seq = nlh->nlmsg_seq = ++r->seq;
	if (mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	do {
		ssize_t n = mnl_socket_recvfrom(r->nl, buf, sizeof(buf));

		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		errno = 0;
		k = mnl_cb_run(buf, (size_t)n, seq, r->portid, others_cb, &o);
		if (k == MNL_CB_ERROR)
			return errno ? -errno : -EIO;
	} while (k > MNL_CB_STOP);
	return o.n;
}

/* A link-deleting child's request, made before it starts. */
struct deleter_req {
	size_t len;
	char msg[64];
};

/* The stack of the one child at a time that shares this process's memory
 * (see netns_link_del_begin()), and its request. */
static struct {
	bool busy;
	pid_t pid;
	struct deleter_req req;
	char stack[64 << 10] __attribute__((aligned(16)));
} deleter;

/*
 * The child: one netlink socket, one request. It reads nothing this process
 * may change (its request was made before, on a stack of its own), and its
 * system calls do not fail in practice: an error of the kernel's about the
 * request comes back as a message, which it does not read, not through
 * errno (which a child sharing this process's memory shares too); sendto()
 * to the kernel returns once the kernel is done with the request.
 */
static int deleter_main(void *arg)
{
	const struct deleter_req *req = arg;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	sigset_t all;
	int fd;

	/* Nothing meant for the caller (it held these already) stops it. */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	/* Nothing of the caller's output is held open: a reader of it would
	 * wait for this child too. */
	close(STDIN_FILENO);
	close(STDOUT_FILENO);
	close(STDERR_FILENO);
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd >= 0)
		sendto(fd, req->msg, req->len, 0, (const struct sockaddr *)&kernel, sizeof(kernel));
	return 0;
}

/**
 * netns_link_del_begin() - delete a link in a child, without waiting
 * @index: the link (a veth takes its peer along), in the calling thread's
 *         namespace
 *
 * The kernel answers a link deletion only after its grace periods, tens of
 * milliseconds; the link is gone from view about a millisecond after the
 * request reaches it. The child makes the request and waits for that
 * answer; it ends by itself, and the caller may exit before (and leave it
 * to init to reap), or reap it with netns_link_del_reap().
 *
 * The child shares this process's memory (CLONE_VM, as posix_spawn() does,
 * without waiting for it): a fork() would copy the page tables of every
 * library sluice maps, which on a paravirtualised machine costs a
 * millisecond or more. One such child at a time; a second call forks.
 *
 * Return: the child's pid, or a negative errno (nothing was started).
 */
pid_t netns_link_del_begin(int index)
{
	struct deleter_req req = { 0 };
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	pid_t pid;

	/* No acknowledgement asked for: nobody reads it. */
	nlh = link_msg(req.msg, RTM_DELLINK, NLM_F_REQUEST, &ifm);
	ifm->ifi_index = index;
	req.len = nlh->nlmsg_len;
	if (deleter.busy) {
		pid = fork();
		if (pid == 0)
			_exit(deleter_main(&req));
		return pid < 0 ? -errno : pid;
	}
	deleter.req = req;
	deleter.busy = true;
	pid = clone(deleter_main, deleter.stack + sizeof(deleter.stack), CLONE_VM | SIGCHLD,
		    &deleter.req);
	if (pid < 0) {
		deleter.busy = false;
		return -errno;
	}
	deleter.pid = pid;
	return pid;
}

/**
 * netns_link_del_reap() - collect a netns_link_del_begin() child that is
 * done, without waiting for one that is not
 * @pid: the child
 */
void netns_link_del_reap(pid_t pid)
{
	int status;

	if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid && pid == deleter.pid)
		deleter.busy = false;
}

/**
 * netns_link_set() - set a link up or down, as one request of a batch
 * @b:     the batch
 * @index: the link, in the namespace of the socket the batch goes to
 * @up:    up, or down
 */
void netns_link_set(struct netns_rtnl_batch *b, int index, bool up)
{
	struct nlmsghdr *nlh = batch_next(b);
	struct ifinfomsg *ifm;

	if (!nlh)
		return;
	nlh->nlmsg_type = RTM_NEWLINK;
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = index;
	ifm->ifi_flags = up ? IFF_UP : 0;
	ifm->ifi_change = IFF_UP;
	batch_done(b, nlh);
}

/**
 * netns_addr4_add() - add ADDR/PLEN to a link, as one request of a batch
 * @b:     the batch
 * @index: the link, in the namespace of the socket the batch goes to
 * @addr:  host byte order
 * @plen:  prefix length
 */
void netns_addr4_add(struct netns_rtnl_batch *b, int index, uint32_t addr, unsigned plen)
{
	struct nlmsghdr *nlh = batch_next(b);
	struct ifaddrmsg *ifa;
	uint32_t a = htonl(addr);

	if (!nlh)
		return;
	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (uint8_t)plen;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (uint32_t)index;
	mnl_attr_put_u32(nlh, IFA_LOCAL, a);
	mnl_attr_put_u32(nlh, IFA_ADDRESS, a);
	batch_done(b, nlh);
}

/**
 * netns_route4_default() - default route via @gw on a link, as one request
 * of a batch
 * @b:     the batch
 * @index: the link, in the namespace of the socket the batch goes to
 * @gw:    host byte order
 */
void netns_route4_default(struct netns_rtnl_batch *b, int index, uint32_t gw)
{
	struct nlmsghdr *nlh = batch_next(b);
	struct rtmsg *rtm;

	if (!nlh)
		return;
	nlh->nlmsg_type = RTM_NEWROUTE;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_BOOT;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put_u32(nlh, RTA_GATEWAY, htonl(gw));
	mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)index);
	batch_done(b, nlh);
}

/**
 * netns_link_flags() - a link's flags (IFF_UP ...)
 * @r:    a socket in the link's namespace
 * @name: the link
 *
 * Return: the flags (>= 0) or a negative errno.
 */
int netns_link_flags(struct netns_rtnl *r, const char *name)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(mnl_socket_get_fd(r->nl), SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	return (unsigned short)ifr.ifr_flags;
}

/* Is the link @name running? 1, 0, or a negative errno. */
static int link_running(struct netns_rtnl *r, const char *name)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(mnl_socket_get_fd(r->nl), SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	return (ifr.ifr_flags & IFF_RUNNING) != 0;
}

/**
 * netns_link_wait_running() - wait until links carry traffic
 * @r1:         a socket in the namespace of @name1
 * @name1:      a link
 * @r2:         a socket in the namespace of @name2; may be NULL
 * @name2:      another link, or NULL
 * @timeout_ms: the longest wait
 *
 * The kernel attaches a link's queueing discipline, and reports it
 * running, asynchronously after it is set up (linkwatch); until then it
 * drops what it is given. A sandbox handed over before would lose its
 * first packets.
 *
 * Return: 0; -ETIMEDOUT; another negative errno.
 */
int netns_link_wait_running(struct netns_rtnl *r1, const char *name1, struct netns_rtnl *r2,
			    const char *name2, unsigned timeout_ms)
{
	unsigned waited_us = 0, nap_us = 50;
	int k;

	for (;;) {
		k = link_running(r1, name1);
		if (k == 1 && r2 && name2)
			k = link_running(r2, name2);
		if (k != 0)
			return k < 0 ? k : 0;
		if (waited_us >= timeout_ms * 1000u)
			return -ETIMEDOUT;
		usleep(nap_us);
		waited_us += nap_us;
		if (nap_us < 2000)
			nap_us *= 2;
	}
}
