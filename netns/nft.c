// SPDX-License-Identifier: MIT
/* The firewall of the broker's namespace: one table, `inet sluice`, whose
 * rules match sandbox links by name ("sl-*") and whose per-sandbox state is
 * set elements only.
 *
 * Theory of operation: the rules are static; they depend only on the
 * broker's three ports. A sandbox adds one element, its link and address,
 * to @sandbox_src (anti-spoofing) and removes it on delete, so the cost of
 * a packet and of a create does not grow with the number of sandboxes.
 * Installing the table is idempotent: the last rule carries a signature
 * naming the ruleset version and the ports; when it is there, the table is
 * left alone (never flushed under running sandboxes); when it is not (a new
 * table, other ports, an older sluice), the chains are flushed and filled
 * in one transaction, which keeps the sets and the named counters.
 *
 * Two paths, for two costs. Installing is rare and is written in nft's
 * language (libnftables), under a lock. Everything a create or a delete
 * does every time, reading the signature and adding or deleting one
 * element, is one nf_tables netlink exchange built here with libmnl: a
 * libnftables context costs milliseconds (it reads /etc/iproute2, NSS and
 * the whole ruleset cache) where the kernel needs microseconds.
 *
 * libnftables is loaded (dlopen) by the process that installs, not linked:
 * with it come libnftnl, libxtables, libjansson and libgmp, and the
 * dynamic loader of every sluice process, a list or a delete too, would
 * map and relocate all five for an install that a broker needs once. */
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "netns/netns_internal.h"

#define RULESET_VERSION 2
#define LOCK_PATH NETNS_STATE_DIR "/.nft.lock"
#define LOCK_WAIT_MS 10000
#define TABLE "sluice"
#define SET "sandbox_src"
/* The chain whose last rule carries the signature. */
#define SIG_CHAIN "forward"
/* libnftnl's NFTNL_UDATA_RULE_COMMENT: a rule's comment in its user data. */
#define UDATA_RULE_COMMENT 0
/* A key of @sandbox_src: `ifname . ipv4_addr`, each field padded to 32-bit
 * registers: 16 bytes of name (NUL padded), then the address, network order. */
#define KEY_IFNAME_LEN 16
#define KEY_LEN (KEY_IFNAME_LEN + 4)
/* The per-sandbox meter of UDP DNS (see RULESET), as nft spells them. */
#define DNS_METER_RATE "1000/second"
#define DNS_METER_BURST "1000 packets"

/*
 * %1$u proxy port, %2$u transparent port, %3$u dns port, %4$s signature.
 *
 * fragments (prerouting at -450, before defragmentation at -400): IPv4
 * fragments from a sandbox link are dropped. TCP sets DF and DNS queries
 * are small; held for reassembly they would fill the namespace's
 * reassembly memory (ipfrag_high_thresh), and the kernel would drop every
 * fragmented datagram there, other sandboxes' and the host's.
 * guard (prerouting, before conntrack): IPv6 and spoofed sources are
 * dropped (a reject would answer the forged address); TCP and DNS go on;
 * everything else is refused at once with admin-prohibited, wherever it
 * was going, so that forwarding settings never matter.
 * DNS over UDP is metered per source first (@dns_rate, one element per
 * sandbox address, made by its first query and gone 10 s after its last):
 * what a sandbox sends beyond DNS_METER_RATE a second (burst
 * DNS_METER_BURST) is dropped here, before it reaches the broker's UDP
 * socket. That socket's queue is shared by every sandbox; without the
 * meter one sandbox's flood filled it, and the kernel dropped the other
 * sandboxes' queries with it. The broker's own per-sandbox limit (500/s,
 * burst 1000, answered REFUSED) stays the first any client meets: the meter
 * is twice that, so it drops only what the broker would refuse anyway
 * (answers and REFUSED: 500/s each, burst 1000 each). What it lets through
 * at once, rate plus burst (2000 datagrams), fits a worker's socket buffer
 * (UDP_RCVBUF in dnsfilter/server.c) even before the worker reads any.
 * divert (dstnat): DNS to the filter; TCP to the gateway's own address on
 * the proxy port is the explicit proxy (fib ... iif: local *on the link it
 * came from*, not any address of the broker); all other TCP to the
 * transparent port. Redirect rewrites the destination to the gateway.
 * input: after divert, only the three listeners; the rest is refused.
 * forward: nothing is forwarded from or to a sandbox link.
 * One rule a line, as `nft -f` reads them; clang-format would line every
 * backslash up past the longest rule.
 */
/* clang-format off */
#define RULESET \
	"add table inet sluice\n" \
	"add set inet sluice sandbox_src { type ifname . ipv4_addr; }\n" \
	"add set inet sluice dns_rate { type ipv4_addr; size 65536; flags dynamic,timeout; timeout 10s; }\n" \
	"add counter inet sluice spoofed\n" \
	"add counter inet sluice ipv6_dropped\n" \
	"add counter inet sluice refused\n" \
	"add counter inet sluice forward_refused\n" \
	"add counter inet sluice dns_flood\n" \
	"add chain inet sluice fragments { type filter hook prerouting priority -450; policy accept; }\n" \
	"add chain inet sluice guard { type filter hook prerouting priority raw; policy accept; }\n" \
	"add chain inet sluice divert { type nat hook prerouting priority dstnat; policy accept; }\n" \
	"add chain inet sluice input { type filter hook input priority filter; policy accept; }\n" \
	"add chain inet sluice forward { type filter hook forward priority filter; policy accept; }\n" \
	"flush chain inet sluice fragments\n" \
	"flush chain inet sluice guard\n" \
	"flush chain inet sluice divert\n" \
	"flush chain inet sluice input\n" \
	"flush chain inet sluice forward\n" \
	"add rule inet sluice fragments iifname \"sl-*\" ip frag-off & 0x3fff != 0 counter name \"refused\" drop\n" \
	"add rule inet sluice guard iifname \"sl-*\" meta nfproto ipv6 counter name \"ipv6_dropped\" drop\n" \
	"add rule inet sluice guard iifname \"sl-*\" iifname . ip saddr != @sandbox_src counter name \"spoofed\" drop\n" \
	"add rule inet sluice guard iifname \"sl-*\" meta l4proto tcp accept\n" \
	"add rule inet sluice guard iifname \"sl-*\" udp dport 53 update @dns_rate { ip saddr limit rate over " DNS_METER_RATE " burst " DNS_METER_BURST " } counter name \"dns_flood\" drop\n" \
	"add rule inet sluice guard iifname \"sl-*\" udp dport 53 accept\n" \
	"add rule inet sluice guard iifname \"sl-*\" counter name \"refused\" reject with icmpx type admin-prohibited\n" \
	"add rule inet sluice divert iifname \"sl-*\" udp dport 53 redirect to :%3$u\n" \
	"add rule inet sluice divert iifname \"sl-*\" tcp dport 53 redirect to :%3$u\n" \
	"add rule inet sluice divert iifname \"sl-*\" tcp dport %1$u fib daddr . iif type local accept\n" \
	"add rule inet sluice divert iifname \"sl-*\" meta l4proto tcp redirect to :%2$u\n" \
	"add rule inet sluice input iifname \"sl-*\" tcp dport { %1$u, %2$u, %3$u } accept\n" \
	"add rule inet sluice input iifname \"sl-*\" udp dport %3$u accept\n" \
	"add rule inet sluice input iifname \"sl-*\" counter name \"refused\" reject with icmpx type admin-prohibited\n" \
	"add rule inet sluice forward oifname \"sl-*\" counter name \"forward_refused\" drop\n" \
	"add rule inet sluice forward iifname \"sl-*\" counter name \"forward_refused\" reject with icmpx type admin-prohibited comment \"%4$s\"\n"
/* clang-format on */

/* The soname sluice is built against (nftables/libnftables.h). */
#define LIBNFTABLES "libnftables.so.1"

/* What run() uses of libnftables, typed from its header, so that a
 * prototype that changes breaks the build rather than the call. */
struct nft_api {
	__typeof__(nft_ctx_new) *ctx_new;
	__typeof__(nft_ctx_free) *ctx_free;
	__typeof__(nft_ctx_buffer_output) *buffer_output;
	__typeof__(nft_ctx_buffer_error) *buffer_error;
	__typeof__(nft_ctx_get_error_buffer) *get_error_buffer;
	__typeof__(nft_run_cmd_from_buffer) *run_cmd_from_buffer;
};

/* Loads libnftables once; it stays loaded for the life of the process.
 * Return: the table, or NULL with @err saying why. */
static const struct nft_api *nft_api(struct sl_err *err)
{
	static struct nft_api api;
	static bool loaded;
	const char *e;
	void *h;

	if (loaded)
		return &api;
	h = dlopen(LIBNFTABLES, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		e = dlerror();
		sl_err_set(err, ENOPKG, "nftables: cannot load %s: %s", LIBNFTABLES,
			   e ? e : "unknown error");
		return NULL;
	}
	/* POSIX: a function pointer from dlsym() goes through *(void **). */
	*(void **)&api.ctx_new = dlsym(h, "nft_ctx_new");
	*(void **)&api.ctx_free = dlsym(h, "nft_ctx_free");
	*(void **)&api.buffer_output = dlsym(h, "nft_ctx_buffer_output");
	*(void **)&api.buffer_error = dlsym(h, "nft_ctx_buffer_error");
	*(void **)&api.get_error_buffer = dlsym(h, "nft_ctx_get_error_buffer");
	*(void **)&api.run_cmd_from_buffer = dlsym(h, "nft_run_cmd_from_buffer");
	if (!api.ctx_new || !api.ctx_free || !api.buffer_output || !api.buffer_error ||
	    !api.get_error_buffer || !api.run_cmd_from_buffer) {
		sl_err_set(err, ENOPKG, "nftables: %s lacks a function sluice uses", LIBNFTABLES);
		dlclose(h);
		return NULL;
	}
	loaded = true;
	return &api;
}

/* Runs @cmd with libnftables; on failure copies nft's first error line to
 * @err. */
static int run(const char *cmd, struct sl_err *err)
{
	const struct nft_api *nft = nft_api(err);
	struct nft_ctx *ctx;
	int r = 0;

	if (!nft)
		return -ENOPKG;
	ctx = nft->ctx_new(NFT_CTX_DEFAULT);
	if (!ctx)
		return sl_err_set(err, ENOMEM, "nftables: cannot make a context");
	if (nft->buffer_output(ctx) < 0 || nft->buffer_error(ctx) < 0) {
		nft->ctx_free(ctx);
		return sl_err_set(err, ENOMEM, "nftables: cannot buffer output");
	}
	if (nft->run_cmd_from_buffer(ctx, cmd) != 0) {
		const char *e = nft->get_error_buffer(ctx);
		size_t n;

		e = e ? e : "";
		n = strcspn(e, "\n");
		r = strstr(e, "No such file or directory") ? -ENOENT : -EIO;
		sl_err_set(err, r, "nftables: %.*s", (int)(n > 300 ? 300 : n), n ? e : "failed");
	}
	nft->ctx_free(ctx);
	return r;
}

/* An exclusive lock on LOCK_PATH, waited for at most LOCK_WAIT_MS. */
static int lock_take(void)
{
	unsigned waited = 0;
	int fd;

	if (mkdir(NETNS_STATE_DIR, 0755) < 0 && errno != EEXIST)
		return -errno;
	fd = open(LOCK_PATH, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if ((errno != EWOULDBLOCK && errno != EINTR) || waited >= LOCK_WAIT_MS) {
			int e = errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;

			close(fd);
			return e;
		}
		usleep(10000);
		waited += 10;
	}
	return fd;
}

/* --- nf_tables over netlink (libmnl) ------------------------------------ */

struct nfnl {
	struct mnl_socket *nl;
	uint32_t portid;
	uint32_t seq;
};

static int nfnl_open(struct nfnl *n)
{
	struct timeval tv = { .tv_sec = 5 };
	int e;

	memset(n, 0, sizeof(*n));
	n->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (!n->nl)
		return -errno;
	/* A kernel that never answers must not hang sluice. */
	setsockopt(mnl_socket_get_fd(n->nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (mnl_socket_bind(n->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		e = -errno;
		mnl_socket_close(n->nl);
		n->nl = NULL;
		return e;
	}
	n->portid = mnl_socket_get_portid(n->nl);
	n->seq = (uint32_t)time(NULL);
	return 0;
}

static void nfnl_close(struct nfnl *n)
{
	if (n->nl)
		mnl_socket_close(n->nl);
	n->nl = NULL;
}

/*
 * nfnl_close(), but first, with @held, a copy of the socket goes there
 * (-1 if none can be made): the last close of an nf_tables socket waits
 * until the kernel has freed what every transaction before it, of any
 * process, removed (nft_rcv_nl_event() flushes the deferred destruction,
 * which waits for an RCU grace period): after a `sluice delete`,
 * milliseconds, for nothing the caller needs. With @held the caller
 * chooses where that close happens (`sluice create` and `sluice delete`
 * leave it to a child that outlives them, netns_linger()). Without a copy,
 * the close here is the last.
 */
static void nfnl_hand_over(struct nfnl *n, int *held)
{
	if (held)
		*held = fcntl(mnl_socket_get_fd(n->nl), F_DUPFD_CLOEXEC, 3);
	nfnl_close(n);
}

/* An nfnetlink message header at @buf. */
static struct nlmsghdr *nfnl_put(char *buf, uint16_t type, uint16_t flags, uint8_t family,
				 uint16_t res_id, uint32_t seq)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfgenmsg *nfg;

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = family;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(res_id);
	return nlh;
}

/* Reads answers to @seq until the kernel's acknowledgement or the end of a
 * dump; @cb (may be NULL) sees each data message. Return: 0, @cb's
 * negative errno, or the kernel's. */
static int nfnl_wait(struct nfnl *n, uint32_t seq, mnl_cb_t cb, void *data)
{
	char buf[16384];

	for (;;) {
		ssize_t got = mnl_socket_recvfrom(n->nl, buf, sizeof(buf));
		int k;

		if (got < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		errno = 0;
		k = mnl_cb_run(buf, (size_t)got, seq, n->portid, cb, data);
		if (k == MNL_CB_ERROR)
			return errno ? -errno : -EIO;
		if (k == MNL_CB_STOP)
			return 0;
	}
}

struct sig_search {
	const char *sig;
	bool found;
};

/* One rule of the dump: does its comment equal the signature? */
static int rule_cb(const struct nlmsghdr *nlh, void *data)
{
	struct sig_search *s = data;
	const struct nlattr *a;
	size_t want = strlen(s->sig) + 1;

	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
		const uint8_t *u, *end;

		if (mnl_attr_get_type(a) != NFTA_RULE_USERDATA)
			continue;
		/* User data: (type, length, value) records, one byte each for
		 * type and length; the comment's value ends with its NUL. */
		u = mnl_attr_get_payload(a);
		end = u + mnl_attr_get_payload_len(a);
		while (end - u >= 2 && end - u >= 2 + u[1]) {
			if (u[0] == UDATA_RULE_COMMENT && u[1] == want &&
			    !memcmp(u + 2, s->sig, want))
				s->found = true;
			u += 2 + u[1];
		}
	}
	return MNL_CB_OK;
}

/*
 * Is the ruleset with signature @sig in force? One dump of the rules of
 * the signature's chain, which holds two rules whatever the number of
 * sandboxes. Return: 1, 0 (no table, no chain, no such rule), or a
 * negative errno.
 */
static int ruleset_in_force(const char *sig, int *held)
{
	struct sig_search s = { .sig = sig };
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	struct nfnl n;
	int r;

	if (held)
		*held = -1;
	r = nfnl_open(&n);
	if (r < 0)
		return r;
	nlh = nfnl_put(buf, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETRULE, NLM_F_DUMP, NFPROTO_INET,
		       0, ++n.seq);
	mnl_attr_put_strz(nlh, NFTA_RULE_TABLE, TABLE);
	mnl_attr_put_strz(nlh, NFTA_RULE_CHAIN, SIG_CHAIN);
	if (mnl_socket_sendto(n.nl, nlh, nlh->nlmsg_len) < 0)
		r = -errno;
	else
		r = nfnl_wait(&n, n.seq, rule_cb, &s);
	nfnl_hand_over(&n, held);
	if (r == -ENOENT)
		return 0;
	return r < 0 ? r : s.found;
}

/*
 * The elements of the sandboxes this namespace's broker already has, back
 * into a table that was just installed. The table is missing when another
 * tool flushed the ruleset (Layout 2: an nftables.service restart); the
 * sandboxes made before would reach nothing until made again. Their
 * records (NETNS_STATE_DIR/NAME/sandbox, written once a sandbox is wired
 * and registered) name their link and address; a record of another
 * broker's namespace is not ours. An element that is there already (a
 * table kept across a new ruleset version) is no error. Best effort: a
 * sandbox left out stays cut off, as before, and is logged.
 * Return: the number of elements put back.
 */
static unsigned restore_elements(void)
{
	uint64_t dev, ino;
	unsigned n = 0, seen = 0;
	struct dirent *e;
	DIR *d;

	if (netns_self_ns_id(&dev, &ino) < 0)
		return 0;
	d = opendir(NETNS_STATE_DIR);
	if (!d)
		return 0;
	/* Bounded: at most 65,536 entries looked at. */
	while ((e = readdir(d)) && seen++ < 65536) {
		struct netns_sandbox sb;
		int r;

		if (e->d_name[0] == '.' || !netns_name_ok(e->d_name) ||
		    netns_state_read(e->d_name, &sb, NULL) < 0 || sb.broker_ns_dev != dev ||
		    sb.broker_ns_ino != ino || !sb.link[0] || !sb.addr)
			continue;
		r = netns_nft_element(true, sb.link, sb.addr, NULL, NULL);
		if (r == 0 || r == -EEXIST)
			n++;
		else
			log_warn("netns: sandbox `%s`: its element could not be put back into "
				 "table inet %s: %s; it stays cut off until made again",
				 sb.name, TABLE, strerror(-r));
	}
	closedir(d);
	return n;
}

/**
 * netns_nft_install() - make sure table inet sluice is in force for @p
 * @p:      the broker's ports
 * @held:   NULL, or where a descriptor of the socket goes (-1 if none); the
 *          caller closes it (see nfnl_hand_over())
 * @err:    why not (NULL: not wanted)
 *
 * Works in the calling thread's network namespace (the broker's). When the
 * signature is there (every create but a broker's first), that is one
 * netlink dump and nothing else.
 *
 * Return: 0 or a negative errno.
 */
int netns_nft_install(const struct netns_ports *p, int *held, struct sl_err *err)
{
	char sig[96], cmd[sizeof(RULESET) + 256];
	int fd, r, n;

	snprintf(sig, sizeof(sig), "sluice ruleset %d ports %u %u %u", RULESET_VERSION, p->proxy,
		 p->transparent, p->dns);
	if (ruleset_in_force(sig, held) == 1)
		return 0;
	fd = lock_take();
	if (fd < 0)
		return sl_err_sys(err, fd, "cannot lock %s", LOCK_PATH);
	/* Another create may have installed it while we waited for the lock.
	 * Should the check itself fail, installing again does no harm: it is
	 * one transaction that keeps the sets. */
	if (ruleset_in_force(sig, NULL) == 1) {
		r = 0;
		goto out;
	}
	/* RULESET names its arguments by position (%1$u ... %4$s), which
	 * cppcheck counts as if they were in order. */
	// cppcheck-suppress invalidPrintfArgType_uint
	n = snprintf(cmd, sizeof(cmd), RULESET, p->proxy, p->transparent, p->dns, sig);
	if (n < 0 || (size_t)n >= sizeof(cmd)) {
		r = sl_err_set(err, ENAMETOOLONG, "nftables: ruleset too long");
		goto out;
	}
	r = run(cmd, err);
	if (r == 0) {
		unsigned k = restore_elements();

		if (k)
			log_info("netns: table inet %s installed again, with the elements of the "
				 "%u sandboxes made before",
				 TABLE, k);
	}
out:
	close(fd); /* releases the lock */
	return r;
}

/*
 * What netns_nft_element() and netns_nft_element_present() share: the
 * element's key (@link, NUL-padded, then @addr in network order) checked
 * and built into @key, and an nf_tables socket opened in @n (closed by the
 * caller). Return: 0, or a negative errno with @err.
 */
static int element_key(const char *link, uint32_t addr, uint8_t key[KEY_LEN], struct nfnl *n,
		       struct sl_err *err)
{
	uint32_t be = htonl(addr);
	size_t nlen = strlen(link);
	int r;

	if (nlen == 0 || nlen >= KEY_IFNAME_LEN) {
		sl_err_set(err, EINVAL, "nftables: bad link name `%s`", link);
		return -EINVAL;
	}
	memset(key, 0, KEY_LEN);
	memcpy(key, link, nlen + 1); /* fits: nlen < KEY_IFNAME_LEN */
	memcpy(key + KEY_IFNAME_LEN, &be, 4);
	r = nfnl_open(n);
	if (r < 0)
		sl_err_sys(err, r, "nftables: cannot open netlink");
	return r;
}

/* The element list of @nlh: the one element whose key is @key. */
static void element_put(struct nlmsghdr *nlh, const uint8_t key[KEY_LEN])
{
	struct nlattr *list, *el, *k;

	mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, TABLE);
	mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, SET);
	list = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
	el = mnl_attr_nest_start(nlh, NFTA_LIST_ELEM);
	k = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_KEY);
	mnl_attr_put(nlh, NFTA_DATA_VALUE, KEY_LEN, key);
	mnl_attr_nest_end(nlh, k);
	mnl_attr_nest_end(nlh, el);
	mnl_attr_nest_end(nlh, list);
}

/**
 * netns_nft_element() - add or delete a sandbox's element of @sandbox_src
 * @add:    add (idempotent) or delete
 * @link:   the broker-side link
 * @addr:   the sandbox address, host byte order
 * @held:   NULL, or where a descriptor of the socket goes (-1 if none); the
 *          caller closes it (see nfnl_hand_over())
 * @err:    why not (NULL: not wanted)
 *
 * One nf_tables transaction (batch begin, the element, batch end), sent in
 * one message and acknowledged once, in the calling thread's namespace.
 *
 * Return: 0; -ENOENT when deleting an element (or a table) that is not
 * there; another negative errno.
 */
int netns_nft_element(bool add, const char *link, uint32_t addr, int *held, struct sl_err *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE], a[INET_ADDRSTRLEN];
	struct in_addr ia = { .s_addr = htonl(addr) };
	uint8_t key[KEY_LEN];
	struct nlmsghdr *nlh;
	size_t off = 0;
	uint32_t seq;
	struct nfnl n;
	int r;

	if (held)
		*held = -1;
	inet_ntop(AF_INET, &ia, a, sizeof(a));
	r = element_key(link, addr, key, &n, err);
	if (r < 0)
		return r;
	/* One sequence number for the three: an error names the message it is
	 * about by it, and only the element asks for an acknowledgement. */
	seq = ++n.seq;
	nlh = nfnl_put(buf, NFNL_MSG_BATCH_BEGIN, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES, seq);
	off += NLMSG_ALIGN(nlh->nlmsg_len);
	nlh = nfnl_put(buf + off,
		       (NFNL_SUBSYS_NFTABLES << 8) |
			       (add ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM),
		       NLM_F_ACK | (add ? NLM_F_CREATE : 0), NFPROTO_INET, 0, seq);
	element_put(nlh, key);
	off += NLMSG_ALIGN(nlh->nlmsg_len);
	nlh = nfnl_put(buf + off, NFNL_MSG_BATCH_END, 0, AF_UNSPEC, NFNL_SUBSYS_NFTABLES, seq);
	off += NLMSG_ALIGN(nlh->nlmsg_len);

	if (mnl_socket_sendto(n.nl, buf, off) < 0)
		r = -errno;
	else
		r = nfnl_wait(&n, seq, NULL, NULL);
	nfnl_hand_over(&n, held);
	if (r < 0)
		sl_err_sys(err, r, "nftables: cannot %s element { \"%s\" . %s } of inet %s %s",
			   add ? "add" : "delete", link, a, TABLE, SET);
	return r;
}

/**
 * netns_nft_element_present() - is a sandbox's element in @sandbox_src?
 * @link:   the broker-side link
 * @addr:   the sandbox address, host byte order
 * @err:    why it cannot be told (NULL: not wanted)
 *
 * One nf_tables GETSETELEM of that key (sluice-cni's CHECK): the set is
 * not listed, so the cost does not grow with the number of sandboxes.
 *
 * Return: 1 present; 0 absent (or no table); a negative errno.
 */
int netns_nft_element_present(const char *link, uint32_t addr, struct sl_err *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct in_addr ia = { .s_addr = htonl(addr) };
	uint8_t key[KEY_LEN];
	struct nlmsghdr *nlh;
	uint32_t seq;
	struct nfnl n;
	int r;

	r = element_key(link, addr, key, &n, err);
	if (r < 0)
		return r;
	seq = ++n.seq;
	/* Not a dump: the kernel answers the one element, then the ack. */
	nlh = nfnl_put(buf, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETSETELEM, NLM_F_ACK,
		       NFPROTO_INET, 0, seq);
	element_put(nlh, key);
	if (mnl_socket_sendto(n.nl, buf, nlh->nlmsg_len) < 0)
		r = -errno;
	else
		r = nfnl_wait(&n, seq, NULL, NULL);
	nfnl_close(&n);
	if (r == 0)
		return 1;
	if (r == -ENOENT)
		return 0;
	return sl_err_sys(err, r, "nftables: cannot look up element { \"%s\" . %s } of inet %s %s",
			  link, inet_ntoa(ia), TABLE, SET);
}
