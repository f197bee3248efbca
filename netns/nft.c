// SPDX-License-Identifier: MIT
/* The firewall of the broker's namespace: one table, `inet sluice`, whose
 * rules match sandbox links by name ("sl-*") and whose per-sandbox state is
 * set elements only (libnftables).
 *
 * Theory of operation: the rules are static; they depend only on the
 * broker's three ports. A sandbox adds one element, its link and address,
 * to @sandbox_src (anti-spoofing) and removes it on delete, so the cost of
 * a packet and of a create does not grow with the number of sandboxes.
 * Installing the table is idempotent and guarded by a lock: the last rule
 * carries a signature naming the ruleset version and the ports; when it is
 * there, the table is left alone (never flushed under running sandboxes);
 * when it is not (a new table, other ports, an older sluice), the chains
 * are flushed and filled in one transaction, which keeps the sets and the
 * named counters. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netns/netns_internal.h"

#define RULESET_VERSION 1
#define LOCK_PATH NETNS_STATE_DIR "/.nft.lock"
#define LOCK_WAIT_MS 10000

/*
 * %1$u proxy port, %2$u transparent port, %3$u dns port, %4$s signature.
 *
 * guard (prerouting, before conntrack): IPv6 and spoofed sources are
 * dropped (a reject would answer the forged address); TCP and DNS go on;
 * everything else is refused at once with admin-prohibited, wherever it
 * was going, so that forwarding settings never matter.
 * divert (dstnat): DNS to the filter; TCP to the gateway's own address on
 * the proxy port is the explicit proxy (fib ... iif: local *on the link it
 * came from*, not any address of the broker); all other TCP to the
 * transparent port. Redirect rewrites the destination to the gateway.
 * input: after divert, only the three listeners; the rest is refused.
 * forward: nothing is forwarded from or to a sandbox link.
 */
#define RULESET \
	"add table inet sluice\n" \
	"add set inet sluice sandbox_src { type ifname . ipv4_addr; }\n" \
	"add counter inet sluice spoofed\n" \
	"add counter inet sluice ipv6_dropped\n" \
	"add counter inet sluice refused\n" \
	"add counter inet sluice forward_refused\n" \
	"add chain inet sluice guard { type filter hook prerouting priority raw; policy accept; }\n" \
	"add chain inet sluice divert { type nat hook prerouting priority dstnat; policy accept; }\n" \
	"add chain inet sluice input { type filter hook input priority filter; policy accept; }\n" \
	"add chain inet sluice forward { type filter hook forward priority filter; policy accept; }\n" \
	"flush chain inet sluice guard\n" \
	"flush chain inet sluice divert\n" \
	"flush chain inet sluice input\n" \
	"flush chain inet sluice forward\n" \
	"add rule inet sluice guard iifname \"sl-*\" meta nfproto ipv6 counter name \"ipv6_dropped\" drop\n" \
	"add rule inet sluice guard iifname \"sl-*\" iifname . ip saddr != @sandbox_src counter name \"spoofed\" drop\n" \
	"add rule inet sluice guard iifname \"sl-*\" meta l4proto tcp accept\n" \
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

/* Runs @cmd; on failure copies nft's first error line to @err. *@out, when
 * asked for, gets nft's terse output (no set elements; strdup'd; the caller
 * frees it). */
static int run(const char *cmd, char **out, char *err, size_t errlen)
{
	struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	int r = 0;

	if (!ctx) {
		snprintf(err, errlen, "nftables: cannot make a context");
		return -ENOMEM;
	}
	if (nft_ctx_buffer_output(ctx) < 0 || nft_ctx_buffer_error(ctx) < 0) {
		nft_ctx_free(ctx);
		snprintf(err, errlen, "nftables: cannot buffer output");
		return -ENOMEM;
	}
	/* A listing is read only for the ruleset's signature. Terse, nft
	 * neither prints nor fetches set elements (one per sandbox). */
	if (out)
		nft_ctx_output_set_flags(ctx, nft_ctx_output_get_flags(ctx) |
						      NFT_CTX_OUTPUT_TERSE);
	if (nft_run_cmd_from_buffer(ctx, cmd) != 0) {
		const char *e = nft_ctx_get_error_buffer(ctx);
		size_t n;

		e = e ? e : "";
		n = strcspn(e, "\n");
		snprintf(err, errlen, "nftables: %.*s", (int)(n > 300 ? 300 : n),
			 n ? e : "failed");
		r = strstr(e, "No such file or directory") ? -ENOENT : -EIO;
	} else if (out) {
		const char *o = nft_ctx_get_output_buffer(ctx);

		*out = strdup(o ? o : "");
		if (!*out)
			r = -ENOMEM;
	}
	nft_ctx_free(ctx);
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

/* Is @sig in the block of `table inet sluice` of the listing @have? */
static bool has_signature(const char *have, const char *sig)
{
	const char *t = have, *end, *s;

	while ((t = strstr(t, "table inet sluice {\n")) && t != have && t[-1] != '\n')
		t++;
	if (!t)
		return false;
	end = strstr(t, "\n}");
	s = strstr(t, sig);
	return s && end && s < end;
}

/**
 * netns_nft_install() - make sure table inet sluice is in force for @p
 * @p:      the broker's ports
 * @err:    why not
 * @errlen: its size
 *
 * Works in the calling thread's network namespace (the broker's).
 *
 * Return: 0 or a negative errno.
 */
int netns_nft_install(const struct netns_ports *p, char *err, size_t errlen)
{
	char sig[96], cmd[sizeof(RULESET) + 256], *have = NULL;
	int fd, r, n;

	snprintf(sig, sizeof(sig), "sluice ruleset %d ports %u %u %u", RULESET_VERSION, p->proxy,
		 p->transparent, p->dns);
	fd = lock_take();
	if (fd < 0) {
		snprintf(err, errlen, "cannot lock %s: %s", LOCK_PATH, strerror(-fd));
		return fd;
	}
	/* Not `list chain inet sluice forward`: libnftables (1.0.6) fetches
	 * every element of the table's sets for it, a cost that grows with the
	 * number of sandboxes. A terse `list ruleset` fetches none. On first
	 * use there is no table: the listing is empty, and the ruleset goes in. */
	if (run("list ruleset inet", &have, err, errlen) == 0 && has_signature(have, sig)) {
		r = 0;
		goto out;
	}
	n = snprintf(cmd, sizeof(cmd), RULESET, p->proxy, p->transparent, p->dns, sig);
	if (n < 0 || (size_t)n >= sizeof(cmd)) {
		snprintf(err, errlen, "nftables: ruleset too long");
		r = -ENAMETOOLONG;
		goto out;
	}
	r = run(cmd, NULL, err, errlen);
out:
	free(have);
	close(fd); /* releases the lock */
	return r;
}

/**
 * netns_nft_element() - add or delete a sandbox's element of @sandbox_src
 * @add:    add (idempotent) or delete
 * @link:   the broker-side link
 * @addr:   the sandbox address, host byte order
 * @err:    why not
 * @errlen: its size
 *
 * Return: 0; -ENOENT when deleting an element (or a table) that is not
 * there; another negative errno.
 */
int netns_nft_element(bool add, const char *link, uint32_t addr, char *err, size_t errlen)
{
	struct in_addr ia = { .s_addr = htonl(addr) };
	char a[INET_ADDRSTRLEN], cmd[200];

	inet_ntop(AF_INET, &ia, a, sizeof(a));
	snprintf(cmd, sizeof(cmd), "%s element inet sluice sandbox_src { \"%s\" . %s }",
		 add ? "add" : "delete", link, a);
	return run(cmd, NULL, err, errlen);
}
