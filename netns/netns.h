/* SPDX-License-Identifier: MIT */
/* The sandbox lifecycle library: the control client, create, delete,
 * attach, detach (the CLI, sluice-cni and sluice-oci-hook use it). */
#ifndef SLUICE_NETNS_H
#define SLUICE_NETNS_H

#include <stdbool.h>
#include <stddef.h>

struct sl_err;

/* The broker's control socket (--socket, SLUICE_SOCKET, or the default). */
extern const char *netns_socket_path;

/**
 * netns_ctl() - one request to sluiced over the control socket
 * @line: the request, without its newline
 * @resp: the answer's body, or the broker's error message (free() it)
 *
 * Return: 0; -EPROTO when the broker answered with an error (callers that
 * treat it apart use netns_ctl_err()); another negative errno when it could
 * not be reached.
 */
int netns_ctl(const char *line, char **resp);
struct sl_err;
/**
 * netns_ctl_err() - netns_ctl(), and @err saying why it failed
 * @err: NULL, or on failure the broker's error message with errno 0 when
 *       the broker answered with one (*@resp holds it too, uncut), or
 *       "cannot reach sluiced at SOCKET: <strerror>" with the errno
 *
 * The return value is netns_ctl()'s. A caller tells a refusal by
 * sl_err_errno(@err) == 0, not by -EPROTO, which a socket call may return.
 */
int netns_ctl_err(const char *line, char **resp, struct sl_err *err);
/* Is @msg (a broker's error) a refusal that passes while sandboxes come
 * and go, or a busy broker's? netns_ctl() asks again then; callers of
 * netns_ctl_send() may. */
bool netns_ctl_transient(const char *msg);
int netns_ctl_send(const char *line);
int netns_enter_broker(const char *spec, struct sl_err *err);
int netns_ctl_recv(int fd, char **resp);

struct netns_sandbox;

/**
 * netns_sandbox_create() - create a sandbox wired to the broker of the
 * calling thread's network namespace (netns/create.c)
 * @name:   the sandbox name: /run/netns/@name
 * @policy: its policy file
 * @audit:  register it in audit mode (`--audit`), whatever the policy's mode
 * @out:    on success, the sandbox (struct netns_sandbox, netns_internal.h);
 *          may be NULL
 * @err:    on failure, the message (NULL: not wanted); its errno
 *          (sl_err_errno()) is EBADMSG for an invalid policy, and then the
 *          message is whole (FILE:LINE:COL: ...), to be shown as it is
 *
 * Return: 0; -EBADMSG for an invalid policy; another negative errno, and
 * then nothing of the sandbox is left.
 */
int netns_sandbox_create(const char *name, const char *policy, bool audit,
			 struct netns_sandbox *out, struct sl_err *err);

/**
 * netns_sandbox_delete() - unregister a sandbox and remove what sluice made
 * for it (netns/delete.c)
 * @name:   the sandbox
 * @err:    on failure, the message (NULL: not wanted)
 *
 * Return: 0; -ENOENT when there is no such sandbox; another negative errno.
 */
int netns_sandbox_delete(const char *name, struct sl_err *err);

/* Wire an existing network namespace (opened from @netns_path: /run/netns/X, /proc/PID/ns/net, or any nsfs bind mount) to the broker, as netns_sandbox_create() does (address from the pool through the broker's register, the veth pair with its inner end named @ifname (NULL: "eth0") moved into that namespace, IPv6 off, lo up, the default route, the nftables set element last, the sandbox's files in /run/sluice-sandboxes/NAME, /etc/netns/NAME/resolv.conf), without making the namespace; full rollback on failure (nothing left, the namespace untouched). The sandbox record notes that it was attached, so that delete/detach never removes the namespace. @audit: audit mode, as for netns_sandbox_create(). */
int netns_sandbox_attach(const char *name, const char *netns_path, const char *ifname,
			 const char *policy, bool audit, struct netns_sandbox *out,
			 struct sl_err *err);
/* Undo attach (or create, without deleting the namespace): unregister, set element, veth, files. Idempotent for the CNI's sake: -ENOENT when nothing of @name is left; works when the namespace is already gone. */
int netns_sandbox_detach(const char *name, struct sl_err *err);

/*
 * More on the two above (netns/create.c, netns/delete.c, cli/attach.c):
 * /run/netns/NAME of an attached sandbox is sluice's own bind mount of the
 * namespace when that name was free (then `sluice exec NAME` and `ip netns
 * exec NAME` work, and detach unmounts it), and the runtime's, left alone,
 * when @netns_path is that very file. The broker's own namespace and PID
 * 1's are refused. netns_sandbox_detach() removes the interface before it
 * returns; IPv6 stays off in a namespace that outlives its sandbox.
 * `sluice delete` of an attached sandbox is a detach.
 */

#endif
