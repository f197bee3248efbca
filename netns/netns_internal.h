/* SPDX-License-Identifier: MIT */
/* What the files of the sandbox lifecycle (create, delete, exec, run) share:
 * the sandbox record, network namespace handles, rtnetlink and nftables. */
#ifndef SLUICE_NETNS_INTERNAL_H
#define SLUICE_NETNS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

/* Sandbox names: [A-Za-z0-9._-], not starting with '.' or '-', as the broker. */
#define NETNS_NAME_MAX 63
/* iproute2's places: a sandbox is an ordinary named network namespace. */
#define NETNS_RUN_DIR "/run/netns"
#define NETNS_ETC_DIR "/etc/netns"
/*
 * sluice's own per-sandbox files (the record, the CA bundle). Not in
 * /etc/netns/NAME: `ip netns exec` bind-mounts every file found there over
 * /etc/FILE and warns about each one it cannot. Not in the broker's
 * state_dir either: that is the broker's (mode 0700), and the bundle must be
 * readable by any user inside the sandbox.
 */
#define NETNS_STATE_DIR "/run/sluice-sandboxes"
/* NETNS_STATE_DIR/.creating-NAME: a create of NAME began and has not ended
 * (create.c); NETNS_CREATE_LOCK: one lock byte per name, held by a create. */
#define NETNS_CREATING_PREFIX NETNS_STATE_DIR "/.creating-"
#define NETNS_CREATE_LOCK NETNS_STATE_DIR "/.create-lock"
/* Where a delete moves a sandbox's emptied directories, to be removed after
 * it has answered (netns_trash_sweep()). */
#define NETNS_TRASH_DIR NETNS_STATE_DIR "/.deleted"
/* Broker-side links are "sl-" and 8 hex digits of the sandbox address: at
 * most 15 characters, unique per address, and what the nftables rules match. */
#define NETNS_LINK_PREFIX "sl-"
#define NETNS_IFNAMSIZ 16
/* The alias of a broker-side link whose sandbox is deleted (the link goes
 * a moment later): a create that meets it may remove it. */
#define NETNS_LINK_RETIRED "sluice: deleted"
#define NETNS_SANDBOX_IF "eth0"
#define NETNS_SYSTEM_CA "/etc/ssl/certs/ca-certificates.crt"
/* The contained runner (cli/runner.c): bubblewrap; each sandbox's workspace,
 * NETNS_WORKSPACE_DIR/NAME on the host (on disk, not in /run: workspaces
 * hold checkouts and builds), NETNS_WORKSPACE_INSIDE in the sandbox; the
 * first of the unprivileged uids sandboxes run as outside. */
#define NETNS_BWRAP "/usr/bin/bwrap"
#define NETNS_WORKSPACE_PARENT "/var/lib/sluice"
#define NETNS_WORKSPACE_DIR "/var/lib/sluice/workspaces"
#define NETNS_WORKSPACE_INSIDE "/workspace"
/* Where sluice builds the contained runner's template (cli/runner.c), in a
 * mount namespace of its own (a tmpfs there; on the host an empty
 * directory). A sandbox name never starts with '.'. */
#define NETNS_RUNNER_STAGE NETNS_STATE_DIR "/.runner"
#define NETNS_UID_BASE 0x70000000u

struct mnl_socket;

struct netns_ports {
	uint16_t proxy;
	uint16_t transparent;
	uint16_t dns;
};

/* One sandbox, as written to NETNS_STATE_DIR/NAME/sandbox at create time. */
struct netns_sandbox {
	char name[NETNS_NAME_MAX + 1];
	char link[NETNS_IFNAMSIZ]; /* broker side */
	uint32_t addr;		   /* host byte order; the gateway is addr - 1 */
	uint32_t gw;
	struct netns_ports ports;
	uint64_t broker_ns_dev; /* the network namespace create ran in */
	uint64_t broker_ns_ino;
	char socket[108];	     /* the control socket create talked to */
	char ifname[NETNS_IFNAMSIZ]; /* inside the sandbox (NETNS_SANDBOX_IF unless attached) */
	char mac[18];		     /* of ifname, "aa:bb:cc:dd:ee:ff"; not in the record */
	char host_mac[18];	     /* of link; not in the record */
	/* Attached (cli/attach.c): the namespace is a runtime's, never removed by
	 * sluice; ns_named: /run/netns/NAME is sluice's own bind mount of it
	 * (always, for a created sandbox), to be unmounted by detach. */
	bool attached;
	bool ns_named;
};

/* --- state.c: names, paths, the sandbox record, the environment ------- */

bool netns_name_ok(const char *name);
void netns_link_name(uint32_t addr, char out[NETNS_IFNAMSIZ]);
int netns_self_ns_id(uint64_t *dev, uint64_t *ino);
int netns_path(char *buf, size_t len, const char *dir, const char *name, const char *file);
int netns_state_write(const struct netns_sandbox *sb);
struct sl_err;

int netns_state_read(const char *name, struct netns_sandbox *sb, struct sl_err *err);
int netns_bundle_begin(const char *from, const char *to, size_t max, bool *missing);
int netns_bundle_end(int out, const char *extra, const char *to);
int netns_write_bundle(const char *from, const char *extra, const char *to, size_t max,
		       bool *missing);
int netns_note_privileged(const struct netns_sandbox *sb, struct sl_err *err);
int netns_env_each(const struct netns_sandbox *sb,
		   void (*fn)(const char *key, const char *value, void *arg), void *arg);

/* --- nsfs.c: named network namespaces, iproute2 style ----------------- */

int netns_ns_new(int *nsfd, int (*inside)(void *arg), void *arg);
int netns_ns_name(const char *name, int nsfd);
int netns_ns_remove(const char *name);
int netns_ns_open(const char *name);
int netns_in_host_mount_ns(int (*fn)(void *arg), void *arg);
int netns_ns_in_use(uint64_t dev, uint64_t ino);
int netns_ns_enter(int nsfd, int *saved);
int netns_ns_leave(int saved);
int netns_procfs_private(void);
int netns_sysctl_write(int dfd, const char *path, const char *value);

/* --- veth.c: links, addresses and routes over rtnetlink (libmnl) ------ */

struct netns_rtnl {
	struct mnl_socket *nl;
	uint32_t portid;
	uint32_t seq;
};

/* Requests sent to one socket in one message (netns_rtnl_batch_send()). */
struct netns_rtnl_batch {
	char buf[2048];
	size_t len;
	unsigned n;
	bool overflow;
};

int netns_rtnl_open(struct netns_rtnl *r);
void netns_rtnl_close(struct netns_rtnl *r);
int netns_link_index(struct netns_rtnl *r, const char *name);
int netns_link_mac(struct netns_rtnl *r, const char *name, char out[18]);
int netns_link_flags(struct netns_rtnl *r, const char *name);
bool netns_ifname_ok(const char *name);
int netns_veth_add(struct netns_rtnl *r, const char *name, const char *peer, int peer_nsfd);
int netns_link_del(struct netns_rtnl *r, int index);
int netns_link_retire(struct netns_rtnl *r, int index);
int netns_link_retired(struct netns_rtnl *r, const char *name);
int netns_link_others(struct netns_rtnl *r, char *names, size_t len);
pid_t netns_link_del_begin(int index);
void netns_link_del_reap(pid_t pid);
void netns_rtnl_batch_init(struct netns_rtnl_batch *b);
void netns_link_set(struct netns_rtnl_batch *b, int index, bool up);
void netns_addr4_add(struct netns_rtnl_batch *b, int index, uint32_t addr, unsigned plen);
void netns_route4_default(struct netns_rtnl_batch *b, int index, uint32_t gw);
int netns_rtnl_batch_send(struct netns_rtnl *r, struct netns_rtnl_batch *b, unsigned *step);
int netns_link_wait_running(struct netns_rtnl *r1, const char *name1, struct netns_rtnl *r2,
			    const char *name2, unsigned timeout_ms);

/* --- linger.c: what is slow to free, freed after the process exits ---- */

int netns_linger(int fd);
int netns_linger_then(int fd, void (*after)(void));

/* --- workspace.c: a sandbox's workspace, removed with it ----------- */

int netns_workspace_remove(const char *name);

/* --- nft.c: the table inet sluice and its set elements ---------------- */

int netns_nft_install(const struct netns_ports *p, int *held, struct sl_err *err);
int netns_nft_element(bool add, const char *link, uint32_t addr, int *held, struct sl_err *err);
int netns_nft_element_present(const char *link, uint32_t addr, struct sl_err *err);

/* --- create.c, delete.c, and the CLI around them --------------------------------- */

int netns_broker_config(struct netns_ports *p, struct sl_err *err);
int netns_remove_state_dir(const char *name, bool later);
int netns_remove_etc_dir(const char *name, bool later);
int netns_trash_sweep(void);
void netns_hold_signals(sigset_t *old);
int netns_sandbox_remove(const char *name, bool detach, struct sl_err *err);
int netns_sandbox_create_exiting(const char *name, const char *policy, bool audit,
				 struct netns_sandbox *out, struct sl_err *err);
int netns_sandbox_delete_exiting(const char *name, struct sl_err *err);

#endif
