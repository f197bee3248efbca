// SPDX-License-Identifier: MIT
/* `sluice create NAME --policy FILE`: a network namespace wired to the
 * broker of the namespace sluice runs in.
 *
 * Theory of operation: the broker hands out the address (register NAME
 * auto POLICY); while it does, the sandbox's network namespace is made,
 * still nameless (IPv6 off, an rtnetlink socket left inside it), and the
 * firewall's table is checked, sluice's directory of the sandbox
 * (NETNS_STATE_DIR/NAME, which also marks everything else as sluice's to
 * delete) is made with the system's part of its trust bundle, and the
 * namespace is named /run/netns/NAME. Then, with the broker's answer, in
 * order: the sandbox's record and its bundle finished with its CA,
 * /etc/netns/NAME/resolv.conf, the veth pair and its addresses and route,
 * and last the sandbox's element in the nftables set that lets its traffic
 * in. Each step that succeeds is
 * noted; on any failure the noted steps are undone in reverse and the
 * registration is withdrawn, so a failed create leaves nothing behind.
 * Signals that would end sluice are held meanwhile (netns_sandbox_create()
 * callers block them) so that the undo always runs.
 *
 * Nothing here costs more with more sandboxes: no listing of links,
 * mounts or set elements, one netlink exchange per step. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "common/ctlproto.h"
#include "common/err.h"
#include "common/log.h"
#include "common/text.h"
#include "netns/netns.h"
#include "netns/netns_internal.h"
#include "policy/policy.h"

/* Far more than any system trust store; the copy is read whole. */
#define CA_BUNDLE_MAX (16u << 20)
/* linkwatch brings a fresh veth up in microseconds to milliseconds. */
#define LINK_WAIT_MS 2000
/* A link of a sandbox being deleted is gone within milliseconds. */
#define LINK_GONE_MS 1000
/* One sweep of the trash removes at most this many directories. */
#define TRASH_SWEEP_MAX 4096

struct build {
	struct netns_sandbox sb;
	int nsfd;
	struct netns_rtnl in;  /* rtnetlink in the sandbox's namespace */
	struct netns_rtnl out; /* and in the broker's */
	int link_index;	       /* of sb.link, in the broker's namespace */
	int cfg_fd, reg_fd;    /* requests to the broker not answered yet */
	size_t reg_got;	       /* bytes in @reg */
	int bundle_fd;	       /* the trust bundle being written, or -1 */
	bool no_store;	       /* there is no system trust store */
	int proc;	       /* a procfs of our own (netns_procfs_private()), or -1 */
	int lock;	       /* holds this name's byte of NETNS_CREATE_LOCK, or -1 */
	int nft_held[2];       /* nf_tables sockets whose last close waits, or -1 */
	bool keep_mark;	       /* what an interrupted create left is still there */
	bool registered, state_dir, netns, etc_dir, link, element;
	bool audit;	   /* `sluice create --audit`: register asks for audit mode */
	char ca_pem[4096]; /* the sandbox CA's certificate, from the broker */
	char reg[20480];   /* the answer to register so far (reg_read()) */
	/* attach: the runtime's namespace, and what was in it before sluice
	 * changed it (rollback() puts that back): disable_ipv6 of all,
	 * default and lo ('0', '1'; 0 where there was none), lo's state. */
	const char *nspath;
	bool v6_set, lo_set, lo_was_up;
	char others[160]; /* attach: the links that were in the way */
	char v6_old[3];
};

static int parse_port_line(const char *v, uint16_t *out)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || end == v || *end || x == 0 || x > 65535)
		return -EINVAL;
	*out = (uint16_t)x;
	return 0;
}

static int config_answer(int fd, struct netns_ports *p, struct sl_err *err);

/**
 * netns_broker_config() - the broker's ports, from its `config` answer
 * @p:      filled on success
 * @err:    why not (NULL: not wanted)
 *
 * Return: 0 or a negative errno.
 */
int netns_broker_config(struct netns_ports *p, struct sl_err *err)
{
	return config_answer(netns_ctl_send(CTL_CONFIG), p, err);
}

/* The answer to `config` on @fd (from netns_ctl_send(); closed here, and a
 * negative errno passed on), into @p. */
static int config_answer(int fd, struct netns_ports *p, struct sl_err *err)
{
	char *resp, *line, *save = NULL;
	unsigned seen = 0;
	int r = netns_ctl_recv(fd, &resp);

	if (r == -EPROTO) {
		sl_err_set(err, r, "broker: %s", resp);
		free(resp);
		return r;
	}
	if (r < 0) {
		sl_err_sys(err, r, "cannot reach sluiced at %s", netns_socket_path);
		return r;
	}
	for (line = strtok_r(resp, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *v = strchr(line, ' ');

		if (!v)
			continue;
		*v++ = '\0';
		/* Other keys are the broker's business. */
		if (!strcmp(line, "proxy_port"))
			r = parse_port_line(v, &p->proxy), seen |= 1;
		else if (!strcmp(line, "transparent_port"))
			r = parse_port_line(v, &p->transparent), seen |= 2;
		else if (!strcmp(line, "dns_port"))
			r = parse_port_line(v, &p->dns), seen |= 4;
		if (r < 0)
			break;
	}
	free(resp);
	if (r < 0 || seen != 7) {
		sl_err_set(err, EPROTO, "broker: unexpected answer to `config`");
		return -EPROTO;
	}
	return 0;
}

/* Sends register NAME auto POLICY netns [audit]; the answer is
 * register_answer()'s. */
static int register_send(const struct build *b, const char *policy)
{
	char line[PATH_MAX + 200];

	snprintf(line, sizeof(line), CTL_REGISTER " %s auto %s " CTL_REGISTER_NETNS "%s",
		 b->sb.name, policy, b->audit ? " " CTL_REGISTER_AUDIT : "");
	return netns_ctl_send(line);
}

/* The length of the answer's head, or 0 while it is not all in (or the
 * answer is not CTL_OK's). */
static size_t reg_head_len(const struct build *b)
{
	size_t ok = strlen(CTL_OK);
	const char *nl;

	if (b->reg_got < ok || strncmp(b->reg, CTL_OK, ok) != 0)
		return 0;
	nl = memchr(b->reg + ok, '\n', b->reg_got - ok);
	return nl ? (size_t)(nl - b->reg) + 1 : 0;
}

/*
 * The answer to register, read as it comes, into @b->reg: the broker sends
 * its head (CTL_OK, the address, a newline) as soon as it holds the
 * address, and the rest (the sandbox CA's certificate, or CTL_ERR and why)
 * once the CA is made and the registration saved (broker/control.c,
 * job_reserve()), so that the wire is built meanwhile. A broker that
 * answers in one piece gives the same bytes. @head: return once the head
 * is in; else read to the end (the connection is closed then). Return: 0,
 * or a negative errno (-EMSGSIZE: an answer longer than @b->reg).
 */
static int reg_read(struct build *b, bool head)
{
	int r;

	for (;;) {
		ssize_t k;

		if ((head && reg_head_len(b)) || b->reg_fd < 0)
			return 0;
		if (b->reg_got == sizeof(b->reg) - 1)
			return -EMSGSIZE;
		k = recv(b->reg_fd, b->reg + b->reg_got, sizeof(b->reg) - 1 - b->reg_got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			r = k < 0 ? -errno : 0;
			close(b->reg_fd);
			b->reg_fd = -1;
			return r;
		}
		b->reg_got += (size_t)k;
		b->reg[b->reg_got] = '\0';
	}
}

/* Did the whole answer (read to its end) register the sandbox: a head,
 * then something that is not CTL_ERR? */
static bool reg_registered(const struct build *b)
{
	size_t h = reg_head_len(b);

	return h && b->reg_fd < 0 && b->reg_got > h &&
	       strncmp(b->reg + h, CTL_ERR, strlen(CTL_ERR)) != 0;
}

/* Why an answer read to its end refused the registration, into @err: the
 * broker's CTL_ERR line (after the head, when one came first); -EPROTO,
 * or -EIO for an answer that is neither. */
static int reg_refused(struct build *b, int r, struct sl_err *err)
{
	const char *e = b->reg + reg_head_len(b);

	if (r < 0 && r != -EMSGSIZE)
		return sl_err_sys(err, r, "cannot reach sluiced at %s", netns_socket_path);
	if (strncmp(e, CTL_ERR, strlen(CTL_ERR)) == 0) {
		e += strlen(CTL_ERR);
		return sl_err_set(err, EPROTO, "broker: %.*s", (int)strcspn(e, "\n"), e);
	}
	return sl_err_sys(err, r < 0 ? r : -EIO, "cannot reach sluiced at %s", netns_socket_path);
}

/* The address in the answer's head, into @b (its gateway, its link). */
static int register_address(struct build *b, struct sl_err *err)
{
	char a[INET_ADDRSTRLEN + 1];
	struct in_addr ia;
	size_t h, ok = strlen(CTL_OK);
	int r = reg_read(b, true);

	h = reg_head_len(b);
	if (r < 0 || !h) {
		if (r == 0)
			r = reg_read(b, false); /* to its end: why */
		return reg_refused(b, r, err);
	}
	snprintf(a, sizeof(a), "%.*s", (int)(h - 1 - ok), b->reg + ok);
	/* The broker allocates x.x.x.(4k+2) of a /30 whose .1 is the gateway. */
	if (h - 1 - ok >= sizeof(a) - 1 || inet_pton(AF_INET, a, &ia) != 1 ||
	    (ntohl(ia.s_addr) & 3) != 2)
		return sl_err_set(err, EPROTO, "broker: unexpected address `%.64s`", a);
	b->sb.addr = ntohl(ia.s_addr);
	b->sb.gw = b->sb.addr - 1;
	netns_link_name(b->sb.addr, b->sb.link);
	return 0;
}

/* The rest of the answer: the registration's outcome, and the sandbox's CA
 * (for its trust bundle) into @b. After register_address(). */
static int register_answer(struct build *b, struct sl_err *err)
{
	int r = reg_read(b, false);
	const char *pem = b->reg + reg_head_len(b);

	b->registered = reg_registered(b);
	if (r < 0 || !b->registered)
		return reg_refused(b, r, err);
	if (strlen(pem) >= sizeof(b->ca_pem) || !strstr(pem, "-----BEGIN CERTIFICATE-----"))
		return sl_err_set(err, EPROTO, "broker: no sandbox CA certificate in its answer");
	snprintf(b->ca_pem, sizeof(b->ca_pem), "%s", pem);
	return 0;
}

/* Is @dir empty? Return: 1, 0, or a negative errno (-ENOENT: no @dir). */
static int dir_empty(const char *dir)
{
	char buf[512];
	long n;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r = 1;

	if (fd < 0)
		return -errno;
	while (r == 1 && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			const struct dirent64 *d = (const struct dirent64 *)(buf + off);

			if (strcmp(d->d_name, ".") && strcmp(d->d_name, ".."))
				r = 0;
			off += d->d_reclen;
		}
	}
	if (n < 0)
		r = -errno;
	close(fd);
	return r;
}

/*
 * Moves the empty directory @dir into NETNS_TRASH_DIR, under a name of
 * this process's. A rename is tens of microseconds where an rmdir, on a
 * file system that frees and discards the directory's block there and
 * then (ext4 mounted with -o discard), took milliseconds: the name is free
 * at once, and netns_trash_sweep() removes the directory later. Return: 0,
 * or a negative errno (-EXDEV: another file system; the caller removes
 * @dir itself).
 */
static int trash_dir(const char *dir)
{
	static unsigned seq;
	char to[128];
	int r = dir_empty(dir), i;

	if (r <= 0)
		return r < 0 ? r : -ENOTEMPTY;
	snprintf(to, sizeof(to), NETNS_TRASH_DIR "/%d.%u", (int)getpid(), seq++);
	for (i = 0; i < 2; i++) {
		if (renameat2(AT_FDCWD, dir, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
			return 0;
		r = -errno;
		/* The first delete of the machine makes the trash. */
		if (r != -ENOENT || access(dir, F_OK) < 0 ||
		    (mkdir(NETNS_TRASH_DIR, 0700) < 0 && errno != EEXIST))
			break;
	}
	return r;
}

/**
 * netns_trash_sweep() - remove the directories trash_dir() moved aside
 *
 * Each is empty; one that is not (nothing sluice made puts files there) is
 * left. Bounded: at most TRASH_SWEEP_MAX per call.
 *
 * Return: 0, or a negative errno when the trash cannot be read.
 */
int netns_trash_sweep(void)
{
	struct dirent *de;
	unsigned n = 0;
	DIR *d = opendir(NETNS_TRASH_DIR);

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (n < TRASH_SWEEP_MAX && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
		n++;
	}
	closedir(d);
	return 0;
}

/* Removes the regular files in @dir (no recursion), then @dir: at once, or
 * (@later) into the trash (trash_dir()) where it can. */
static int remove_dir(const char *dir, const char *const *files, bool later)
{
	char path[600];
	size_t i;
	int r;

	for (i = 0; files[i]; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		if (unlink(path) < 0 && errno != ENOENT)
			return -errno;
	}
	r = later ? trash_dir(dir) : -EXDEV;
	if (r == 0 || r == -ENOENT || r == -ENOTEMPTY)
		return r;
	return rmdir(dir) < 0 ? -errno : 0;
}

/* Every file a sandbox's state directory can hold. */
static const char *const state_files[] = { "sandbox", "sandbox.tmp", "ca-bundle.crt",
					   "ca-bundle.crt.tmp", NULL };
static const char *const etc_files[] = { "resolv.conf", "resolv.conf.tmp", NULL };

/**
 * netns_remove_state_dir() - remove a sandbox's NETNS_STATE_DIR entry
 * @name:  a valid sandbox name
 * @later: its directory may go into the trash (netns_trash_sweep())
 *
 * Either way the name is free when this returns.
 *
 * Return: 0, -ENOENT, or another negative errno.
 */
int netns_remove_state_dir(const char *name, bool later)
{
	char dir[512];
	int r = netns_path(dir, sizeof(dir), NETNS_STATE_DIR, name, NULL);

	return r < 0 ? r : remove_dir(dir, state_files, later);
}

/**
 * netns_remove_etc_dir() - remove /etc/netns/NAME and the resolv.conf in it
 * @name:  a valid sandbox name
 * @later: as netns_remove_state_dir()'s (on another file system than
 *         NETNS_STATE_DIR, it goes at once all the same)
 *
 * Files someone else put there are left, and so is the directory then.
 *
 * Return: 0, -ENOENT, -ENOTEMPTY, or another negative errno.
 */
int netns_remove_etc_dir(const char *name, bool later)
{
	char dir[512];
	int r = netns_path(dir, sizeof(dir), NETNS_ETC_DIR, name, NULL);

	return r < 0 ? r : remove_dir(dir, etc_files, later);
}

/*
 * Sluice's directory of the sandbox (which marks the rest as sluice's to
 * delete), and the system's part of its trust bundle: done while the
 * broker makes the sandbox's CA. state_dir_end() writes the record and
 * finishes the bundle once the broker has answered.
 */
static int state_dir_begin(struct build *b, struct sl_err *err)
{
	char dir[512], bundle[600];
	int r;

	if (mkdir(NETNS_STATE_DIR, 0755) < 0 && errno != EEXIST) {
		r = -errno;
		sl_err_sys(err, r, "cannot make `%s`", NETNS_STATE_DIR);
		return r;
	}
	netns_path(dir, sizeof(dir), NETNS_STATE_DIR, b->sb.name, NULL);
	if (mkdir(dir, 0755) < 0) {
		r = -errno;
		if (r == -EEXIST)
			sl_err_set(err, r, "sandbox `%s` exists (%s)", b->sb.name, dir);
		else
			sl_err_sys(err, r, "cannot make `%s`", dir);
		return r;
	}
	b->state_dir = true;
	/* The name is ours now: a workspace under it is a leftover (of a
	 * sandbox gone with a reboot, or a delete that failed half-way), and
	 * a new sandbox starts with an empty one. */
	r = netns_workspace_remove(b->sb.name);
	if (r < 0 && r != -ENOENT) {
		sl_err_sys(err, r, "cannot remove the old workspace `%s/%s`", NETNS_WORKSPACE_DIR,
			   b->sb.name);
		return r;
	}
	/* The trust bundle: the system's CAs and the sandbox's own CA (for the
	 * hosts the broker intercepts). A system without a store gets a word. */
	snprintf(bundle, sizeof(bundle), "%s/ca-bundle.crt", dir);
	b->bundle_fd = netns_bundle_begin(NETNS_SYSTEM_CA, bundle, CA_BUNDLE_MAX, &b->no_store);
	if (b->bundle_fd < 0) {
		r = b->bundle_fd;
		sl_err_sys(err, r, "cannot write `%s` from %s", bundle, NETNS_SYSTEM_CA);
		return r;
	}
	return 0;
}

/* The record, and the bundle with the sandbox's CA (@b->ca_pem). */
static int state_dir_end(struct build *b, struct sl_err *err)
{
	char dir[512], bundle[600];
	int r;

	netns_path(dir, sizeof(dir), NETNS_STATE_DIR, b->sb.name, NULL);
	r = netns_state_write(&b->sb);
	if (r < 0) {
		sl_err_sys(err, r, "cannot write `%s/sandbox`", dir);
		return r;
	}
	snprintf(bundle, sizeof(bundle), "%s/ca-bundle.crt", dir);
	r = netns_bundle_end(b->bundle_fd, b->ca_pem, bundle);
	b->bundle_fd = -1;
	if (r < 0) {
		sl_err_sys(err, r, "cannot write `%s` from %s", bundle, NETNS_SYSTEM_CA);
		return r;
	}
	if (b->no_store)
		fprintf(stderr,
			"sluice: warning: no system trust store at %s; %s holds only "
			"the sandbox's CA\n",
			NETNS_SYSTEM_CA, bundle);
	return 0;
}

static int make_etc_dir(struct build *b, struct sl_err *err)
{
	struct in_addr ig = { .s_addr = htonl(b->sb.gw) };
	char dir[512], path[600], gw[INET_ADDRSTRLEN];
	int fd, r;

	if (mkdir(NETNS_ETC_DIR, 0755) < 0 && errno != EEXIST) {
		r = -errno;
		sl_err_sys(err, r, "cannot make `%s`", NETNS_ETC_DIR);
		return r;
	}
	netns_path(dir, sizeof(dir), NETNS_ETC_DIR, b->sb.name, NULL);
	if (mkdir(dir, 0755) < 0) {
		r = -errno;
		sl_err_sys(err, r, "cannot make `%s`", dir);
		return r;
	}
	b->etc_dir = true;
	inet_ntop(AF_INET, &ig, gw, sizeof(gw));
	snprintf(path, sizeof(path), "%s/resolv.conf", dir);
	/* 0644 whatever the umask: every user in the sandbox resolves names. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	r = fd < 0 || fchmod(fd, 0644) < 0 || dprintf(fd, "nameserver %s\n", gw) < 0 ? -errno : 0;
	if (fd >= 0 && close(fd) < 0 && r == 0)
		r = -errno;
	if (r < 0) {
		sl_err_sys(err, r, "cannot write `%s`", path);
		return r;
	}
	return 0;
}

/* Writes 1 to disable_ipv6 of @dev in the calling thread's namespace,
 * through the procfs @proc (see netns_procfs_private()), or /proc when it
 * is negative. A kernel without IPv6 has no such file, which is as good. */
static int ipv6_off(int proc, const char *dev)
{
	const char *root = proc >= 0 ? "sys/net/ipv6" : "/proc/sys/net/ipv6";
	int dfd = proc >= 0 ? proc : AT_FDCWD;
	char path[128];
	int r;

	snprintf(path, sizeof(path), "%s/conf/%s/disable_ipv6", root, dev);
	r = netns_sysctl_write(dfd, path, "1");
	if (r == -ENOENT && faccessat(dfd, root, F_OK, 0) < 0)
		return 0;
	return r;
}

/*
 * The broker side answers ARP only for its own gateway address (arp_ignore
 * 1, through @proc as ipv6_off()): a sandbox does not learn the broker's
 * other addresses, the other sandboxes' gateways among them. (Forwarding
 * is not turned off here: the next `sysctl net.ipv4.ip_forward=1`, which
 * Docker's start does, sets every link's back to 1. The guard and forward
 * chains refuse it.)
 */
static int arp_own_only(int proc, const char *dev)
{
	const char *root = proc >= 0 ? "sys/net/ipv4" : "/proc/sys/net/ipv4";
	char path[128];

	snprintf(path, sizeof(path), "%s/conf/%s/arp_ignore", root, dev);
	return netns_sysctl_write(proc >= 0 ? proc : AT_FDCWD, path, "1");
}

/*
 * The link @name is in the way of a new sandbox's. The broker gives an
 * address out again as soon as its sandbox is unregistered, and `sluice
 * delete` leaves the removal of that sandbox's link, marked by then
 * (netns_link_retire()), to a child: such a link goes within milliseconds,
 * and if it has not after @ms it goes now. Any other link is someone
 * else's, and is left alone. Return: true when @name is free.
 */
static bool clear_retired_link(struct netns_rtnl *r, const char *name, unsigned ms)
{
	unsigned waited;
	int k;

	if (netns_link_retired(r, name) != 1)
		return false;
	for (waited = 0; waited < ms; waited++) {
		if (netns_link_index(r, name) == -ENODEV)
			return true;
		usleep(1000);
	}
	k = netns_link_index(r, name);
	if (k > 0)
		k = netns_link_del(r, k);
	return k == 0 || k == -ENODEV;
}

static const char *const v6_links[] = { "all", "default", "lo" };

/* Run inside the new namespace, before it has a link other than lo: IPv6
 * off for all, and by default for the links to come (eth0 is made with
 * it off, so it never gets an IPv6 address), written through a procfs of
 * its own (netns_procfs_private(), kept in @b for the broker side); and
 * the sandbox's rtnetlink socket, which stays there. */
static int sandbox_inside(void *arg)
{
	struct build *b = arg;
	int e = 0;
	size_t i;

	b->proc = netns_procfs_private();
	for (i = 0; i < sizeof(v6_links) / sizeof(v6_links[0]) && e == 0; i++)
		e = ipv6_off(b->proc, v6_links[i]);
	return e < 0 ? e : netns_rtnl_open(&b->in);
}

/* disable_ipv6 of @dev in the calling thread's namespace: '0', '1', or 0
 * when it has none (no IPv6), through @proc as ipv6_off(). */
static char ipv6_get(int proc, const char *dev)
{
	char path[128], c = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/conf/%s/disable_ipv6",
		 proc >= 0 ? "sys/net/ipv6" : "/proc/sys/net/ipv6", dev);
	fd = openat(proc >= 0 ? proc : AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (read(fd, &c, 1) != 1 || (c != '0' && c != '1'))
		c = 0;
	close(fd);
	return c;
}

/*
 * attach: sandbox_inside() for a namespace a runtime made, run inside it.
 * It may hold anything: @ifname must not be there yet (checked before
 * anything is changed), and what is changed (IPv6, lo) is noted first, so
 * that rollback() can put it back. Return: 0, -EEXIST for a taken
 * @ifname, or another negative errno.
 */
static int attach_inside(void *arg)
{
	struct build *b = arg;
	int e, flags;
	size_t i;

	b->proc = netns_procfs_private();
	e = netns_rtnl_open(&b->in);
	if (e < 0)
		return e;
	e = netns_link_index(&b->in, b->sb.ifname);
	if (e != -ENODEV)
		return e > 0 ? -EEXIST : e;
	/* Sluice's link must be the only way out: another (a runtime's own
	 * network, a second one beside it) would carry what the broker never
	 * sees, by its routes or SO_BINDTODEVICE. */
	e = netns_link_others(&b->in, b->others, sizeof(b->others));
	if (e != 0)
		return e > 0 ? -ENOTUNIQ : e;
	flags = netns_link_flags(&b->in, "lo");
	b->lo_was_up = flags > 0 && (flags & IFF_UP);
	for (i = 0; i < sizeof(v6_links) / sizeof(v6_links[0]); i++)
		b->v6_old[i] = ipv6_get(b->proc, v6_links[i]);
	b->v6_set = true;
	for (i = 0, e = 0; i < sizeof(v6_links) / sizeof(v6_links[0]) && e == 0; i++)
		e = ipv6_off(b->proc, v6_links[i]);
	return e;
}

/* Puts back what attach_inside() and wire() changed in a runtime's
 * namespace, after the veth (and with it the address and the route) is
 * gone. */
static void attach_restore(struct build *b)
{
	struct netns_rtnl_batch batch;
	size_t i;
	int saved, k;

	if (b->lo_set && !b->lo_was_up && b->in.nl) {
		netns_rtnl_batch_init(&batch);
		netns_link_set(&batch, 1, false);
		k = netns_rtnl_batch_send(&b->in, &batch, NULL);
		if (k < 0)
			fprintf(stderr, "sluice: undo: cannot set lo down again: %s\n",
				strerror(-k));
	}
	if (!b->v6_set || b->nsfd < 0 || netns_ns_enter(b->nsfd, &saved) < 0)
		return;
	/* Newest first: lo, then default, then all. */
	for (i = sizeof(v6_links) / sizeof(v6_links[0]); i-- > 0;) {
		const char v[2] = { b->v6_old[i], '\0' };
		char path[128];

		if (!v[0] || v[0] == '1')
			continue;
		snprintf(path, sizeof(path), "%s/conf/%s/disable_ipv6",
			 b->proc >= 0 ? "sys/net/ipv6" : "/proc/sys/net/ipv6", v6_links[i]);
		k = netns_sysctl_write(b->proc >= 0 ? b->proc : AT_FDCWD, path, v);
		if (k < 0)
			fprintf(stderr, "sluice: undo: cannot turn IPv6 on again (%s): %s\n",
				v6_links[i], strerror(-k));
	}
	netns_ns_leave(saved);
}

/*
 * The wire, from the broker's namespace, with one socket in each: the veth
 * pair (the sandbox side made in the sandbox's namespace, where IPv6 is off
 * by default); on the broker side no IPv6 address, then GW/30 and up; on
 * the sandbox side lo up, ADDR/30, eth0 up and the default route via GW.
 * Four requests to the kernel.
 */
static int wire(struct build *b, struct sl_err *err)
{
	static const char *const in_steps[] = { "set lo up", "address the sandbox's interface",
						"set the sandbox's interface up",
						"add the default route" };
	struct netns_rtnl_batch batch;
	const char *step = "open rtnetlink";
	char gw[INET_ADDRSTRLEN];
	struct in_addr ig = { .s_addr = htonl(b->sb.gw) };
	unsigned failed = 0;
	int e, eth0;

	inet_ntop(AF_INET, &ig, gw, sizeof(gw));
	e = netns_rtnl_open(&b->out);
	if (e == 0) {
		step = "create the veth pair";
		e = netns_veth_add(&b->out, b->sb.link, b->sb.ifname, b->nsfd);
		if (e == -EEXIST && clear_retired_link(&b->out, b->sb.link, LINK_GONE_MS))
			e = netns_veth_add(&b->out, b->sb.link, b->sb.ifname, b->nsfd);
		b->link = e == 0;
	}
	if (e == 0) {
		step = "find";
		e = b->link_index = netns_link_index(&b->out, b->sb.link);
	}
	if (e > 0) {
		/* Before it is up: a broker-side link with IPv6 on, even with no
		 * address, would get a multicast route, and each link's up and
		 * down walks every IPv6 route of the broker's namespace: a
		 * create would grow with the number of sandboxes. */
		step = "turn IPv6 off on the broker side";
		e = ipv6_off(b->proc, b->sb.link);
		if (e == 0) {
			step = "set arp_ignore on the broker side";
			e = arp_own_only(b->proc, b->sb.link);
		}
	}
	if (e == 0) {
		step = "address and set up the broker side";
		netns_rtnl_batch_init(&batch);
		netns_addr4_add(&batch, b->link_index, b->sb.gw, 30);
		netns_link_set(&batch, b->link_index, true);
		e = netns_rtnl_batch_send(&b->out, &batch, NULL);
	}
	if (e < 0) {
		sl_err_sys(err, e, "cannot %s `%s` (gateway %s)", step, b->sb.link, gw);
		return e;
	}
	eth0 = netns_link_index(&b->in, b->sb.ifname);
	if (eth0 < 0) {
		sl_err_sys(err, eth0, "cannot find `%s` in the sandbox", b->sb.ifname);
		return eth0;
	}
	netns_rtnl_batch_init(&batch);
	netns_link_set(&batch, 1, true); /* lo is 1 in every namespace */
	netns_addr4_add(&batch, eth0, b->sb.addr, 30);
	netns_link_set(&batch, eth0, true);
	netns_route4_default(&batch, eth0, b->sb.gw);
	b->lo_set = true;
	e = netns_rtnl_batch_send(&b->in, &batch, &failed);
	if (e < 0) {
		sl_err_sys(err, e, "cannot %s in the sandbox",
			   failed < sizeof(in_steps) / sizeof(in_steps[0]) ? in_steps[failed]
									   : "wire");
		return e;
	}
	/* For CNI results and `sluice attach --json`; not worth a failure. */
	netns_link_mac(&b->out, b->sb.link, b->sb.host_mac);
	netns_link_mac(&b->in, b->sb.ifname, b->sb.mac);
	return 0;
}

/* Undoes what @b notes, newest first; says what it could not undo. */
static void rollback(struct build *b)
{
	struct sl_err se = { 0 };
	char *resp;
	int k;

	if (b->cfg_fd >= 0)
		close(b->cfg_fd);
	/* Its temporary file goes with the state directory, below. */
	if (b->bundle_fd >= 0) {
		close(b->bundle_fd);
		b->bundle_fd = -1;
	}
	/* Was it registered? Only its answer says. */
	if (b->reg_fd >= 0) {
		(void)reg_read(b, false);
		b->registered = reg_registered(b);
	}

	if (b->element && netns_nft_element(false, b->sb.link, b->sb.addr, NULL, &se) < 0)
		fprintf(stderr, "sluice: undo: %s\n", sl_err_msg(&se));
	/* The slow, synchronous delete: a failed create is rare, and when it
	 * has failed nothing of it may be left, however briefly. */
	if (b->link) {
		k = b->link_index > 0 ? b->link_index : netns_link_index(&b->out, b->sb.link);
		if (k > 0)
			k = netns_link_del(&b->out, k);
		if (k < 0 && k != -ENODEV)
			fprintf(stderr, "sluice: undo: cannot delete link `%s`: %s\n", b->sb.link,
				strerror(-k));
	}
	if (b->nspath)
		attach_restore(b);
	netns_rtnl_close(&b->out);
	netns_rtnl_close(&b->in);
	if (b->proc >= 0)
		close(b->proc);
	if (b->nsfd >= 0) {
		close(b->nsfd);
		b->nsfd = -1;
	}
	if (b->etc_dir && (k = netns_remove_etc_dir(b->sb.name, false)) < 0)
		fprintf(stderr, "sluice: undo: cannot remove %s/%s: %s\n", NETNS_ETC_DIR,
			b->sb.name, strerror(-k));
	if (b->netns && (k = netns_ns_remove(b->sb.name)) < 0)
		fprintf(stderr, "sluice: undo: cannot remove %s/%s: %s\n", NETNS_RUN_DIR,
			b->sb.name, strerror(-k));
	if (b->state_dir && (k = netns_remove_state_dir(b->sb.name, false)) < 0)
		fprintf(stderr, "sluice: undo: cannot remove %s/%s: %s\n", NETNS_STATE_DIR,
			b->sb.name, strerror(-k));
	if (b->registered) {
		char line[200];

		snprintf(line, sizeof(line), CTL_UNREGISTER " %s", b->sb.name);
		k = netns_ctl(line, &resp);
		if (k < 0)
			fprintf(stderr, "sluice: undo: cannot unregister `%s`: %s\n", b->sb.name,
				k == -EPROTO ? resp : strerror(-k));
		free(resp);
	}
}

/* Is the policy file @path invalid? Then @err is FILE:LINE:COL: message,
 * as `sluice policy check` prints it. */
static bool policy_bad(const char *path, struct sl_err *err)
{
	struct policy_error perr;
	struct policy *p;

	if (policy_load_file(path, &p, &perr) < 0) {
		/* EBADMSG: the message is whole (see netns_sandbox_create()). */
		sl_err_set(err, EBADMSG, "%s", perr.msg);
		return true;
	}
	policy_unref(p);
	return false;
}

/* How long a create waits for another create of the same name to end. */
#define CREATE_LOCK_WAIT_MS 10000

/*
 * A create that was killed half-way (SIGKILL, a crash, a power cut of the
 * process: the held signals cover the rest) leaves a registration, files,
 * a namespace or links behind, and a retried create of the name would
 * find them and say the sandbox exists. So a create takes its name's lock
 * (one byte of NETNS_CREATE_LOCK, an open file description lock: the
 * kernel lets go of it when the process dies) and, while it holds it,
 * marks the name NETNS_CREATING_PREFIX NAME until it has finished or
 * undone itself. A create that finds the mark, holding the lock, knows
 * that no create of the name is running: what is there was left by one
 * that died, and is removed as `sluice delete` removes a sandbox before
 * this create goes on. A name whose byte another name shares waits a
 * little longer at worst.
 */
static int create_begin(struct build *b, struct sl_err *err)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 1 };
	char mark[600];
	struct timespec nap = { .tv_nsec = 2000000 };
	uint32_t h = 2166136261u;
	const char *c;
	int k, r, fd;

	if (mkdir(NETNS_STATE_DIR, 0755) < 0 && errno != EEXIST) {
		r = -errno;
		sl_err_sys(err, r, "cannot make `%s`", NETNS_STATE_DIR);
		return r;
	}
	b->lock = open(NETNS_CREATE_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (b->lock < 0) {
		r = -errno;
		sl_err_sys(err, r, "cannot open `%s`", NETNS_CREATE_LOCK);
		return r;
	}
	for (c = b->sb.name; *c; c++)
		h = (h ^ (unsigned char)*c) * 16777619u;
	fl.l_start = (off_t)(h & 0xffffff);
	for (k = 0; fcntl(b->lock, F_OFD_SETLK, &fl) < 0; k++) {
		if ((errno != EAGAIN && errno != EACCES) || k >= CREATE_LOCK_WAIT_MS / 2) {
			r = errno == EAGAIN || errno == EACCES ? -EBUSY : -errno;
			sl_err_set(err, r, "another `sluice create %s` is still running",
				   b->sb.name);
			return r;
		}
		nanosleep(&nap, NULL);
	}
	snprintf(mark, sizeof(mark), NETNS_CREATING_PREFIX "%s", b->sb.name);
	if (access(mark, F_OK) == 0) {
		fprintf(stderr, "sluice: a create of `%s` was interrupted; removing what it left\n",
			b->sb.name);
		r = netns_sandbox_delete(b->sb.name, err);
		if (r < 0 && r != -ENOENT) {
			b->keep_mark = true;
			sl_err_wrap(err,
				    "a create of `%s` was interrupted, and what it left cannot be "
				    "removed",
				    b->sb.name);
			return r;
		}
		sl_err_clear(err);
	}
	fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		r = -errno;
		sl_err_sys(err, r, "cannot make `%s`", mark);
		return r;
	}
	close(fd);
	return 0;
}

/* Closes the nf_tables sockets that create() held (see nfnl_hand_over()). */
static void drop_held(struct build *b)
{
	for (size_t i = 0; i < sizeof(b->nft_held) / sizeof(b->nft_held[0]); i++)
		if (b->nft_held[i] >= 0) {
			close(b->nft_held[i]);
			b->nft_held[i] = -1;
		}
}

/* The create ended, made or undone: the mark goes, then the lock. */
static void create_end(struct build *b)
{
	char mark[600];

	if (b->lock < 0)
		return;
	snprintf(mark, sizeof(mark), NETNS_CREATING_PREFIX "%s", b->sb.name);
	if (!b->keep_mark)
		unlink(mark);
	close(b->lock);
	b->lock = -1;
}

/* See netns_sandbox_create() and netns_sandbox_attach() (@nspath not
 * NULL); @linger: the process exits next (see netns_linger()). */
static int create(const char *name, const char *policy, const char *nspath, const char *ifname,
		  struct netns_sandbox *out, bool linger, bool audit, struct sl_err *err);

/* create() under umask 022. */
static int create_umask(const char *name, const char *policy, const char *nspath,
			const char *ifname, struct netns_sandbox *out, bool linger, bool audit,
			struct sl_err *err)
{
	/* What sluice writes is readable by every user of the sandbox (the
	 * resolv.conf, the CA bundle), whatever the caller's umask. */
	mode_t old = umask(022);
	int r = create(name, policy, nspath, ifname, out, linger, audit, err);

	umask(old);
	return r;
}

/**
 * netns_sandbox_create() - create and wire a sandbox (see the file's top)
 * @name:   the sandbox name
 * @policy: the policy file (validated here, then by the broker)
 * @audit:  register it in audit mode (`--audit`), whatever the policy's mode
 * @out:    on success, the sandbox; may be NULL
 * @err:    on failure, the message (NULL: not wanted); its errno is EBADMSG
 *          when the policy is not valid, and then the message is whole:
 *          FILE:LINE:COL: message, as `sluice policy check` prints it
 *
 * The caller should block SIGINT, SIGTERM, SIGHUP and SIGQUIT around it.
 *
 * Return: 0; -EBADMSG when the policy is not valid; another negative errno
 * after undoing every step taken.
 */
int netns_sandbox_create(const char *name, const char *policy, bool audit,
			 struct netns_sandbox *out, struct sl_err *err)
{
	return create_umask(name, policy, NULL, NULL, out, false, audit, err);
}

/**
 * netns_sandbox_create_exiting() - netns_sandbox_create() for a process that
 * exits next (`sluice create`): the procfs's close, which waits for a grace
 * period, is left to a child (see netns_linger())
 * @name, @policy, @audit, @out, @err: as for netns_sandbox_create()
 *
 * Return: as netns_sandbox_create().
 */
int netns_sandbox_create_exiting(const char *name, const char *policy, bool audit,
				 struct netns_sandbox *out, struct sl_err *err)
{
	return create_umask(name, policy, NULL, NULL, out, true, audit, err);
}

/**
 * netns_sandbox_attach() - wire a network namespace a runtime made (see
 * netns.h), as netns_sandbox_create() does without making it
 * @name:   the sandbox name
 * @nspath: the namespace: /run/netns/X, /proc/PID/ns/net, any nsfs file
 * @ifname: the sandbox's interface in it; NULL: NETNS_SANDBOX_IF
 * @policy: the policy file
 * @audit:  audit mode, as for netns_sandbox_create()
 * @out:    on success, the sandbox; may be NULL
 * @err:    on failure, the message (NULL: not wanted), as for
 *          netns_sandbox_create()
 *
 * /run/netns/@name: when it is free, sluice names the namespace there
 * (a bind mount, so that `sluice exec`, `sluice env` and `ip netns exec`
 * work on the sandbox) and detach unmounts it; when it is @nspath's own
 * name already, it is left to its owner. Neither the namespace sluice runs
 * in (the broker's) nor PID 1's is accepted. The caller should block
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT around it.
 *
 * Return: 0; -EBADMSG for an invalid policy; another negative errno after
 * undoing every step taken (what was changed in the namespace included).
 */
int netns_sandbox_attach(const char *name, const char *nspath, const char *ifname,
			 const char *policy, bool audit, struct netns_sandbox *out,
			 struct sl_err *err)
{
	return create_umask(name, policy, nspath, ifname ? ifname : NETNS_SANDBOX_IF, out, false,
			    audit, err);
}

/* Opens the namespace @b is to attach, checked (a network namespace, not
 * the broker's, not PID 1's), without changing anything; decides whether
 * /run/netns/NAME is to be sluice's name of it. Return: 0 or a negative
 * errno, with @err. */
static int attach_open(struct build *b, struct sl_err *err)
{
	struct stat st, other;
	struct statfs sfs;
	char named[512];
	int r;

	b->nsfd = open(b->nspath, O_RDONLY | O_CLOEXEC);
	if (b->nsfd < 0) {
		r = -errno;
		sl_err_sys(err, r, "cannot open network namespace `%s`", b->nspath);
		return r;
	}
	if (fstatfs(b->nsfd, &sfs) < 0 || sfs.f_type != NSFS_MAGIC ||
	    ioctl(b->nsfd, NS_GET_NSTYPE) != CLONE_NEWNET || fstat(b->nsfd, &st) < 0) {
		sl_err_set(err, EINVAL, "`%s` is not a network namespace", b->nspath);
		return -EINVAL;
	}
	if (st.st_dev == b->sb.broker_ns_dev && st.st_ino == b->sb.broker_ns_ino) {
		sl_err_set(err, EINVAL, "`%s` is the broker's own network namespace", b->nspath);
		return -EINVAL;
	}
	/* The host's: its routes and sysctls are nobody's sandbox. */
	if (stat("/proc/1/ns/net", &other) == 0 && st.st_dev == other.st_dev &&
	    st.st_ino == other.st_ino) {
		sl_err_set(err, EINVAL, "`%s` is the host's network namespace (PID 1's)",
			   b->nspath);
		return -EINVAL;
	}
	netns_path(named, sizeof(named), NETNS_RUN_DIR, b->sb.name, NULL);
	if (stat(named, &other) < 0) {
		b->sb.ns_named = true; /* free: sluice names it */
		return 0;
	}
	if (other.st_dev != st.st_dev || other.st_ino != st.st_ino) {
		sl_err_set(err, EEXIST, "`%s` exists and is another namespace: the name is taken",
			   named);
		return -EEXIST;
	}
	b->sb.ns_named = false; /* its owner's name */
	return 0;
}

static int create(const char *name, const char *policy, const char *nspath, const char *ifname,
		  struct netns_sandbox *out, bool linger, bool audit, struct sl_err *err)
{
	/* clang-format off */
	struct build b = {
		.nsfd = -1, .cfg_fd = -1, .reg_fd = -1, .bundle_fd = -1, .proc = -1, .lock = -1,
		.nft_held = { -1, -1 }
	};
	/* clang-format on */
	char abs[PATH_MAX], path[512];
	int r;

	b.nspath = nspath;
	b.audit = audit;
	b.sb.attached = nspath != NULL;
	b.sb.ns_named = true;
	snprintf(b.sb.ifname, sizeof(b.sb.ifname), "%s", ifname ? ifname : NETNS_SANDBOX_IF);
	if (ifname && !netns_ifname_ok(ifname)) {
		sl_err_set(err, EINVAL,
			   "bad interface name `%s` (1-15 characters, no `/`, `:` or spaces)",
			   ifname);
		return -EINVAL;
	}

	if (!netns_name_ok(name) || text_tmp_name(name)) {
		sl_err_set(err, EINVAL,
			   "bad sandbox name `%s` (1-%d of A-Z a-z 0-9 . _ -, not starting with . "
			   "or -, not ending in .tmp)",
			   name, NETNS_NAME_MAX);
		return -EINVAL;
	}
	snprintf(b.sb.name, sizeof(b.sb.name), "%s", name);
	if (!realpath(policy, abs)) {
		r = -errno;
		/* The policy loader says best what is wrong with the file. */
		if (policy_bad(policy, err))
			return -EBADMSG;
		sl_err_sys(err, r, "%s", policy);
		return r;
	}
	if (strpbrk(abs, " \t\n")) {
		sl_err_set(err, EINVAL, "policy path `%s` has whitespace", abs);
		return -EINVAL;
	}
	r = create_begin(&b, err);
	if (r < 0)
		goto fail;
	/* Cheap checks first, so that the common mistake costs no registration;
	 * the steps below check again, race-free (O_EXCL, mkdir). */
	netns_path(path, sizeof(path), NETNS_RUN_DIR, name, NULL);
	if (nspath) {
		r = netns_self_ns_id(&b.sb.broker_ns_dev, &b.sb.broker_ns_ino);
		if (r == 0)
			r = attach_open(&b, err);
		else
			sl_err_sys(err, r, "cannot identify this network namespace");
		if (r < 0)
			goto fail;
		netns_path(path, sizeof(path), NETNS_STATE_DIR, name, NULL);
		if (access(path, F_OK) == 0) {
			sl_err_set(err, EEXIST, "sandbox `%s` exists (%s)", name, path);
			r = -EEXIST;
			goto fail;
		}
	} else if (access(path, F_OK) == 0) {
		sl_err_set(err, EEXIST, "sandbox `%s` exists (%s)", name, path);
		r = -EEXIST;
		goto fail;
	}
	netns_path(path, sizeof(path), NETNS_ETC_DIR, name, NULL);
	if (access(path, F_OK) == 0) {
		sl_err_set(err, EEXIST, "`%s` exists: the name is taken", path);
		r = -EEXIST;
		goto fail;
	}
	r = netns_self_ns_id(&b.sb.broker_ns_dev, &b.sb.broker_ns_ino);
	if (r < 0) {
		sl_err_sys(err, r, "cannot identify this network namespace");
		goto fail;
	}
	snprintf(b.sb.socket, sizeof(b.sb.socket), "%s", netns_socket_path);

	/*
	 * Both requests go to the broker at once, and while it works on the
	 * registration (most of a create's time) this process checks the
	 * policy (the broker refuses a bad one too, and registers nothing),
	 * reads the registration's address (below: why there), makes the
	 * sandbox's namespace, still nameless, reads the configuration's
	 * answer and checks the firewall's table. The rest of the
	 * registration's answer is read after; whatever fails, rollback()
	 * reads it first, so as to withdraw it.
	 */
	b.reg_fd = register_send(&b, abs);
	if (b.reg_fd >= 0)
		b.cfg_fd = netns_ctl_send(CTL_CONFIG);
	if (b.cfg_fd < 0 || b.reg_fd < 0) {
		r = b.reg_fd < 0 ? b.reg_fd : b.cfg_fd;
		if (policy_bad(policy, err))
			r = -EBADMSG;
		else
			sl_err_sys(err, r, "cannot reach sluiced at %s", netns_socket_path);
		goto fail;
	}
	if (policy_bad(policy, err)) {
		r = -EBADMSG;
		goto fail;
	}
	/*
	 * The registration's address before the namespace: a send on a unix
	 * socket wakes the broker on this CPU (a synchronous wakeup), where
	 * it would wait behind the unshare below (about 1 ms in the kernel)
	 * before even taking the registration. Waiting here lets it run now.
	 * The broker sends the address (the answer's head) once it holds it
	 * and has handed the CA to its maker, which then works while this
	 * process makes the namespace. The configuration's answer, which
	 * comes after it (the broker takes connections in turn), is read
	 * after the namespace: waiting for it here cost more (two A/Bs of 12
	 * pairs of 30 creates each: this order was faster in 11 and in 7 of
	 * them, by 0.5 and 0.23 ms at the median). A registration refused
	 * fails here, before anything is made.
	 */
	r = register_address(&b, err);
	if (r < 0)
		goto fail;
	if (nspath) {
		int saved;

		r = netns_ns_enter(b.nsfd, &saved);
		if (r == 0) {
			r = attach_inside(&b);
			netns_ns_leave(saved);
		}
		if (r == -EEXIST)
			sl_err_set(err, r, "`%s` exists in the network namespace `%s`", b.sb.ifname,
				   nspath);
		else if (r == -ENOTUNIQ)
			sl_err_set(err, r,
				   "the network namespace `%s` has another way out: %s; sluice's "
				   "link must be its only one",
				   nspath, b.others);
		else if (r < 0)
			sl_err_sys(err, r, "cannot prepare the network namespace `%s`", nspath);
	} else {
		r = netns_ns_new(&b.nsfd, sandbox_inside, &b);
		if (r < 0)
			sl_err_sys(err, r, "cannot make the sandbox's network namespace");
	}
	if (r < 0)
		goto fail;
	r = config_answer(b.cfg_fd, &b.sb.ports, err);
	b.cfg_fd = -1;
	if (r < 0)
		goto fail;
	r = netns_nft_install(&b.sb.ports, &b.nft_held[0], err);
	if (r < 0)
		goto fail;
	/* What needs neither the address nor the CA is done before their
	 * answer: the broker is most likely still making the CA. */
	r = state_dir_begin(&b, err);
	if (r < 0)
		goto fail;
	r = b.sb.ns_named ? netns_ns_name(name, b.nsfd) : 0;
	if (r == -EEXIST) {
		sl_err_set(err, r, "cannot create %s/%s: it exists", NETNS_RUN_DIR, name);
		goto fail;
	}
	if (r < 0) {
		sl_err_sys(err, r, "cannot create %s/%s", NETNS_RUN_DIR, name);
		goto fail;
	}
	b.netns = b.sb.ns_named;
	/* The address came first (above), the CA comes after (reg_read()):
	 * what needs only the address is built while the broker makes the CA. */
	r = make_etc_dir(&b, err);
	if (r < 0)
		goto fail;
	r = wire(&b, err);
	if (r < 0)
		goto fail;
	/* The record once the registration is whole: a `sluice delete` of an
	 * interrupted create finds the address from the broker until then. */
	r = register_answer(&b, err);
	if (r < 0)
		goto fail;
	r = state_dir_end(&b, err);
	if (r < 0)
		goto fail;
	/* Last: the element is what lets the sandbox's packets in. */
	r = netns_nft_element(true, b.sb.link, b.sb.addr, &b.nft_held[1], err);
	if (r < 0)
		goto fail;
	b.element = true;
	if (netns_link_wait_running(&b.out, b.sb.link, &b.in, b.sb.ifname, LINK_WAIT_MS) < 0)
		log_warn("netns: the wire of `%s` is not running yet", b.sb.name);
	netns_rtnl_close(&b.out);
	netns_rtnl_close(&b.in);
	close(b.nsfd);
	/* Before the child below, which would hold the lock as long as it lives. */
	create_end(&b);
	/* The procfs's close waits for a grace period, and so may the
	 * nf_tables sockets' (when a delete came just before: see
	 * nfnl_hand_over()); `sluice create` leaves them, and the teardown of
	 * its mount namespace, to a child, which has a copy of each. */
	if (linger)
		netns_linger(b.proc);
	else if (b.proc >= 0)
		close(b.proc);
	drop_held(&b);
	if (out)
		*out = b.sb;
	return 0;
fail:
	rollback(&b);
	create_end(&b);
	drop_held(&b);
	return r;
}

/**
 * netns_hold_signals() - block the signals that would end sluice half-way
 * @old: the mask to restore with sigprocmask(SIG_SETMASK, @old, NULL)
 */
void netns_hold_signals(sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigprocmask(SIG_BLOCK, &set, old);
}
