// SPDX-License-Identifier: MIT
/* sluice probe: the containment checks, what a runtime must keep from the code
 * it runs besides the network.
 *
 * Theory of operation: a sandbox whose network is sound still hands its code
 * the host when the code runs as root in the host's namespaces: it reads
 * every process's environment, talks to sluice's control socket, enters
 * another sandbox's network namespace with setns(2), reads secret files.
 * These checks look from inside, with what any process has (procfs, a
 * connect(2), opendir(2), open(2)); none of them writes or changes
 * anything. Each one passes when the thing cannot be seen or reached, fails
 * when it can, and skips when it cannot tell.
 *
 * Two namespaces have fixed inode numbers on every kernel since 3.8
 * (include/linux/proc_ns.h): the initial user namespace and the initial PID
 * namespace. A process can tell it runs in them from its own /proc/self/ns
 * links, without seeing anything else; /proc/self/uid_map's identity map
 * of every ID ("0 0 4294967295") says the same for the user namespace when
 * the link cannot be read.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "probe/probe_internal.h"

#define ADD probe_res_add

#define PROC_USER_INIT_INO 0xEFFFFFFDULL
#define PROC_PID_INIT_INO 0xEFFFFFFCULL

/* /proc entries looked at: a bound, so that a host with a huge process
 * table cannot make the check outlive its deadline. */
#define PROC_SCAN_MAX 65536
/* Processes, namespaces and files named in a detail line. */
#define NAMED_MAX 4

/* Append to a bounded list text, ", " between items. */
static void append(char *buf, size_t n, const char *item)
{
	size_t len = strlen(buf);

	if (len + 1 >= n)
		return;
	probe_bfmt(buf + len, n - len, "%s%s", len ? ", " : "", item);
}

/* ---- pure parsers (unit-tested) ---------------------------------------------
 */

static int parse_u32(const char **p, uint32_t *v)
{
	unsigned long long x = 0;
	const char *s = *p;

	while (*s == ' ' || *s == '\t')
		s++;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	while (*s >= '0' && *s <= '9') {
		x = x * 10 + (unsigned long long)(*s - '0');
		if (x > 0xffffffffULL)
			return -EINVAL;
		s++;
	}
	*v = (uint32_t)x;
	*p = s;
	return 0;
}

/**
 * probe_idmap_parse() - parse the text of /proc/PID/uid_map or gid_map.
 * @text: lines of "INSIDE OUTSIDE COUNT", each number padded with blanks
 * @m: the result; an empty text is a namespace with no mapping (n 0)
 *
 * Return: 0, or -EINVAL when a line is not three numbers or a count is 0.
 */
int probe_idmap_parse(const char *text, struct probe_idmap *m)
{
	const char *p = text;

	memset(m, 0, sizeof(*m));
	while (*p) {
		uint32_t v[3];
		int i;

		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\n') {
			p++;
			continue;
		}
		if (!*p)
			break;
		for (i = 0; i < 3; i++)
			if (parse_u32(&p, &v[i]) < 0)
				return -EINVAL;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p && *p != '\n')
			return -EINVAL;
		if (v[2] == 0)
			return -EINVAL;
		if (m->n < PROBE_IDMAP_MAX) {
			m->e[m->n].inside = v[0];
			m->e[m->n].outside = v[1];
			m->e[m->n].count = v[2];
			m->n++;
		} else {
			m->more = true;
		}
	}
	return 0;
}

/**
 * probe_idmap_is_initial() - is @m the map of the initial user namespace?
 * @m: a parsed uid_map
 *
 * The initial namespace maps every ID to itself in one line; a namespace
 * made by a runtime maps a range, or a single ID.
 *
 * Return: true for exactly "0 0 4294967295".
 */
bool probe_idmap_is_initial(const struct probe_idmap *m)
{
	return m->n == 1 && !m->more && m->e[0].inside == 0 && m->e[0].outside == 0 &&
	       m->e[0].count == 4294967295U;
}

/**
 * probe_idmap_outside() - the ID in the parent namespace of an ID inside.
 * @m: a parsed map
 * @inside: the ID here
 * @outside: the result
 *
 * Return: 0, or -ENOENT when @inside is not mapped (among the lines kept).
 */
int probe_idmap_outside(const struct probe_idmap *m, uint32_t inside, uint32_t *outside)
{
	for (int i = 0; i < m->n; i++) {
		uint64_t off = (uint64_t)inside - m->e[i].inside;

		if (inside >= m->e[i].inside && off < m->e[i].count) {
			*outside = (uint32_t)(m->e[i].outside + off);
			return 0;
		}
	}
	return -ENOENT;
}

/**
 * probe_ns_inode() - the inode of a namespace link's text.
 * @link: what readlink(2) of /proc/PID/ns/TYPE gives: "TYPE:[INODE]"
 * @type: the expected type ("user", "pid", ...)
 * @ino: the inode
 *
 * Return: 0, or -EINVAL when @link is not of that form.
 */
int probe_ns_inode(const char *link, const char *type, unsigned long long *ino)
{
	size_t tl = strlen(type);
	const char *p;
	char *end;

	if (strncmp(link, type, tl) || strncmp(link + tl, ":[", 2))
		return -EINVAL;
	p = link + tl + 2;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	errno = 0;
	*ino = strtoull(p, &end, 10);
	if (errno || strcmp(end, "]"))
		return -EINVAL;
	return 0;
}

/**
 * probe_status_field() - one field of /proc/PID/status.
 * @status: the file's text
 * @name: the field's name, without its colon ("NSpid", "CapEff")
 * @buf: its value, leading blanks dropped, up to the line's end
 * @n: @buf's size
 *
 * Return: 0, or -ENOENT when there is no such line.
 */
int probe_status_field(const char *status, const char *name, char *buf, size_t n)
{
	size_t nl = strlen(name);
	const char *p = status;

	while (p && *p) {
		if (!strncmp(p, name, nl) && p[nl] == ':') {
			size_t len;

			p += nl + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			len = strcspn(p, "\n");
			if (len >= n)
				len = n ? n - 1 : 0;
			if (n) {
				memcpy(buf, p, len);
				buf[len] = '\0';
			}
			return 0;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -ENOENT;
}

/**
 * probe_status_ppid() - the parent's PID from the text of /proc/PID/stat.
 * @stat: "PID (COMM) STATE PPID ..."; COMM may hold spaces and ')'
 * @ppid: the result
 *
 * Return: 0 or -EINVAL.
 */
int probe_status_ppid(const char *stat, int *ppid)
{
	const char *p = strrchr(stat, ')');
	char *end;
	long v;

	if (!p || p[1] != ' ' || !p[2] || p[3] != ' ')
		return -EINVAL;
	p += 4;
	errno = 0;
	v = strtol(p, &end, 10);
	if (errno || end == p || v < 0 || v > 0x7fffffff)
		return -EINVAL;
	*ppid = (int)v;
	return 0;
}

static const char *const cap_name[] = {
	[0] = "CAP_CHOWN",
	[1] = "CAP_DAC_OVERRIDE",
	[2] = "CAP_DAC_READ_SEARCH",
	[3] = "CAP_FOWNER",
	[4] = "CAP_FSETID",
	[5] = "CAP_KILL",
	[6] = "CAP_SETGID",
	[7] = "CAP_SETUID",
	[8] = "CAP_SETPCAP",
	[9] = "CAP_LINUX_IMMUTABLE",
	[10] = "CAP_NET_BIND_SERVICE",
	[11] = "CAP_NET_BROADCAST",
	[12] = "CAP_NET_ADMIN",
	[13] = "CAP_NET_RAW",
	[14] = "CAP_IPC_LOCK",
	[15] = "CAP_IPC_OWNER",
	[16] = "CAP_SYS_MODULE",
	[17] = "CAP_SYS_RAWIO",
	[18] = "CAP_SYS_CHROOT",
	[19] = "CAP_SYS_PTRACE",
	[20] = "CAP_SYS_PACCT",
	[21] = "CAP_SYS_ADMIN",
	[22] = "CAP_SYS_BOOT",
	[23] = "CAP_SYS_NICE",
	[24] = "CAP_SYS_RESOURCE",
	[25] = "CAP_SYS_TIME",
	[26] = "CAP_SYS_TTY_CONFIG",
	[27] = "CAP_MKNOD",
	[28] = "CAP_LEASE",
	[29] = "CAP_AUDIT_WRITE",
	[30] = "CAP_AUDIT_CONTROL",
	[31] = "CAP_SETFCAP",
	[32] = "CAP_MAC_OVERRIDE",
	[33] = "CAP_MAC_ADMIN",
	[34] = "CAP_SYSLOG",
	[35] = "CAP_WAKE_ALARM",
	[36] = "CAP_BLOCK_SUSPEND",
	[37] = "CAP_AUDIT_READ",
	[38] = "CAP_PERFMON",
	[39] = "CAP_BPF",
	[40] = "CAP_CHECKPOINT_RESTORE",
};
_Static_assert(sizeof(cap_name) / sizeof(cap_name[0]) == 41,
	       "one name per capability up to CAP_CHECKPOINT_RESTORE");

/* Those that reach furthest out of a sandbox, named first so that a cut
 * detail line still shows them. */
static const int cap_first[] = { 21, 12, 19, 1, 2, 16, 17, 7, 6, 13, 39, 38 };

/**
 * probe_cap_names() - the names of the capabilities in a set, the ones that
 * reach furthest first (CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_SYS_PTRACE, ...),
 * then the others by number; "capN" for a bit without a name here.
 * @caps: the set (bit N: capability N)
 * @buf: out, ", " between names, cut at @n; "" for an empty set
 * @n: its size
 */
void probe_cap_names(uint64_t caps, char *buf, size_t n)
{
	size_t i;
	int b;

	if (!n)
		return;
	buf[0] = '\0';
	for (i = 0; i < sizeof(cap_first) / sizeof(cap_first[0]); i++)
		if (caps & (1ULL << cap_first[i]))
			append(buf, n, cap_name[cap_first[i]]);
	for (b = 0; b < 64; b++) {
		bool named_first = false;
		char other[16];

		if (!(caps & (1ULL << b)))
			continue;
		for (i = 0; i < sizeof(cap_first) / sizeof(cap_first[0]); i++)
			named_first |= cap_first[i] == b;
		if (named_first)
			continue;
		if (b < (int)(sizeof(cap_name) / sizeof(cap_name[0])))
			append(buf, n, cap_name[b]);
		else {
			probe_bfmt(other, sizeof(other), "cap%d", b);
			append(buf, n, other);
		}
	}
}

/* ---- reading /proc ----------------------------------------------------------
 */

/* A small file's text, NUL-terminated. Return: its length or -errno. */
static ssize_t read_text(const char *path, char *buf, size_t n)
{
	ssize_t got, len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	/* Empty, not garbage, for a caller that tests only for >= 0. */
	buf[0] = '\0';
	if (fd < 0)
		return -errno;
	while ((size_t)len + 1 < n && (got = read(fd, buf + len, n - 1 - (size_t)len)) > 0)
		len += got;
	close(fd);
	buf[len] = '\0';
	return len;
}

/* readlink(2) NUL-terminated. Return: 0 or -errno. */
static int read_link(const char *path, char *buf, size_t n)
{
	ssize_t k = readlink(path, buf, n - 1);

	if (k < 0)
		return -errno;
	buf[k] = '\0';
	return 0;
}

static void comm_of(int pid, char *buf, size_t n)
{
	char path[64], raw[64];
	ssize_t k;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	k = read_text(path, raw, sizeof(raw));
	if (k <= 0)
		probe_bfmt(buf, n, "?");
	else
		probe_sanitize(buf, n, raw, (size_t)k);
}

/* What the probe knows of its own PID namespace. */
struct pidns_view {
	bool have_own;
	char own[64];	     /* "pid:[INODE]" */
	bool initial;	     /* the host's PID namespace */
	bool proc_of_parent; /* /proc belongs to an ancestor PID namespace */
};

static void pidns_view(struct pidns_view *v)
{
	char status[4096], nspid[128];
	unsigned long long ino;

	memset(v, 0, sizeof(*v));
	if (read_link("/proc/self/ns/pid", v->own, sizeof(v->own)) == 0) {
		v->have_own = true;
		v->initial = probe_ns_inode(v->own, "pid", &ino) == 0 && ino == PROC_PID_INIT_INO;
	}
	/* NSpid holds one PID per level from /proc's namespace down to the
	 * process's: more than one, and /proc shows a parent's processes. */
	if (read_text("/proc/self/status", status, sizeof(status)) > 0 &&
	    probe_status_field(status, "NSpid", nspid, sizeof(nspid)) == 0)
		v->proc_of_parent = strpbrk(nspid, " \t") != NULL;
}

enum seen {
	SEEN_NOT,     /* not listed, or gone */
	SEEN_OWN,     /* in the probe's own PID namespace, not the host's */
	SEEN_OUTSIDE, /* outside it, or in the host's */
};

static enum seen pid_seen(const struct pidns_view *v, int pid)
{
	char path[64], link[64];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
	r = read_link(path, link, sizeof(link));
	if (r == -ENOENT || r == -ESRCH) {
		snprintf(path, sizeof(path), "/proc/%d", pid);
		if (access(path, F_OK) < 0)
			return SEEN_NOT;
	}
	if (v->initial || v->proc_of_parent)
		return SEEN_OUTSIDE;
	if (r == 0 && v->have_own)
		return strcmp(link, v->own) ? SEEN_OUTSIDE : SEEN_OWN;
	/* The link cannot be read (ptrace rules): a process of another user
	 * in a /proc of its own namespace is still one of its own. */
	return SEEN_OWN;
}

static bool numeric(const char *s, int *v)
{
	long x = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || x > 0x7fffffff / 10)
			return false;
		x = x * 10 + (*s - '0');
	}
	*v = (int)x;
	return x > 0;
}

/* ---- the checks -------------------------------------------------------------
 */

void probe_c_host_processes(const struct probe_ctx *ctx, struct probe_result *r)
{
	int me = getpid(), parent = getppid(), broker = ctx->o->broker_pid;
	int n_listed = 0, n_out = 0, n_named = 0, looked = 0;
	char named[400] = "", sluiced[200] = "";
	struct pidns_view v;
	struct dirent *de;
	DIR *d;

	pidns_view(&v);
	d = opendir("/proc");
	if (!d) {
		ADD(r, PROBE_PASS,
		    "/proc cannot be listed (%s): no process is "
		    "visible",
		    strerror(errno));
	} else {
		while ((de = readdir(d)) && looked++ < PROC_SCAN_MAX) {
			char path[64], stat[512], item[96], comm[32];
			int pid, ppid = -1;

			if (!numeric(de->d_name, &pid) || pid == me)
				continue;
			/* The probe itself: its main process and the other
			 * checks running beside this one. */
			snprintf(path, sizeof(path), "/proc/%d/stat", pid);
			if (read_text(path, stat, sizeof(stat)) > 0)
				probe_status_ppid(stat, &ppid);
			if (pid == parent || ppid == parent)
				continue;
			n_listed++;
			if (pid_seen(&v, pid) != SEEN_OUTSIDE)
				continue;
			n_out++;
			comm_of(pid, comm, sizeof(comm));
			probe_bfmt(item, sizeof(item), "%d `%s`", pid, comm);
			if (!strcmp(comm, "sluiced"))
				append(sluiced, sizeof(sluiced), item);
			else if (n_named++ < NAMED_MAX)
				append(named, sizeof(named), item);
		}
		closedir(d);
		if (n_out)
			ADD(r, PROBE_FAIL,
			    "%d processes outside its own PID namespace are "
			    "visible (%s)%s%s%s%s",
			    n_out,
			    v.initial	       ? "it runs in the host's PID namespace"
			    : v.proc_of_parent ? "/proc belongs to a parent PID namespace"
					       : "their ns/pid differs from its own",
			    sluiced[0] ? "; sluiced: " : "", sluiced,
			    named[0] ? "; among them " : "", named);
		else
			ADD(r, PROBE_PASS,
			    "%d other process%s listed, all in its own PID "
			    "namespace (%s)",
			    n_listed, n_listed == 1 ? "" : "es",
			    v.have_own ? v.own : "ns/pid unreadable");
	}
	if (broker) {
		enum seen s = pid_seen(&v, broker);
		char comm[32];

		comm_of(broker, comm, sizeof(comm));
		if (s == SEEN_OUTSIDE)
			ADD(r, PROBE_FAIL,
			    "the broker's pid %d (--broker-pid) is visible: "
			    "`%s`",
			    broker, comm);
		else if (s == SEEN_OWN)
			ADD(r, PROBE_PASS,
			    "pid %d here is a process of its own PID namespace "
			    "(`%s`), not the broker",
			    broker, comm);
		else
			ADD(r, PROBE_PASS, "pid %d (--broker-pid) is not visible", broker);
	}
}

/* Connect to one control socket; never a request that changes anything. */
static void try_control(const struct probe_ctx *ctx, struct probe_result *r, const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	static const char req[] = "status\n"; /* read-only */
	char buf[256], line[120];
	struct pollfd pfd;
	ssize_t got = 0;
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path))
		return ADD(r, PROBE_SKIP, "%s: path too long for a socket", path);
	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return ADD(r, PROBE_SKIP, "%s: cannot make a socket: %s", path, strerror(errno));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		int e = errno;

		close(fd);
		if (e == EAGAIN) /* listening, its backlog full */
			return ADD(r, PROBE_FAIL,
				   "%s: a listening socket is there (its "
				   "backlog is full): reachable",
				   path);
		return ADD(r, PROBE_PASS, "%s: cannot connect (%s)", path, strerror(e));
	}
	if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(req) - 1) {
		pfd.fd = fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, ctx->o->timeout_ms) > 0)
			got = recv(fd, buf, sizeof(buf), 0);
	}
	close(fd);
	if (got > 0) {
		probe_sanitize(line, sizeof(line), buf, (size_t)got);
		if (!strncmp(line, "error:", 6))
			ADD(r, PROBE_FAIL,
			    "%s: connected; the broker refused a read-only "
			    "`status` (`%s`), but the control socket is "
			    "reachable",
			    path, line);
		else
			ADD(r, PROBE_FAIL,
			    "%s: connected, and a read-only `status` was "
			    "answered (`%s`): sluice's control plane is "
			    "reachable",
			    path, line);
	} else {
		ADD(r, PROBE_FAIL,
		    "%s: connected (no answer to a read-only `status`): the "
		    "socket is reachable",
		    path);
	}
}

void probe_c_control_socket(const struct probe_ctx *ctx, struct probe_result *r)
{
	try_control(ctx, r, PROBE_CONTROL_SOCKET);
	for (int i = 0; i < ctx->o->n_control_sockets; i++)
		if (strcmp(ctx->o->control_sockets[i], PROBE_CONTROL_SOCKET))
			try_control(ctx, r, ctx->o->control_sockets[i]);
}

/* List @dir's entries: the count, the first names, and whether one of them
 * (@leaf under it, or itself when @leaf is NULL) can be opened. */
static int list_dir(const char *dir, const char *leaf, char *names, size_t n, char *opened,
		    size_t on)
{
	struct dirent *de;
	int count = 0, looked = 0;
	DIR *d = opendir(dir);

	names[0] = opened[0] = '\0';
	if (!d)
		return -errno;
	while ((de = readdir(d)) && looked++ < PROC_SCAN_MAX) {
		char path[PROBE_PATH_MAX], item[80];
		int fd;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (count++ >= NAMED_MAX)
			continue;
		probe_sanitize(item, sizeof(item), de->d_name, strlen(de->d_name));
		append(names, n, item);
		if (opened[0])
			continue;
		probe_bfmt(path, sizeof(path), "%s/%s%s%s", dir, de->d_name, leaf ? "/" : "",
			   leaf ? leaf : "");
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (fd >= 0) {
			close(fd);
			probe_bfmt(opened, on, "%s", path);
		}
	}
	closedir(d);
	return count;
}

void probe_c_netns_run(const struct probe_ctx *ctx, struct probe_result *r)
{
	char names[300], opened[PROBE_PATH_MAX];
	int k = list_dir("/run/netns", NULL, names, sizeof(names), opened, sizeof(opened));

	(void)ctx;
	if (k < 0)
		ADD(r, PROBE_PASS, "/run/netns cannot be listed (%s)", strerror(-k));
	else if (k == 0)
		ADD(r, PROBE_PASS, "/run/netns is there, and empty");
	else
		ADD(r, PROBE_FAIL, "/run/netns lists %d network namespaces (%s)%s%s%s", k, names,
		    opened[0] ? "; " : "", opened,
		    opened[0] ? " can be opened, a setns(2) away with "
				"CAP_SYS_ADMIN"
			      : "");
}

void probe_c_netns_etc(const struct probe_ctx *ctx, struct probe_result *r)
{
	char names[300], opened[PROBE_PATH_MAX];
	int k = list_dir("/etc/netns", "resolv.conf", names, sizeof(names), opened, sizeof(opened));

	(void)ctx;
	if (k < 0)
		ADD(r, PROBE_PASS, "/etc/netns cannot be listed (%s)", strerror(-k));
	else if (k == 0)
		ADD(r, PROBE_PASS, "/etc/netns is there, and empty");
	else
		ADD(r, PROBE_FAIL,
		    "/etc/netns lists the settings of %d network namespaces "
		    "(%s)%s%s%s",
		    k, names, opened[0] ? "; " : "", opened, opened[0] ? " can be read" : "");
}

/* The effective set, from capget(2) (no /proc needed), else /proc. */
static int effective_caps(uint64_t *eff)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];
	char status[4096], hex[32];
	char *end;

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &h, data) == 0) {
		*eff = (uint64_t)data[1].effective << 32 | data[0].effective;
		return 0;
	}
	if (read_text("/proc/self/status", status, sizeof(status)) <= 0 ||
	    probe_status_field(status, "CapEff", hex, sizeof(hex)) < 0)
		return -ENOENT;
	errno = 0;
	*eff = strtoull(hex, &end, 16);
	return errno || end == hex ? -EINVAL : 0;
}

void probe_c_caps_init_userns(const struct probe_ctx *ctx, struct probe_result *r)
{
	char map_text[2048], map[64] = "", link[64] = "", names[700];
	struct probe_idmap m;
	unsigned long long ino;
	bool have_map = false, have_link, initial = false;
	uint32_t root_out;
	uint64_t eff;
	int n = 0;

	(void)ctx;
	if (effective_caps(&eff) < 0)
		return ADD(r, PROBE_SKIP,
			   "cannot read its capabilities (capget(2) and "
			   "/proc/self/status failed)");
	have_link = read_link("/proc/self/ns/user", link, sizeof(link)) == 0;
	if (have_link && probe_ns_inode(link, "user", &ino) == 0)
		initial = ino == PROC_USER_INIT_INO;
	if (read_text("/proc/self/uid_map", map_text, sizeof(map_text)) >= 0 &&
	    probe_idmap_parse(map_text, &m) == 0) {
		have_map = true;
		initial |= probe_idmap_is_initial(&m);
		if (m.n)
			probe_bfmt(map, sizeof(map), "%u %u %u%s", m.e[0].inside, m.e[0].outside,
				   m.e[0].count, m.n > 1 || m.more ? " ..." : "");
	}
	for (int b = 0; b < 64; b++)
		n += (eff >> b) & 1;
	probe_cap_names(eff, names, sizeof(names));
	if (!eff)
		return ADD(r, PROBE_PASS, "no effective capability (uid_map `%s`, %s)",
			   have_map ? map : "unreadable", have_link ? link : "ns/user unreadable");
	if (!have_map && !have_link)
		return ADD(r, PROBE_SKIP,
			   "%d effective capabilities, and its user namespace "
			   "cannot be told (no /proc/self/uid_map, no "
			   "/proc/self/ns/user)",
			   n);
	if (initial)
		return ADD(r, PROBE_FAIL,
			   "%d effective capabilities (CapEff %016llx) in the "
			   "initial user namespace (uid_map `%s`, %s): they "
			   "reach the host; %s",
			   n, (unsigned long long)eff, have_map ? map : "unreadable",
			   have_link ? link : "ns/user unreadable", names);
	/* Capabilities over its own user namespace only reach what that
	 * namespace owns; but root mapped to root outside still owns the
	 * root-owned files it can see, which is worth saying. */
	ADD(r, PROBE_PASS,
	    "%d effective capabilities, over its own user namespace only "
	    "(uid_map `%s`, %s)%s",
	    n, have_map ? map : "unreadable", have_link ? link : "ns/user unreadable",
	    have_map && probe_idmap_outside(&m, 0, &root_out) == 0 && root_out == 0
		    ? "; note: uid 0 here is uid 0 outside, owner of every "
		      "root-owned file it can see"
		    : "");
}

void probe_c_secret_files(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_opts *o = ctx->o;

	if (!o->n_secret_files)
		return ADD(r, PROBE_SKIP, "no --secret-file given");
	for (int i = 0; i < o->n_secret_files; i++) {
		const char *path = o->secret_files[i];
		/* Opened, never read: the probe must not print, or even hold,
		 * what it finds. */
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		struct stat st;

		if (fd < 0) {
			ADD(r, PROBE_PASS, "%s: cannot open (%s)", path, strerror(errno));
			continue;
		}
		if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
			ADD(r, PROBE_FAIL, "%s: a directory it can list", path);
		else
			ADD(r, PROBE_FAIL,
			    "%s can be opened for reading (%lld bytes; not "
			    "read)",
			    path, fstat(fd, &st) == 0 ? (long long)st.st_size : -1LL);
		close(fd);
	}
}

/*
 * vsock is not network namespaced: on a virtual machine with a vsock
 * transport (Firecracker, QEMU's vhost-vsock, Kata, Hyper-V) a socket of
 * it reaches the hypervisor's host (CID 2) and its services without
 * passing the sandbox's veth or the broker. Only making the socket is
 * tried: nothing is connected or sent.
 */
void probe_c_vsock(const struct probe_ctx *ctx, struct probe_result *r)
{
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	(void)ctx;
	if (fd < 0)
		return ADD(r, PROBE_PASS, "socket(AF_VSOCK) is refused (%s)", strerror(errno));
	close(fd);
	ADD(r, PROBE_FAIL,
	    "an AF_VSOCK socket can be made: no network namespace confines vsock, and on a "
	    "virtual machine with a vsock transport it reaches the host past the broker "
	    "(nothing was connected)");
}
