// SPDX-License-Identifier: MIT
/* sluice-oci-hook: an OCI runtime hook that wires a container's network
 * namespace to the broker (createRuntime or prestart) and unwires it
 * (poststop), a thin layer over netns_sandbox_attach() and
 * netns_sandbox_detach().
 *
 * Theory of operation: the runtime gives the container's state (JSON) on
 * stdin: id, status, pid, bundle, annotations. A status other than
 * "stopped" attaches /proc/PID/ns/net as the sandbox "oci-" + the first 24
 * characters of the id, with the policy the annotation sluice.io/policy
 * names (a NAME, mapped to POLICY_DIR/NAME.yaml; without the annotation the
 * configuration's "policy", if any); "stopped" detaches it. Every failure
 * is an exit status of 1 with one line on stderr, so that the runtime does
 * not start the container (fail closed): an unknown policy, a broker that
 * does not answer, a namespace that cannot be wired.
 *
 * A hook cannot add mounts or environment to the container, so what the
 * container needs reaches it through one directory ("dir", default
 * /run/sluice-oci) that the container's configuration binds in, read-only,
 * at the same path: the hook writes DIR/NAME/ (resolv.conf, ca-bundle.crt,
 * env: `sluice env` with the bundle's path in DIR) and the symbolic link
 * DIR/net-INODE -> NAME, INODE being the network namespace's, which the
 * container can read (stat -L -c %i /proc/self/ns/net) without knowing
 * its id. The sandbox's resolv.conf is bound over the container's
 * /etc/resolv.conf (read-only) in the container's mount namespace, before
 * the runtime moves into its root (see bind_resolv()).
 *
 * Configuration (--config FILE, default /etc/sluice/oci-hook.json):
 *   { "socket": "/run/sluice/sluiced.sock", "brokerNetns": "",
 *     "policyDir": "/etc/sluice/policies", "policy": "", "dir": "/run/sluice-oci" }
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "common/err.h"
#include "common/file.h"
#include "common/version.h"
#include "netns/netns.h"
#include "netns/netns_internal.h"

#define HOOK_CONFIG "/etc/sluice/oci-hook.json"
#define HOOK_ANNOTATION "sluice.io/policy"
#define HOOK_NAME_PREFIX "oci-"
#define HOOK_ID_CHARS 24
/* The container state and the config are small; more is not ours. */
#define HOOK_STDIN_MAX (1u << 20)
#define HOOK_BUNDLE_MAX (16u << 20)

struct hook_config {
	char socket[108];
	char broker_netns[PATH_MAX];
	char policy_dir[256];
	char policy[NETNS_NAME_MAX + 1];
	char dir[256];
	/* Audit mode for every sandbox this hook makes: the host's choice
	 * alone (no annotation, which a container's author sets, can ask). */
	bool audit;
};

__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...)
{
	va_list ap;

	fputs("sluice-oci-hook: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

/* Copies the string member @key of @o into @out; absent leaves @out as it
 * is. Return: 0, or -EINVAL when it is no string or too long. */
static int get_str(json_t *o, const char *key, char *out, size_t len)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		return 0;
	if (!json_is_string(v) || json_string_length(v) >= len ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return -EINVAL;
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

static int load_config(const char *path, struct hook_config *c)
{
	static const char *const keys[] = { "socket", "brokerNetns", "policyDir",
					    "policy", "dir",	     "audit" };
	json_error_t je;
	const char *k;
	json_t *o, *v;
	size_t i;
	int r = 0;

	snprintf(c->socket, sizeof(c->socket), "/run/sluice/sluiced.sock");
	snprintf(c->policy_dir, sizeof(c->policy_dir), "/etc/sluice/policies");
	snprintf(c->dir, sizeof(c->dir), "/run/sluice-oci");
	o = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return fail("%s:%d:%d: %s", path, je.line, je.column, je.text);
	if (!json_is_object(o)) {
		json_decref(o);
		return fail("%s: not a JSON object", path);
	}
	json_object_foreach(o, k, v) {
		for (i = 0; i < sizeof(keys) / sizeof(keys[0]) && strcmp(k, keys[i]); i++)
			;
		if (i == sizeof(keys) / sizeof(keys[0])) {
			r = fail("%s: unknown key `%s`", path, k);
			break;
		}
	}
	if (r == 0 && (get_str(o, "socket", c->socket, sizeof(c->socket)) < 0 ||
		       get_str(o, "brokerNetns", c->broker_netns, sizeof(c->broker_netns)) < 0 ||
		       get_str(o, "policyDir", c->policy_dir, sizeof(c->policy_dir)) < 0 ||
		       get_str(o, "policy", c->policy, sizeof(c->policy)) < 0 ||
		       get_str(o, "dir", c->dir, sizeof(c->dir)) < 0))
		r = fail("%s: every value is a string of sensible length", path);
	v = json_object_get(o, "audit");
	if (r == 0 && v && !json_is_boolean(v))
		r = fail("%s: `audit` is true or false", path);
	c->audit = v && json_is_true(v);
	json_decref(o);
	if (r == 0 && (c->dir[0] != '/' || c->policy_dir[0] != '/'))
		r = fail("%s: `dir` and `policyDir` are absolute paths", path);
	return r;
}

/* A policy NAME: a sandbox-like name (no `/`, no `..`, not hidden). */
static bool policy_name_ok(const char *n)
{
	return netns_name_ok(n) && !strstr(n, "..");
}

/* Copies the file @from to @to (mode 0644). */
static int copy_file(const char *from, const char *to)
{
	char *buf = malloc(HOOK_BUNDLE_MAX + 1);
	ssize_t n;
	int fd, r;

	if (!buf)
		return -ENOMEM;
	fd = open(from, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		free(buf);
		return r;
	}
	n = read(fd, buf, HOOK_BUNDLE_MAX + 1);
	r = n < 0 ? -errno : (n > (ssize_t)HOOK_BUNDLE_MAX ? -EFBIG : 0);
	close(fd);
	if (r == 0) {
		buf[n] = '\0';
		r = file_write_atomic(to, buf, strlen(buf), 0644);
	}
	free(buf);
	return r;
}

struct env_out {
	char *buf;
	size_t len, cap;
	const char *bundle; /* the CA bundle's path as the container sees it */
};

static void env_line(const char *key, const char *value, void *arg)
{
	struct env_out *e = arg;
	bool ca = strstr(value, NETNS_STATE_DIR "/") == value;
	size_t need = strlen(key) + strlen(ca ? e->bundle : value) + 3;
	char *nb;

	if (e->len + need > e->cap) {
		nb = realloc(e->buf, e->cap + need + 1024);
		if (!nb)
			return;
		e->buf = nb;
		e->cap += need + 1024;
	}
	e->len += (size_t)snprintf(e->buf + e->len, e->cap - e->len, "%s=%s\n", key,
				   ca ? e->bundle : value);
}

/* The container's root file system, as the host sees it: the state's
 * "root" (crun gives it), else config.json's root.path (relative to the
 * bundle). Return: 0, or -ENOENT. */
static int container_root(json_t *st, const char *bundle, char *out, size_t len)
{
	const char *root = json_string_value(json_object_get(st, "root"));
	char path[PATH_MAX];
	json_t *cfg = NULL;
	int r = -ENOENT;

	if (!root && bundle && snprintf(path, sizeof(path), "%s/config.json", bundle) < (int)len) {
		cfg = json_load_file(path, 0, NULL);
		root = json_string_value(json_object_get(json_object_get(cfg, "root"), "path"));
	}
	if (root && root[0] == '/' && snprintf(out, len, "%s", root) < (int)len)
		r = 0;
	else if (root && bundle && snprintf(out, len, "%s/%s", bundle, root) < (int)len)
		r = 0;
	json_decref(cfg);
	return r;
}

/*
 * Binds @src (DIR/NAME/resolv.conf) over ROOT/etc/resolv.conf in the mount
 * namespace of the container @pid, read-only. At createRuntime (and
 * prestart) the runtime has made that namespace and mounted the root file
 * system, but not moved into it yet (the OCI runtime spec): the host's
 * paths are there, and the mount goes with the root into the container.
 * Done by a child, so that this process stays in its own namespace. A
 * root without /etc/resolv.conf is left as it is (a warning): it is not
 * sluice's to change.
 */
static int bind_resolv(pid_t pid, const char *root, const char *src)
{
	char target[PATH_MAX + 32], ns[64];
	int status, fd;
	pid_t child;

	snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)pid);
	fd = open(ns, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	snprintf(target, sizeof(target), "%s/etc/resolv.conf", root);
	child = fork();
	if (child < 0) {
		close(fd);
		return -errno;
	}
	if (child == 0) {
		/* The image's /etc/resolv.conf is looked up inside ROOT: an
		 * image's symbolic link (/etc -> /etc/netns/x, say) resolves
		 * there as it would in the container, never to a host path
		 * that the mount would then cover. */
		struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
					.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
		struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
						    MOUNT_ATTR_NODEV };
		struct stat st;
		int rootfd, at, tree;

		if (setns(fd, CLONE_NEWNS) < 0)
			_exit(1);
		rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (rootfd < 0)
			_exit(2);
		at = (int)syscall(SYS_openat2, rootfd, "etc/resolv.conf", &how, sizeof(how));
		if (at < 0 || fstat(at, &st) < 0 || !S_ISREG(st.st_mode))
			_exit(3);
		tree = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0 ||
		    move_mount(tree, "", at, "",
			       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
			_exit(2);
		_exit(0);
	}
	close(fd);
	if (waitpid(child, &status, 0) < 0)
		return -errno;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
		fprintf(stderr,
			"sluice-oci-hook: warning: `%s` is no file: the container keeps "
			"its resolver (names resolve through the broker all the same only "
			"where it is reached through the sandbox's route)\n",
			target);
		return 0;
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EPERM;
}

/* Removes DIR/NAME and the DIR/net-INODE link to it. */
static void remove_share(const struct hook_config *c, const char *name)
{
	static const char *const files[] = { "resolv.conf", "ca-bundle.crt", "env", "netns", NULL };
	char d[PATH_MAX], p[PATH_MAX + 64], link[64];
	ssize_t n;
	size_t i;
	int fd;

	snprintf(d, sizeof(d), "%s/%s", c->dir, name);
	snprintf(p, sizeof(p), "%s/netns", d);
	fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		n = read(fd, link, sizeof(link) - 1);
		close(fd);
		if (n > 0 && (link[n] = '\0', !strncmp(link, "net-", 4)) && !strchr(link, '/')) {
			snprintf(p, sizeof(p), "%s/%s", c->dir, link);
			unlink(p);
		}
	}
	for (i = 0; files[i]; i++) {
		snprintf(p, sizeof(p), "%s/%s", d, files[i]);
		unlink(p);
	}
	rmdir(d);
}

/* DIR/NAME and DIR/net-INODE for the container (see the top). */
static int write_share(const struct hook_config *c, const struct netns_sandbox *sb,
		       const char *nspath, pid_t pid, const char *root)
{
	char d[PATH_MAX], p[PATH_MAX + 64], from[512], gw[INET_ADDRSTRLEN], resolv[64], ino[48];
	struct in_addr ig = { .s_addr = htonl(sb->gw) };
	struct env_out e = { 0 };
	struct stat st;
	int r;

	inet_ntop(AF_INET, &ig, gw, sizeof(gw));
	snprintf(resolv, sizeof(resolv), "nameserver %s\n", gw);
	if (stat(nspath, &st) < 0)
		return fail("cannot stat `%s`: %s", nspath, strerror(errno));
	snprintf(ino, sizeof(ino), "net-%llu", (unsigned long long)st.st_ino);
	if (mkdir(c->dir, 0755) < 0 && errno != EEXIST)
		return fail("cannot make `%s`: %s", c->dir, strerror(errno));
	snprintf(d, sizeof(d), "%s/%s", c->dir, sb->name);
	if (mkdir(d, 0755) < 0 && errno != EEXIST)
		return fail("cannot make `%s`: %s", d, strerror(errno));
	snprintf(p, sizeof(p), "%s/resolv.conf", d);
	r = file_write_atomic(p, resolv, strlen(resolv), 0644);
	if (r == 0) {
		netns_path(from, sizeof(from), NETNS_STATE_DIR, sb->name, "ca-bundle.crt");
		snprintf(p, sizeof(p), "%s/ca-bundle.crt", d);
		r = copy_file(from, p);
	}
	if (r == 0) {
		e.bundle = p;
		netns_env_each(sb, env_line, &e);
		snprintf(p, sizeof(p), "%s/env", d);
		r = e.buf ? file_write_atomic(p, e.buf, strlen(e.buf), 0644) : -ENOMEM;
		free(e.buf);
	}
	if (r == 0) {
		snprintf(p, sizeof(p), "%s/netns", d);
		r = file_write_atomic(p, ino, strlen(ino), 0644);
	}
	if (r == 0) {
		snprintf(p, sizeof(p), "%s/%s", c->dir, ino);
		unlink(p); /* a namespace inode used again: the old link is stale */
		r = symlink(sb->name, p) < 0 ? -errno : 0;
	}
	if (r < 0)
		return fail("cannot write `%s` for the container: %s", d, strerror(-r));
	snprintf(p, sizeof(p), "%s/resolv.conf", d);
	r = root ? bind_resolv(pid, root, p) : 0;
	if (r < 0)
		return fail("cannot bind `%s` over the container's /etc/resolv.conf: %s", p,
			    strerror(-r));
	return 0;
}

static int read_stdin(char **out)
{
	size_t len = 0, cap = 64 << 10;
	char *buf = malloc(cap + 1);
	ssize_t n;

	if (!buf)
		return -ENOMEM;
	while ((n = read(STDIN_FILENO, buf + len, cap - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			return -errno;
		}
		len += (size_t)n;
		if (len == cap) {
			char *nb = cap >= HOOK_STDIN_MAX ? NULL : realloc(buf, cap * 2 + 1);

			if (!nb) {
				free(buf);
				return -EFBIG;
			}
			buf = nb;
			cap *= 2;
		}
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

/* The usage, on @f; @rc passed on. */
static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: sluice-oci-hook [--config FILE]   (the OCI state on stdin)\n"
		   "       sluice-oci-hook --version\n"
		   "  an OCI hook for createRuntime/prestart (attach) and poststop (detach);\n"
		   "  the policy NAME is the annotation " HOOK_ANNOTATION "\n");
	return rc;
}

int main(int argc, char **argv)
{
	const char *config = HOOK_CONFIG, *id, *status, *bundle, *pname;
	char name[NETNS_NAME_MAX + 1], policy[PATH_MAX + NETNS_NAME_MAX + 8], nspath[64],
		root[PATH_MAX], *in = NULL;
	struct hook_config c = { 0 };
	struct sl_err se = { 0 };
	struct netns_sandbox sb;
	json_error_t je;
	json_t *st, *ann;
	json_int_t pid;
	struct stat pst;
	sigset_t old;
	int i, r;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			config = argv[++i];
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return usage(stdout, 0);
		else if (!strcmp(argv[i], "--version"))
			return printf("sluice-oci-hook %s\n", sluice_version) < 0;
		else
			return usage(stderr, 2);
	}
	if (load_config(config, &c))
		return 1;
	r = read_stdin(&in);
	if (r < 0)
		return fail("cannot read the container state on stdin: %s", strerror(-r));
	st = json_loads(in, JSON_REJECT_DUPLICATES, &je);
	free(in);
	if (!st || !json_is_object(st))
		return fail("the container state on stdin is not a JSON object (%d:%d: %s)",
			    je.line, je.column, st ? "not an object" : je.text);
	id = json_string_value(json_object_get(st, "id"));
	status = json_string_value(json_object_get(st, "status"));
	bundle = json_string_value(json_object_get(st, "bundle"));
	ann = json_object_get(st, "annotations");
	if (!id || !status)
		return fail("the container state has no `id` or `status`");
	snprintf(name, sizeof(name), HOOK_NAME_PREFIX "%.*s", HOOK_ID_CHARS, id);
	if (!netns_name_ok(name))
		return fail("container id `%.64s` is not one a sandbox can be named after", id);
	netns_socket_path = c.socket;
	if (c.broker_netns[0] && netns_enter_broker(c.broker_netns, &se) < 0)
		return fail("%s", sl_err_msg(&se));

	if (!strcmp(status, "stopped")) {
		netns_hold_signals(&old);
		r = netns_sandbox_detach(name, &se);
		sigprocmask(SIG_SETMASK, &old, NULL);
		remove_share(&c, name);
		json_decref(st);
		/* Idempotent: a container whose attach failed is stopped too. */
		return r < 0 && r != -ENOENT ? fail("detach `%s`: %s", name, sl_err_msg(&se)) : 0;
	}

	pname = json_string_value(json_object_get(ann, HOOK_ANNOTATION));
	if (!pname && json_object_get(ann, HOOK_ANNOTATION))
		return fail("annotation " HOOK_ANNOTATION " is not a string");
	if (!pname || !*pname)
		pname = c.policy;
	if (!*pname)
		return fail("no policy: annotation " HOOK_ANNOTATION " unset and no `policy` in %s",
			    config);
	if (!policy_name_ok(pname))
		return fail("bad policy name `%.80s` (A-Z a-z 0-9 . _ -, no `/`, no `..`)", pname);
	snprintf(policy, sizeof(policy), "%s/%s.yaml", c.policy_dir, pname);
	if (access(policy, R_OK) < 0)
		return fail("unknown policy `%s` (%s: %s)", pname, policy, strerror(errno));
	if (!json_is_integer(json_object_get(st, "pid")) ||
	    (pid = json_integer_value(json_object_get(st, "pid"))) <= 0 || pid > INT_MAX)
		return fail("the container state has no `pid`");
	snprintf(nspath, sizeof(nspath), "/proc/%d/ns/net", (int)pid);
	if (stat(nspath, &pst) < 0)
		return fail("cannot find the container's network namespace `%s`: %s", nspath,
			    strerror(errno));

	netns_hold_signals(&old);
	r = netns_sandbox_attach(name, nspath, NULL, policy, c.audit, &sb, &se);
	if (r == 0 &&
	    write_share(&c, &sb, nspath, (pid_t)pid,
			container_root(st, bundle, root, sizeof(root)) == 0 ? root : NULL) != 0) {
		/* Fail closed, and leave nothing. */
		remove_share(&c, name);
		if (netns_sandbox_detach(name, &se) < 0)
			fprintf(stderr, "sluice-oci-hook: undo: %s\n", sl_err_msg(&se));
		r = -EIO;
		sl_err_clear(&se);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	json_decref(st);
	if (r < 0)
		return sl_err_msg(&se)[0] ? fail("attach `%s`: %s", name, sl_err_msg(&se)) : 1;
	return 0;
}
