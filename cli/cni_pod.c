// SPDX-License-Identifier: MIT
/* sluice-cni's files for a Kubernetes pod: what `sluice exec` gives a
 * sandbox (its CA bundle, its environment), where the pod can mount it.
 *
 * Why: a CNI plugin runs after the pod's volumes are made and before its
 * containers start, and cannot set a container's environment. So ADD
 * writes them to CNI_POD_DIR/NAMESPACE/POD on the node, a path the pod
 * spec can name (subPathExpr from the downward API), and DEL removes them.
 * Neither holds a secret: the bundle is certificates, and a placeholder is
 * refused outside its own sandbox. The `sandbox` file, written first, says
 * whose they are: a pod recreated under the same name (a StatefulSet's)
 * may be ADDed before the old one's DEL, which then leaves them alone. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cni.h"
#include "common/file.h"
#include "netns/netns_internal.h"

/* Far more than any system trust store, as create's. */
#define BUNDLE_MAX (16u << 20)

struct env_buf {
	char *s;
	size_t len, cap;
	bool overflow;
};

/* One KEY=VALUE line; the CA variables name the bundle as the pod sees it. */
static void env_line(const char *key, const char *value, void *arg)
{
	struct env_buf *b = arg;
	const char *v = value;
	int n;

	if (strstr(value, "/ca-bundle.crt") &&
	    !strncmp(value, NETNS_STATE_DIR "/", strlen(NETNS_STATE_DIR "/")))
		v = CNI_POD_MOUNT "/ca-bundle.crt";
	n = snprintf(b->s + b->len, b->cap - b->len, "%s=%s\n", key, v);
	if (n < 0 || (size_t)n >= b->cap - b->len)
		b->overflow = true;
	else
		b->len += (size_t)n;
}

static int mkdir_ok(const char *path)
{
	return mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

static int withdraw(const char *ns, const char *pod, const char *sandbox);

int cni_pod_publish(const char *ns, const char *pod, const struct netns_sandbox *sb,
		    struct cni_error *e)
{
	char dir[PATH_MAX], path[PATH_MAX + 32], from[PATH_MAX];
	struct env_buf b = { .cap = 64 * 1024 };
	bool missing;
	int r;

	/* Which pod is the sandbox's, for a DEL without the pod's names. */
	if ((r = mkdir_ok(CNI_POD_DIR)) < 0 || (r = mkdir_ok(CNI_POD_MARKS)) < 0)
		goto fail;
	snprintf(path, sizeof(path), CNI_POD_MARKS "/%s", sb->name);
	snprintf(dir, sizeof(dir), "%s/%s", ns, pod);
	if ((r = file_write_atomic(path, dir, strlen(dir), 0644)) < 0)
		goto fail;
	snprintf(dir, sizeof(dir), CNI_POD_DIR "/%s", ns);
	if ((r = mkdir_ok(dir)) < 0)
		goto fail;
	snprintf(dir, sizeof(dir), CNI_POD_DIR "/%s/%s", ns, pod);
	if ((r = mkdir_ok(dir)) < 0)
		goto fail;
	/* First: from here on the directory is this sandbox's, and an old
	 * pod's DEL leaves it alone. */
	snprintf(path, sizeof(path), "%s/sandbox", dir);
	if ((r = file_write_atomic(path, sb->name, strlen(sb->name), 0644)) < 0)
		goto fail;
	r = netns_path(from, sizeof(from), NETNS_STATE_DIR, sb->name, "ca-bundle.crt");
	snprintf(path, sizeof(path), "%s/ca-bundle.crt", dir);
	if (r == 0)
		r = netns_write_bundle(from, "", path, BUNDLE_MAX, &missing);
	if (r == 0 && missing)
		r = -ENOENT;
	if (r < 0)
		goto fail;
	b.s = malloc(b.cap);
	if (!b.s) {
		r = -ENOMEM;
		goto fail;
	}
	netns_env_each(sb, env_line, &b);
	snprintf(path, sizeof(path), "%s/env", dir);
	r = b.overflow ? -EFBIG : file_write_atomic(path, b.s, b.len, 0644);
	free(b.s);
	if (r < 0)
		goto fail;
	return 0;
fail:
	withdraw(ns, pod, sb->name);
	return cni_fail(e, CNI_ERR_IO, -r, NULL,
			"cannot write the pod's files in " CNI_POD_DIR "/%s/%s: %s", ns, pod,
			strerror(-r));
}

/* CNI_POD_DIR/@ns/@pod if it is @sandbox's, then @sandbox's mark. */
static int withdraw(const char *ns, const char *pod, const char *sandbox)
{
	/* The owner last: a withdraw cut short is withdrawn again by the next DEL. */
	static const char *const files[] = { "env",	    "ca-bundle.crt",
					     "env.tmp",	    "ca-bundle.crt.tmp",
					     "sandbox.tmp", "sandbox" };
	char dir[PATH_MAX], path[PATH_MAX + 32], owner[NETNS_NAME_MAX + 2] = "";
	ssize_t k;
	size_t i;
	int fd;

	snprintf(dir, sizeof(dir), CNI_POD_DIR "/%s/%s", ns, pod);
	snprintf(path, sizeof(path), "%s/sandbox", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		k = read(fd, owner, sizeof(owner) - 1);
		close(fd);
		owner[k > 0 ? k : 0] = '\0';
		if (strcmp(owner, sandbox) != 0)
			goto mark;
	} else if (errno != ENOENT) {
		return -errno;
	}
	/* No owner: a publish of this sandbox that did not finish, or nothing. */
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		if (unlink(path) < 0 && errno != ENOENT)
			return -errno;
	}
	if (rmdir(dir) < 0 && errno != ENOENT)
		return -errno;
	/* The namespace's directory goes with its last pod. */
	snprintf(dir, sizeof(dir), CNI_POD_DIR "/%s", ns);
	rmdir(dir);
mark:
	snprintf(path, sizeof(path), CNI_POD_MARKS "/%s", sandbox);
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int cni_pod_withdraw(const char *sandbox)
{
	char path[PATH_MAX], where[2 * CNI_K8S_NAME_MAX + 2] = "", *slash;
	ssize_t k;
	int fd;

	snprintf(path, sizeof(path), CNI_POD_MARKS "/%s", sandbox);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	k = read(fd, where, sizeof(where) - 1);
	close(fd);
	where[k > 0 ? k : 0] = '\0';
	slash = strchr(where, '/');
	/* A mark that is not NAMESPACE/POD (written by no sluice-cni) names
	 * no directory: only the mark goes. */
	if (!slash || strchr(slash + 1, '/') || strstr(where, "..") || slash == where ||
	    !slash[1]) {
		unlink(path);
		return 0;
	}
	*slash = '\0';
	return withdraw(where, slash + 1, sandbox);
}
