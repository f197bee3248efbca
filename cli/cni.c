// SPDX-License-Identifier: MIT
/* sluice-cni: a CNI 1.0.0 plugin that makes the container's network
 * namespace a sluice sandbox (ADD), checks it (CHECK) and undoes it (DEL).
 *
 * Theory of operation: the runtime runs the plugin once per command, with
 * the CNI_* environment and the network config on stdin (cli/cni_conf.c
 * reads both). The plugin enters the broker's network namespace
 * (`brokerNetns`, as `sluice --broker-netns` does) and talks to the broker
 * on `socket`; the wiring is netns_sandbox_attach() and
 * netns_sandbox_detach(), the library under `sluice attach` and `detach`,
 * so that a CNI sandbox is an ordinary one: its name is "cni-" and the
 * first 24 characters of the container id, and `sluice list`, `env`,
 * `update` and `delete` work on it. Every failure is answered as the spec's
 * error JSON on stdout with exit status 1; DEL succeeds whenever nothing of
 * the sandbox is left, whatever is missing (the namespace, prevResult, the
 * sandbox itself). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cni.h"
#include "common/ctlproto.h"
#include "common/err.h"
#include "common/version.h"
#include "netns/netns.h"
#include "netns/netns_internal.h"

/* A network config is a few hundred bytes; a prevResult a few more. */
#define CONF_MAX (1u << 20)

struct cni_env {
	const char *command, *id, *netns, *ifname, *args;
	char name[NETNS_NAME_MAX + 1]; /* the sandbox's */
};

/* The whole of stdin, NUL-terminated (malloc'd, the caller frees it). */
static int read_stdin(char **out, size_t *len, struct cni_error *e)
{
	size_t got = 0;
	char *buf = malloc(CONF_MAX + 1);

	if (!buf)
		return cni_fail(e, CNI_ERR_IO, ENOMEM, NULL, "out of memory");
	for (;;) {
		ssize_t k = read(STDIN_FILENO, buf + got, CONF_MAX - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int r = errno;

			free(buf);
			return cni_fail(e, CNI_ERR_IO, r, strerror(r),
					"cannot read the network config from stdin");
		}
		if (k == 0)
			break;
		got += (size_t)k;
		if (got == CONF_MAX) {
			free(buf);
			return cni_fail(e, CNI_ERR_DECODE, EFBIG, NULL,
					"network config is larger than %u bytes", CONF_MAX);
		}
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

/* A broker that cannot be reached now may be there later (it is starting,
 * restarting, or too busy): the runtime is told to try again. No socket
 * file (ENOENT) is the broker not started yet: the namespace and the
 * policy, the other things attach opens, are looked up before it. */
static int attach_code(int r)
{
	switch (r) {
	case -EBADMSG:
		return CNI_ERR_POLICY;
	case -ENOENT:
	case -EHOSTUNREACH: /* detach: removed here, the broker not told yet */
	case -ECONNREFUSED:
	case -EAGAIN:
	case -EBUSY:
	case -ETIMEDOUT:
		return CNI_ERR_TRY_AGAIN;
	default:
		return CNI_ERR_WIRE;
	}
}

static int cmd_add(const struct cni_conf *c, const struct cni_env *env, struct cni_error *e)
{
	char policy[PATH_MAX], k8s_ns[CNI_K8S_NAME_MAX + 1], k8s_pod[CNI_K8S_NAME_MAX + 1];
	struct netns_sandbox sb, rec;
	struct sl_err se = { 0 };
	struct cni_wiring w = { .prefix = 30 };
	struct stat st;
	sigset_t old;
	char *res;
	int r, pod;

	if (!env->netns || !env->netns[0])
		return cni_fail(e, CNI_ERR_ENV, EINVAL, NULL, "ADD needs CNI_NETNS");
	if (!env->ifname || !env->ifname[0])
		return cni_fail(e, CNI_ERR_ENV, EINVAL, NULL, "ADD needs CNI_IFNAME");
	if (stat(env->netns, &st) < 0) {
		r = errno;
		return cni_fail(e, CNI_ERR_ENV, r, strerror(r), "CNI_NETNS `%s`: %s", env->netns,
				strerror(r));
	}
	r = cni_policy_choose(c, env->args, policy, sizeof(policy), e);
	if (r < 0)
		return r;
	pod = cni_pod_names(env->args, k8s_ns, k8s_pod);
	if (pod < 0)
		return cni_fail(
			e, CNI_ERR_ENV, EINVAL, NULL,
			"CNI_ARGS K8S_POD_NAMESPACE or K8S_POD_NAME is not a Kubernetes name");
	/* Named plainly here; the broker checks what the file says. */
	if (stat(policy, &st) < 0) {
		r = errno;
		return cni_fail(e, CNI_ERR_POLICY, r, NULL, "no policy file `%s`: %s", policy,
				strerror(r));
	}
	if (!S_ISREG(st.st_mode))
		return cni_fail(e, CNI_ERR_POLICY, EINVAL, NULL, "policy `%s` is not a file",
				policy);
	/* What an interrupted attach has done, it undoes itself: the signals
	 * that would end the plugin mid-way wait until it has. */
	netns_hold_signals(&old);
	r = netns_sandbox_attach(env->name, env->netns, env->ifname, policy, c->audit, &sb, &se);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		return cni_fail(e, attach_code(r), -r, sl_err_msg(&se),
				"cannot attach sandbox `%s`: %s", env->name, sl_err_msg(&se));
	/* A Kubernetes pod's files, from the record as `sluice env` reads it;
	 * a pod that would start without them is not started. */
	if (pod == 1 && ((r = netns_state_read(env->name, &rec, &se)) < 0 ||
			 (r = cni_pod_publish(k8s_ns, k8s_pod, &rec, e)) < 0)) {
		if (!e->code)
			cni_fail(e, CNI_ERR_IO, -r, sl_err_msg(&se), "cannot read sandbox `%s`: %s",
				 env->name, sl_err_msg(&se));
		netns_hold_signals(&old);
		netns_sandbox_detach(env->name, NULL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return r;
	}
	snprintf(w.host_if, sizeof(w.host_if), "%s", sb.link);
	snprintf(w.host_mac, sizeof(w.host_mac), "%s", sb.host_mac);
	snprintf(w.ct_if, sizeof(w.ct_if), "%s", sb.ifname);
	snprintf(w.ct_mac, sizeof(w.ct_mac), "%s", sb.mac);
	snprintf(w.netns, sizeof(w.netns), "%s", env->netns);
	w.addr = sb.addr;
	w.gw = sb.gw;
	res = cni_result_json(c->version, &w);
	if (!res || puts(res) < 0 || fflush(stdout) != 0) {
		free(res);
		/* The runtime did not get the result: it will not DEL what
		 * it does not know of, so nothing is left behind. */
		if (pod == 1)
			cni_pod_withdraw(env->name);
		netns_hold_signals(&old);
		netns_sandbox_detach(env->name, NULL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return cni_fail(e, CNI_ERR_IO, EIO, NULL, "cannot write the result");
	}
	free(res);
	return 0;
}

static int cmd_del(const struct cni_env *env, struct cni_error *e)
{
	struct sl_err err = { 0 };
	sigset_t old;
	int r;

	/* Found by the sandbox's mark: a DEL need not carry the pod's names. */
	r = cni_pod_withdraw(env->name);
	if (r < 0)
		return cni_fail(e, CNI_ERR_IO, -r, NULL,
				"cannot remove the pod's files of `%s`: %s", env->name,
				strerror(-r));
	netns_hold_signals(&old);
	r = netns_sandbox_detach(env->name, &err);
	sigprocmask(SIG_SETMASK, &old, NULL);
	/* Nothing of it is left: what DEL is for, however it came about. */
	if (r == 0 || r == -ENOENT)
		return 0;
	return cni_fail(e, attach_code(r) == CNI_ERR_TRY_AGAIN ? CNI_ERR_TRY_AGAIN : CNI_ERR_WIRE,
			-r, sl_err_msg(&err), "cannot detach sandbox `%s`: %s", env->name,
			sl_err_msg(&err));
}

/* Is @name registered with the broker at @addr? One `list`. */
static int registered(const char *name, uint32_t addr, struct cni_error *e)
{
	char *resp, *line, *save = NULL, want[INET_ADDRSTRLEN];
	struct in_addr ia = { .s_addr = htonl(addr) };
	struct sl_err ce = { 0 };
	int r = netns_ctl_err(CTL_LIST, &resp, &ce), found = 0;

	if (r < 0 && sl_err_errno(&ce) == 0) {
		cni_fail(e, CNI_ERR_CHECK, EPROTO, resp, "broker: %s", resp);
		free(resp);
		return -EPROTO;
	}
	if (r < 0)
		return cni_fail(e, CNI_ERR_TRY_AGAIN, -r, strerror(-r), "%s", sl_err_msg(&ce));
	inet_ntop(AF_INET, &ia, want, sizeof(want));
	for (line = strtok_r(resp, "\n", &save); line && !found;
	     line = strtok_r(NULL, "\n", &save)) {
		char n[NETNS_NAME_MAX + 2], a[64];

		if (sscanf(line, "%64s %63s", n, a) == 2 && !strcmp(n, name))
			found = strcmp(a, want) == 0 ? 1 : -1;
	}
	free(resp);
	if (found == 1)
		return 0;
	return cni_fail(e, CNI_ERR_CHECK, ENOENT, NULL,
			found ? "sandbox `%s` is registered at another address than %s"
			      : "sandbox `%s` is not registered with the broker (address %s)",
			name, want);
}

/* Does @ifname inside the namespace @path hold @addr? Enters the namespace
 * for good: the last thing CHECK does. */
static int address_inside(const char *path, const char *ifname, uint32_t addr, struct cni_error *e)
{
	struct ifaddrs *ifa, *i;
	int fd, r, found = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = errno;
		return cni_fail(e, CNI_ERR_CHECK, r, NULL, "CNI_NETNS `%s`: %s", path, strerror(r));
	}
	r = setns(fd, CLONE_NEWNET) < 0 ? errno : 0;
	close(fd);
	if (r)
		return cni_fail(e, CNI_ERR_CHECK, r, NULL, "cannot enter `%s`: %s", path,
				strerror(r));
	if (getifaddrs(&ifa) < 0) {
		r = errno;
		return cni_fail(e, CNI_ERR_IO, r, NULL, "cannot list addresses in `%s`: %s", path,
				strerror(r));
	}
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    !strcmp(i->ifa_name, ifname) &&
		    ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr) == addr)
			found = 1;
	freeifaddrs(ifa);
	if (found)
		return 0;
	return cni_fail(e, CNI_ERR_CHECK, ENOENT, NULL,
			"`%s` in `%s` does not hold the sandbox's address", ifname, path);
}

static int cmd_check(const struct cni_conf *c, const struct cni_env *env, struct cni_error *e)
{
	char a[INET_ADDRSTRLEN], want[INET_ADDRSTRLEN + 4];
	struct netns_sandbox sb;
	struct sl_err se = { 0 };
	struct in_addr ia;
	int r;

	if (!env->netns || !env->netns[0] || !env->ifname || !env->ifname[0])
		return cni_fail(e, CNI_ERR_ENV, EINVAL, NULL,
				"CHECK needs CNI_NETNS and CNI_IFNAME");
	r = netns_state_read(env->name, &sb, &se);
	if (r < 0)
		return cni_fail(e, CNI_ERR_CHECK, -r, sl_err_msg(&se), "no sandbox `%s`: %s",
				env->name, sl_err_msg(&se));
	ia.s_addr = htonl(sb.addr);
	inet_ntop(AF_INET, &ia, a, sizeof(a));
	snprintf(want, sizeof(want), "%s/30", a);
	if (c->prev_addr[0] && strcmp(c->prev_addr, want) != 0)
		return cni_fail(e, CNI_ERR_CHECK, EINVAL, NULL,
				"prevResult has address %s, sandbox `%s` has %s", c->prev_addr,
				env->name, want);
	r = registered(env->name, sb.addr, e);
	if (r < 0)
		return r;
	r = netns_nft_element_present(sb.link, sb.addr, &se);
	if (r < 0)
		return cni_fail(e, CNI_ERR_CHECK, -r, sl_err_msg(&se), "%s", sl_err_msg(&se));
	if (r == 0)
		return cni_fail(e, CNI_ERR_CHECK, ENOENT, NULL,
				"sandbox `%s`: no element { %s . %s } in the firewall's set",
				env->name, sb.link, a);
	return address_inside(env->netns, env->ifname, sb.addr, e);
}

int main(int argc, char **argv)
{
	struct cni_env env = { 0 };
	struct cni_conf c;
	struct cni_error e = { 0 };
	const char *version = NULL;
	struct sl_err err = { 0 };
	char *text = NULL, *out;
	size_t len = 0;
	int r;

	/* A person at a shell, not a runtime (which speaks through CNI_COMMAND
	 * and stdin only). */
	if (argc == 2 && !strcmp(argv[1], "--version"))
		return printf("sluice-cni %s\n", sluice_version) < 0;
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
		return printf("usage: sluice-cni (a CNI 1.0.0 plugin: run by a runtime with "
			      "CNI_COMMAND set and the network config on stdin; see sluice(1), "
			      "README \"Kubernetes\")\n       sluice-cni --version\n") < 0;
	env.command = getenv("CNI_COMMAND");
	env.id = getenv("CNI_CONTAINERID");
	env.netns = getenv("CNI_NETNS");
	env.ifname = getenv("CNI_IFNAME");
	env.args = getenv("CNI_ARGS");
	if (env.command && !strcmp(env.command, "VERSION")) {
		out = cni_version_json();
		r = out && puts(out) >= 0 ? 0 : 1;
		free(out);
		return r;
	}
	if (!env.command || (strcmp(env.command, "ADD") && strcmp(env.command, "DEL") &&
			     strcmp(env.command, "CHECK"))) {
		r = cni_fail(&e, CNI_ERR_ENV, EINVAL, NULL,
			     "CNI_COMMAND `%s` is not ADD, DEL, CHECK or VERSION",
			     env.command ? env.command : "");
		goto fail;
	}
	r = read_stdin(&text, &len, &e);
	if (r < 0)
		goto fail;
	r = cni_conf_parse(text, len, &c, &e);
	if (c.version[0])
		version = c.version;
	if (r < 0)
		goto fail;
	if (cni_sandbox_name(env.id, env.name, sizeof(env.name)) < 0) {
		r = cni_fail(
			&e, CNI_ERR_ENV, EINVAL, NULL,
			"CNI_CONTAINERID `%.80s` is not a container id (an alphanumeric, then [A-Za-z0-9._-])",
			env.id ? env.id : "");
		goto fail;
	}
	netns_socket_path = c.socket;
	if (c.broker_netns[0] && netns_enter_broker(c.broker_netns, &err) < 0) {
		/* The broker's namespace is gone, and the sandbox's link with
		 * it: what DEL must remove is the rest (detach works from any
		 * namespace). */
		if (strcmp(env.command, "DEL") != 0) {
			r = cni_fail(&e, CNI_ERR_TRY_AGAIN, EAGAIN, sl_err_msg(&err),
				     "cannot enter the broker's network namespace: %s",
				     sl_err_msg(&err));
			goto fail;
		}
	}
	if (!strcmp(env.command, "ADD"))
		r = cmd_add(&c, &env, &e);
	else if (!strcmp(env.command, "DEL"))
		r = cmd_del(&env, &e);
	else
		r = cmd_check(&c, &env, &e);
	if (r == 0) {
		free(text);
		return 0;
	}
fail:
	free(text);
	out = cni_error_json(version, &e);
	if (out)
		puts(out);
	else
		printf("{\"cniVersion\":\"%s\",\"code\":%d,\"msg\":\"sluice-cni: out of memory\"}\n",
		       CNI_VERSION, CNI_ERR_IO);
	free(out);
	return 1;
}
