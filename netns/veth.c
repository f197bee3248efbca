// SPDX-License-Identifier: MIT
/* The wire of a sandbox: a veth pair, its addresses, the sandbox's default
 * route, over rtnetlink with libmnl. A netlink socket works in the network
 * namespace it was opened in, so a caller opens one per namespace. */
#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "netns/netns_internal.h"

/* Every request is one message, far below this. */
#define RTNL_BUF 8192

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

/* Sends @nlh and waits for its acknowledgement. Return: 0 or the kernel's
 * negative errno. */
static int talk(struct netns_rtnl *r, struct nlmsghdr *nlh)
{
	char buf[RTNL_BUF];

	nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = ++r->seq;
	if (mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(r->nl, buf, sizeof(buf));
		int k;

		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		k = mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, r->portid, NULL, NULL);
		if (k < 0)
			return -errno;
		if (k == MNL_CB_STOP)
			return 0;
	}
}

static struct nlmsghdr *link_msg(char *buf, uint16_t type, uint16_t flags,
				 struct ifinfomsg **ifm)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = flags;
	*ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(**ifm));
	(*ifm)->ifi_family = AF_UNSPEC;
	return nlh;
}

/**
 * netns_veth_add() - a veth pair whose peer starts life in another namespace
 * @r:         a socket in the namespace of @name
 * @name:      this end's name
 * @peer:      the other end's name, in @peer_nsfd
 * @peer_nsfd: the namespace of the other end
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
 * netns_link_del() - delete a link by name (a veth takes its peer along)
 * @r:    a socket in the link's namespace
 * @name: the link
 *
 * Return: 0; -ENODEV when there is no such link; another negative errno.
 */
int netns_link_del(struct netns_rtnl *r, const char *name)
{
	char buf[RTNL_BUF];
	struct ifinfomsg *ifm;
	struct nlmsghdr *nlh = link_msg(buf, RTM_DELLINK, 0, &ifm);

	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	return talk(r, nlh);
}

/* The index of @name in the socket's namespace (the caller's, too). */
static int ifindex(const char *name)
{
	unsigned idx = if_nametoindex(name);

	return idx ? (int)idx : -ENODEV;
}

/**
 * netns_link_up() - set a link up
 * @r:    a socket in the link's namespace, which is the caller's
 * @name: the link
 *
 * Return: 0 or a negative errno.
 */
int netns_link_up(struct netns_rtnl *r, const char *name)
{
	char buf[RTNL_BUF];
	struct ifinfomsg *ifm;
	struct nlmsghdr *nlh = link_msg(buf, RTM_NEWLINK, 0, &ifm);
	int idx = ifindex(name);

	if (idx < 0)
		return idx;
	ifm->ifi_index = idx;
	ifm->ifi_flags = IFF_UP;
	ifm->ifi_change = IFF_UP;
	return talk(r, nlh);
}

/**
 * netns_addr4_add() - add ADDR/PLEN to a link
 * @r:    a socket in the link's namespace, which is the caller's
 * @dev:  the link
 * @addr: host byte order
 * @plen: prefix length
 *
 * Return: 0 or a negative errno.
 */
int netns_addr4_add(struct netns_rtnl *r, const char *dev, uint32_t addr, unsigned plen)
{
	char buf[RTNL_BUF];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifaddrmsg *ifa;
	uint32_t a = htonl(addr);
	int idx = ifindex(dev);

	if (idx < 0)
		return idx;
	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (uint8_t)plen;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (uint32_t)idx;
	mnl_attr_put_u32(nlh, IFA_LOCAL, a);
	mnl_attr_put_u32(nlh, IFA_ADDRESS, a);
	return talk(r, nlh);
}

/**
 * netns_route4_default() - default route via @gw on @dev
 * @r:   a socket in the namespace, which is the caller's
 * @dev: the link
 * @gw:  host byte order
 *
 * Return: 0 or a negative errno.
 */
int netns_route4_default(struct netns_rtnl *r, const char *dev, uint32_t gw)
{
	char buf[RTNL_BUF];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct rtmsg *rtm;
	int idx = ifindex(dev);

	if (idx < 0)
		return idx;
	nlh->nlmsg_type = RTM_NEWROUTE;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_BOOT;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put_u32(nlh, RTA_GATEWAY, htonl(gw));
	mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)idx);
	return talk(r, nlh);
}

/**
 * netns_link_wait_running() - wait until a link in the caller's namespace
 * carries traffic
 * @name:       the link
 * @timeout_ms: the longest wait
 *
 * The kernel attaches a link's queueing discipline, and reports it
 * running, asynchronously after it is set up (linkwatch); until then it
 * drops what it is given. A sandbox handed over before would lose its
 * first packets.
 *
 * Return: 0; -ETIMEDOUT; another negative errno.
 */
int netns_link_wait_running(const char *name, unsigned timeout_ms)
{
	struct ifreq ifr;
	unsigned waited = 0;
	int fd, r = -ETIMEDOUT;

	if (strlen(name) >= sizeof(ifr.ifr_name))
		return -EINVAL;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	for (;;) {
		memset(&ifr, 0, sizeof(ifr));
		strcpy(ifr.ifr_name, name);
		if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
			r = -errno;
			break;
		}
		if (ifr.ifr_flags & IFF_RUNNING) {
			r = 0;
			break;
		}
		if (waited >= timeout_ms)
			break;
		usleep(2000);
		waited += 2;
	}
	close(fd);
	return r;
}
