// SPDX-License-Identifier: MIT
/* `sluice delete NAME`: the sandbox's set element goes first (from then on
 * no packet of it passes the broker's firewall), then the broker forgets
 * it (and closes its flows), then its veth pair, its namespace and its
 * files go. Only what sluice made is removed: a sandbox's record in
 * NETNS_STATE_DIR is what marks /run/netns/NAME and /etc/netns/NAME as
 * sluice's; a namespace someone wired by hand and registered with `sluice
 * register` is only unregistered.
 *
 * The wire is cut at once: the element goes, and with it every packet of
 * the sandbox at the broker's firewall; the broker-side link is marked
 * (netns_link_retire()). The veth pair itself is deleted by a child
 * (netns_link_del_begin()) that delete does not wait for: the kernel
 * answers a link deletion only after its grace periods, tens of
 * milliseconds; the pair is gone from both namespaces about a millisecond
 * after the child asks. A create that meets the marked link of its
 * address before then waits for it, or removes it. While the broker
 * forgets the sandbox, the rest of it goes here. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ctlproto.h"
#include "common/err.h"
#include "netns/netns.h"
#include "netns/netns_internal.h"

/* BROKER_FAILED: the broker forgot the sandbox but could not finish (its
 * registration stays in state_dir, say): the answer says what. */
enum broker_answer { BROKER_KNEW, BROKER_DID_NOT_KNOW, BROKER_FAILED, BROKER_UNREACHABLE };

/* The address the broker holds for @name, from `list`; -ENOENT if none. */
static int broker_addr(const char *name, uint32_t *addr)
{
	char *resp, *line, *save = NULL;
	int r = netns_ctl(CTL_LIST, &resp);

	if (r < 0) {
		free(resp);
		return r;
	}
	r = -ENOENT;
	for (line = strtok_r(resp, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char n[NETNS_NAME_MAX + 2], a[64];
		struct in_addr ia;

		if (sscanf(line, "%64s %63s", n, a) == 2 && !strcmp(n, name) &&
		    inet_pton(AF_INET, a, &ia) == 1) {
			*addr = ntohl(ia.s_addr);
			r = 0;
			break;
		}
	}
	free(resp);
	return r;
}

/* Sends unregister NAME; the answer is unregister_answer()'s. */
static int unregister_send(const char *name)
{
	char line[200];

	snprintf(line, sizeof(line), CTL_UNREGISTER " %s", name);
	return netns_ctl_send(line);
}

/* What the broker answered on @fd (from unregister_send(); closed here).
 * @why gets the reason when it could not be told. A refusal that passes
 * (netns_ctl_transient()) is asked again, bounded. */
static enum broker_answer unregister_answer(int fd, const char *name, struct sl_err *why)
{
	char *resp;
	int r = netns_ctl_recv(fd, &resp), i;

	for (i = 0; i < 20 && r == -EPROTO && netns_ctl_transient(resp); i++) {
		free(resp);
		usleep(50000);
		r = netns_ctl_recv(unregister_send(name), &resp);
	}

	if (r == 0) {
		free(resp);
		return BROKER_KNEW;
	}
	if (r == -EPROTO && strstr(resp, "no such sandbox")) {
		free(resp);
		return BROKER_DID_NOT_KNOW;
	}
	if (r == -EPROTO && strstr(resp, "unregistered `")) {
		sl_err_set(why, r, "sluiced at %s: %s", netns_socket_path, resp);
		free(resp);
		return BROKER_FAILED;
	}
	if (r == -EPROTO)
		sl_err_set(why, r, "sluiced at %s: %s", netns_socket_path, resp);
	else
		sl_err_sys(why, r, "cannot reach sluiced at %s", netns_socket_path);
	free(resp);
	return BROKER_UNREACHABLE;
}

/* Does the sandbox still have its wire (@ifname, whose peer is in the
 * broker's namespace)? A veth goes when either namespace does. */
static bool wire_present(const char *name, const char *ifname)
{
	int fd = netns_ns_open(name), saved;
	bool there = false;

	if (fd < 0)
		return false;
	if (netns_ns_enter(fd, &saved) == 0) {
		there = if_nametoindex(ifname) != 0;
		netns_ns_leave(saved);
	}
	close(fd);
	return there;
}

/*
 * Is the broker namespace @sb was created in still alive, so that its
 * broker may still hold the sandbox, its set element and its link? While
 * the sandbox's wire (eth0) is there, the broker's end of it is in some
 * namespace; that namespace is alive while a process is in it or a mount
 * names it (netns_ns_in_use()). Not the wire alone: it outlives the
 * namespace for as long as the kernel's teardown of it takes, or as long
 * as something (an fd, a socket) holds its remains. The wire is looked at
 * again after: the namespace's inode number may have been freed and given
 * to a new one meanwhile, and then the wire is gone.
 *
 * Return: 1; 0 when it is gone; a negative errno when that could not be told.
 */
static int broker_ns_alive(const char *name, const struct netns_sandbox *sb)
{
	int r;

	if (!wire_present(name, sb->ifname))
		return 0;
	r = netns_ns_in_use(sb->broker_ns_dev, sb->broker_ns_ino);
	if (r <= 0)
		return r;
	return wire_present(name, sb->ifname) ? 1 : 0;
}

/* Keeps the first failure and its message; the later steps still run. */
__attribute__((format(printf, 4, 5))) static void note(int *first, struct sl_err *err, int r,
						       const char *fmt, ...)
{
	char msg[SL_ERR_MSG_MAX];
	va_list ap;

	if (*first < 0)
		return;
	*first = r;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sl_err_set(err, r, "%s", msg);
}

/* Cuts an owned sandbox's wire: its set element goes (from then on none of
 * its packets passes the broker's firewall), and its link is marked for
 * removal (before the broker can give its address, and so its link's
 * name, to another sandbox). *@held gets the firewall socket, whose last
 * close waits out a grace period (netns_nft_element()): the caller leaves
 * it to the child that deletes the link, or makes it last. */
static void cut_wire(const char *link, uint32_t addr, struct netns_rtnl *rt, int link_index,
		     int *held, int *first, struct sl_err *err)
{
	struct sl_err e = { 0 };
	int r;

	r = netns_nft_element(false, link, addr, held, &e);
	if (r < 0 && r != -ENOENT)
		note(first, err, r, "%s", sl_err_msg(&e));
	if (link_index > 0) {
		r = netns_link_retire(rt, link_index);
		if (r < 0 && r != -ENODEV)
			note(first, err, r, "cannot mark link `%s`: %s", link, strerror(-r));
	}
}

/* What of an owned sandbox's namespace goes with it. */
struct keep {
	bool unname; /* /run/netns/NAME is sluice's name of it: unmount */
	bool sync;   /* the veth is gone when remove_local() returns */
};

/*
 * Removes the network side and the files of an owned sandbox: @link_index
 * is its link's in this namespace (0: none); @cut: its wire is cut
 * already; @held: the firewall socket cut_wire() kept (-1: none). The veth
 * pair is deleted by a child, not waited for: the kernel's grace periods
 * after a link deletion take tens of milliseconds, and the sandbox's
 * packets are refused already. The child has a copy of @held, and its exit
 * is the socket's last close, with the wait that comes with it; ours is
 * dropped here. A namespace that outlives the sandbox (@k: detach, or an
 * attached one) is a runtime's to use again at once (a CNI ADD after a
 * DEL): its interface goes before this returns.
 */
static int remove_local(const char *name, const char *link, uint32_t addr, struct netns_rtnl *rt,
			int link_index, bool cut, int *held, const struct keep *k, int first,
			struct sl_err *err)
{
	pid_t pid = -1;
	int r;

	if (link[0] && !cut)
		cut_wire(link, addr, rt, link_index, held, &first, err);
	if (link_index > 0) {
		pid = k->sync ? -1 : netns_link_del_begin(link_index);
		if (pid < 0) {
			r = netns_link_del(rt, link_index);
			if (r < 0 && r != -ENODEV)
				note(&first, err, r, "cannot delete link `%s`: %s", link,
				     strerror(-r));
		}
	}
	if (pid > 0 && *held >= 0) {
		close(*held);
		*held = -1;
	}
	r = k->unname ? netns_ns_remove(name) : 0;
	if (r < 0 && r != -ENOENT)
		note(&first, err, r, "cannot remove " NETNS_RUN_DIR "/%s: %s", name, strerror(-r));
	r = netns_remove_etc_dir(name, true);
	if (r == -ENOTEMPTY)
		fprintf(stderr, "sluice: warning: %s/%s holds files sluice did not make; left\n",
			NETNS_ETC_DIR, name);
	else if (r < 0 && r != -ENOENT)
		note(&first, err, r, "cannot remove " NETNS_ETC_DIR "/%s: %s", name, strerror(-r));
	r = netns_remove_state_dir(name, true);
	if (r < 0 && r != -ENOENT)
		note(&first, err, r, "cannot remove " NETNS_STATE_DIR "/%s: %s", name,
		     strerror(-r));
	r = netns_workspace_remove(name);
	if (r < 0 && r != -ENOENT)
		note(&first, err, r, "cannot remove " NETNS_WORKSPACE_DIR "/%s: %s", name,
		     strerror(-r));
	netns_link_del_reap(pid);
	return first;
}

/* The result of deleting an owned sandbox: @r is remove_local()'s, @ans the
 * broker's, with @why. */
static int finish(const char *name, enum broker_answer ans, int r, const struct sl_err *why,
		  struct sl_err *err)
{
	if (ans == BROKER_UNREACHABLE) {
		/* The sandbox reaches nothing now; the broker keeps its address
		 * until it hears of it. */
		return sl_err_set(
			err, EHOSTUNREACH,
			"removed `%s` here, but %s; run `sluice unregister %s` when it is "
			"back (a broker that restarts drops it itself)",
			name, sl_err_msg(why), name);
	}
	if (ans == BROKER_FAILED) {
		sl_err_set(err, r < 0 ? r : EIO, "removed `%s` here, but %s", name,
			   sl_err_msg(why));
		return r < 0 ? r : -EIO;
	}
	if (r < 0)
		return r;
	if (ans == BROKER_DID_NOT_KNOW)
		fprintf(stderr,
			"sluice: warning: sluiced at %s did not know `%s` (its state lost?); "
			"removed what was left of it here\n",
			netns_socket_path, name);
	return 0;
}

/**
 * netns_sandbox_delete() - remove a sandbox (see the file's top)
 * @name:   the sandbox
 * @err:    why not (NULL: not wanted)
 *
 * Warnings (the broker did not know the sandbox) go to stderr. The caller
 * should block SIGINT, SIGTERM, SIGHUP and SIGQUIT around it.
 *
 * Return: 0; -ENOENT when there is no such sandbox; -EXDEV when it belongs
 * to another broker (nothing is touched); another negative errno (when it
 * cannot be told whether the other broker's namespace is gone, nothing is
 * touched either).
 */
static int delete_sandbox(const char *name, bool detach, struct sl_err *err)
{
	struct netns_rtnl rt = { 0 };
	struct keep keep = { .unname = !detach, .sync = detach };
	struct netns_sandbox sb;
	struct sl_err se = { 0 }, why = { 0 };
	char dir[512];
	enum broker_answer ans;
	uint64_t dev, ino;
	bool owned, have_state, orphan = false, cut = false;
	int r, link_index = 0, first = 0, held = -1;

	if (!netns_name_ok(name))
		return sl_err_set(err, ENOENT, "no such sandbox `%s`", name);
	netns_path(dir, sizeof(dir), NETNS_STATE_DIR, name, NULL);
	owned = access(dir, F_OK) == 0;
	r = netns_state_read(name, &sb, &se);
	have_state = r == 0;
	if (r < 0 && r != -ENOENT)
		fprintf(stderr, "sluice: warning: %s\n", sl_err_msg(&se));
	/* A runtime's namespace is never removed: only sluice's name of it. */
	if (have_state && sb.attached) {
		keep.unname = sb.ns_named;
		keep.sync = true;
	}
	if (have_state) {
		/* The set element and the broker-side link live in the namespace
		 * create ran in: from anywhere else they cannot be reached. */
		if (netns_self_ns_id(&dev, &ino) == 0 &&
		    (dev != sb.broker_ns_dev || ino != sb.broker_ns_ino)) {
			r = broker_ns_alive(name, &sb);
			if (r > 0)
				return sl_err_set(err, EXDEV,
						  "sandbox `%s` is wired to the broker of another "
						  "network namespace; run `sluice delete` there",
						  name);
			if (r < 0)
				return sl_err_set(
					err, r,
					"sandbox `%s` is wired to the broker of another "
					"network namespace, and whether that namespace is "
					"gone cannot be told (%s); run `sluice delete` there",
					name, strerror(-r));
			/* That namespace is gone (its set element and the broker's
			 * end of the wire go with it, or are held by what holds
			 * its remains): what is left is here, and no link of this
			 * namespace may be taken for the sandbox's. */
			fprintf(stderr,
				"sluice: warning: the broker namespace of `%s` is gone; "
				"removing what is left of it\n",
				name);
			orphan = true;
			sb.link[0] = '\0';
		}
	} else {
		memset(&sb, 0, sizeof(sb));
		if (broker_addr(name, &sb.addr) == 0) {
			sb.gw = sb.addr - 1;
			netns_link_name(sb.addr, sb.link);
		}
	}
	/*
	 * The wire is cut before the broker forgets the sandbox, so that none
	 * of its packets passes without a registration. The link's index is
	 * taken while the address is still the sandbox's (the broker may give
	 * it out again at once after), and the link is marked before then, so
	 * that a create that gets the address meets a marked link. Not when
	 * the record names another broker's socket: that broker may refuse it
	 * (below), and then nothing may have been touched.
	 */
	if (owned && sb.link[0]) {
		r = netns_rtnl_open(&rt);
		if (r < 0)
			return sl_err_sys(err, r, "cannot open rtnetlink");
		link_index = netns_link_index(&rt, sb.link);
		if (link_index < 0)
			link_index = 0; /* gone already, with its namespace */
		if (!have_state || !strcmp(sb.socket, netns_socket_path)) {
			cut_wire(sb.link, sb.addr, &rt, link_index, &held, &first, err);
			cut = true;
		}
	}
	if (cut) {
		/*
		 * The broker's answer changes nothing of what is removed here
		 * (an owned sandbox goes whether the broker knew it or not, or
		 * could not be told), so the broker works on the request while
		 * the rest of the sandbox goes.
		 */
		int fd = unregister_send(name);

		r = remove_local(name, sb.link, sb.addr, &rt, link_index, cut, &held, &keep, first,
				 err);
		ans = unregister_answer(fd, name, &why);
		netns_rtnl_close(&rt);
		/* Without a child, last: the grace period has passed meanwhile. */
		if (held >= 0)
			close(held);
		return finish(name, ans, r, &why, err);
	}
	ans = unregister_answer(unregister_send(name), name, &why);
	if (ans == BROKER_DID_NOT_KNOW && have_state && !orphan &&
	    strcmp(sb.socket, netns_socket_path)) {
		netns_rtnl_close(&rt);
		return sl_err_set(err, EXDEV,
				  "sluiced at %s does not know `%s`, which was registered at %s; "
				  "use --socket %s",
				  netns_socket_path, name, sb.socket, sb.socket);
	}
	if (!owned) {
		if (ans == BROKER_KNEW)
			return 0; /* registered only: the namespace is not sluice's */
		if (ans == BROKER_FAILED)
			return sl_err_set(err, EIO, "%s", sl_err_msg(&why));
		if (ans == BROKER_DID_NOT_KNOW)
			return sl_err_set(err, ENOENT, "no such sandbox `%s`", name);
		return sl_err_set(err, EHOSTUNREACH, "%s", sl_err_msg(&why));
	}
	r = remove_local(name, sb.link, sb.addr, &rt, link_index, cut, &held, &keep, first, err);
	netns_rtnl_close(&rt);
	if (held >= 0)
		close(held);
	return finish(name, ans, r, &why, err);
}

/* delete_sandbox(), then what an interrupted create left; the trash is
 * left to the caller. */
static int remove_keep_trash(const char *name, bool detach, struct sl_err *err)
{
	int r = delete_sandbox(name, detach, err);
	char mark[600];

	/* What a create that was interrupted left (create.c) is gone now. */
	if ((r == 0 || r == -ENOENT) && netns_name_ok(name)) {
		snprintf(mark, sizeof(mark), NETNS_CREATING_PREFIX "%s", name);
		unlink(mark);
	}
	return r;
}

/**
 * netns_sandbox_remove() - netns_sandbox_delete() (@detach false), or
 * netns_sandbox_detach() (true: the namespace and its name stay)
 * @name:   the sandbox
 * @detach: keep the namespace
 * @err:    why not (NULL: not wanted)
 *
 * An attached sandbox's namespace stays either way.
 *
 * Return: as netns_sandbox_delete().
 */
int netns_sandbox_remove(const char *name, bool detach, struct sl_err *err)
{
	int r = remove_keep_trash(name, detach, err);

	/* Its directories went into the trash (the names are free already):
	 * now they go for good. */
	netns_trash_sweep();
	return r;
}

/**
 * netns_sandbox_delete_exiting() - netns_sandbox_delete() for a process that
 * exits next (`sluice delete`): the sandbox's directories are left in the
 * trash, for the caller to sweep (netns_trash_sweep()) after it has answered
 * @name: the sandbox
 * @err:  why not (NULL: not wanted)
 *
 * Return: as netns_sandbox_delete().
 */
int netns_sandbox_delete_exiting(const char *name, struct sl_err *err)
{
	return remove_keep_trash(name, false, err);
}

int netns_sandbox_delete(const char *name, struct sl_err *err)
{
	return netns_sandbox_remove(name, false, err);
}

int netns_sandbox_detach(const char *name, struct sl_err *err)
{
	return netns_sandbox_remove(name, true, err);
}
