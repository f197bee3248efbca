// SPDX-License-Identifier: MIT
/*
 * A sandbox's workspace (NETNS_WORKSPACE_DIR/NAME), removed with the
 * sandbox: create.c's undo and delete.c remove it, the runner (cli/runner.c)
 * makes it. It is here, not beside the runner, because removing it is part
 * of a sandbox's lifecycle and the library must not call into the CLI.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netns/netns.h"
#include "netns/netns_internal.h"

/* Removing a workspace: one descriptor per level down to RM_DEPTH_MAX; at
 * most RM_MOVES_MAX deeper directories moved up (a tree 2 million levels
 * deep), each pass of the removal moving at least one. */
#define RM_DEPTH_MAX 200
#define RM_MOVES_MAX 10000

/* Removing a workspace: where a deeper directory goes (a descriptor per
 * level is held down to RM_DEPTH_MAX), and how many it may move. */
struct rm_ctx {
	int topfd;
	unsigned moved;
};

/* Removes @name in @dfd and, for a directory, all it holds, without
 * following a symbolic link anywhere: the tree was written by the sandbox.
 * A directory deeper than RM_DEPTH_MAX is moved up into the top directory
 * (as .sluice-deep-N), for a later pass: no depth stops a removal. */
static int rm_at(struct rm_ctx *c, int dfd, const char *name, int depth)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd, r = 0;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) < 0 ? -errno : 0;
	if (depth >= RM_DEPTH_MAX) {
		char to[40];

		if (c->moved >= RM_MOVES_MAX)
			return -ELOOP;
		snprintf(to, sizeof(to), ".sluice-deep-%u", c->moved++);
		return renameat(dfd, name, c->topfd, to) < 0 ? -errno : -EAGAIN;
	}
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		r = -errno;
		close(fd);
		return r;
	}
	while ((de = readdir(d))) {
		int k;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		k = rm_at(c, fd, de->d_name, depth + 1);
		if (k < 0 && k != -ENOENT && (r == 0 || r == -EAGAIN))
			r = k;
	}
	closedir(d);
	if (r == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0)
		r = -errno;
	return r;
}

/**
 * netns_workspace_remove() - remove a sandbox's workspace and all in it
 * @name: the sandbox
 *
 * Return: 0, -ENOENT when it has none, or another negative errno.
 */
int netns_workspace_remove(const char *name)
{
	struct rm_ctx c = { .topfd = -1 };
	int dfd, r, pass;

	if (!netns_name_ok(name))
		return -EINVAL;
	dfd = open(NETNS_WORKSPACE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	c.topfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c.topfd < 0) {
		r = -errno;
		if (r == -ENOTDIR || r == -ELOOP) /* not a directory: a file, a link */
			r = unlinkat(dfd, name, 0) < 0 ? -errno : 0;
		close(dfd);
		return r;
	}
	/* Each pass removes what is within RM_DEPTH_MAX and moves up what is
	 * deeper; the moves are bounded, and so the passes. */
	for (pass = 0, r = -EAGAIN; r == -EAGAIN && pass <= RM_MOVES_MAX; pass++)
		r = rm_at(&c, dfd, name, 0);
	close(c.topfd);
	close(dfd);
	return r;
}
