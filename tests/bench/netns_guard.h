/* SPDX-License-Identifier: MIT */
/* netns_guard.h - the bench tools' (blast, tlsload, dnsload) refusal to run
 * anywhere but in a named network namespace, such as the test world's: a
 * load generator started by mistake in the machine's own namespace would
 * aim at real addresses. Header only: each tool is one file, compiled by
 * its bench script. */
#ifndef SLUICE_BENCH_NETNS_GUARD_H
#define SLUICE_BENCH_NETNS_GUARD_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>

/* Is this process in a named network namespace (one under /run/netns)? */
static bool in_named_netns(void)
{
	struct stat me, st;
	struct dirent *de;
	char path[300];
	bool found = false;
	DIR *d;

	if (stat("/proc/self/ns/net", &me) < 0)
		return false;
	d = opendir("/run/netns");
	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/run/netns/%s", de->d_name);
		if (stat(path, &st) == 0 && st.st_ino == me.st_ino && st.st_dev == me.st_dev)
			found = true;
	}
	closedir(d);
	return found;
}

#endif
