// SPDX-License-Identifier: MIT
/* The sandbox record: names, the paths a sandbox owns, its state file
 * (NETNS_STATE_DIR/NAME/sandbox, written at create time and read by exec,
 * env and delete), and the environment a sandbox's programs get. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/ctlproto.h"
#include "common/err.h"
#include "common/file.h"
#include "common/sumfile.h"
#include "common/text.h"
#include "netns/netns.h"
#include "netns/netns_internal.h"

/* The record is small; anything longer is not ours. */
#define STATE_MAX 4096
#define STATE_KIND "sandbox"

bool netns_name_ok(const char *name)
{
	return text_name_ok(name, strlen(name), NETNS_NAME_MAX);
}

void netns_link_name(uint32_t addr, char out[NETNS_IFNAMSIZ])
{
	snprintf(out, NETNS_IFNAMSIZ, NETNS_LINK_PREFIX "%08x", addr);
}

/**
 * netns_self_ns_id() - identity of the network namespace this thread is in
 * @dev: device of its nsfs inode
 * @ino: its inode number
 *
 * Return: 0 or a negative errno.
 */
int netns_self_ns_id(uint64_t *dev, uint64_t *ino)
{
	struct stat st;

	if (stat("/proc/thread-self/ns/net", &st) < 0)
		return -errno;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

/**
 * netns_path() - DIR/NAME or DIR/NAME/FILE
 * @buf:  output
 * @len:  its size
 * @dir:  NETNS_RUN_DIR, NETNS_ETC_DIR or NETNS_STATE_DIR
 * @name: a sandbox name that passed netns_name_ok()
 * @file: a file in that directory, or NULL
 *
 * Return: 0, or -ENAMETOOLONG.
 */
int netns_path(char *buf, size_t len, const char *dir, const char *name, const char *file)
{
	int n = file ? snprintf(buf, len, "%s/%s/%s", dir, name, file)
		     : snprintf(buf, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Writes all of @data to @fd. Return: 0, or -1 with errno set. */
static int write_all(int fd, const char *data, size_t len)
{
	while (len) {
		ssize_t k = write(fd, data, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		data += k;
		len -= (size_t)k;
	}
	return 0;
}

/* Copies @len bytes of @in to @out: in the kernel (copy_file_range())
 * where it can, through a buffer where it cannot (another file system, an
 * older kernel). Return: 0 or a negative errno; -EIO when @in is shorter. */
static int copy_fd(int in, int out, size_t len)
{
	static char buf[64 << 10];
	bool in_kernel = true;
	off_t off = 0;

	while ((size_t)off < len) {
		size_t want = len - (size_t)off;
		ssize_t k;

		if (in_kernel) {
			k = copy_file_range(in, &off, out, NULL, want, 0);
			if (k < 0 &&
			    (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
			     errno == EOPNOTSUPP) &&
			    off == 0) {
				in_kernel = false;
				continue;
			}
		} else {
			k = pread(in, buf, want < sizeof(buf) ? want : sizeof(buf), off);
			if (k > 0 && write_all(out, buf, (size_t)k) < 0)
				return -errno;
			if (k > 0)
				off += k;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return -EIO;
	}
	return 0;
}

/**
 * netns_bundle_begin() - the first part of a trust bundle: a file's
 *                        certificates, copied into @to's temporary file
 * @from:    the system's bundle; a missing one counts as empty
 * @to:      destination (netns_bundle_end() puts it there)
 * @max:     the largest @from accepted
 * @missing: set when @from does not exist
 *
 * The system's part is copied by the kernel (copy_file_range()), not read
 * into and written out of this process: for a bundle of a few hundred
 * kilobytes that is about 50 us instead of 2 ms, a large part of a create.
 * A create copies it while the broker makes the sandbox's CA, whose
 * certificate netns_bundle_end() appends.
 *
 * Return: the temporary file's descriptor, for netns_bundle_end(); -EFBIG;
 * another negative errno (no temporary file is left).
 */
int netns_bundle_begin(const char *from, const char *to, size_t max, bool *missing)
{
	size_t len = 0;
	char tmp[512], last = '\n';
	struct stat st;
	int in, out, r = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", to) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	in = open(from, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	*missing = in < 0 && errno == ENOENT;
	if (in < 0 && !*missing)
		return -errno;
	if (in >= 0) {
		if (fstat(in, &st) < 0)
			r = -errno;
		else if (!S_ISREG(st.st_mode))
			r = -EINVAL;
		else if ((uint64_t)st.st_size > max)
			r = -EFBIG;
		/* What fstat promised, no more: a file that grows meanwhile is cut. */
		len = r == 0 ? (size_t)st.st_size : 0;
		errno = 0;
		if (len && pread(in, &last, 1, (off_t)len - 1) != 1)
			r = errno ? -errno : -EIO;
		if (r < 0) {
			close(in);
			return r;
		}
	}
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (out < 0) {
		r = -errno;
		if (in >= 0)
			close(in);
		return r;
	}
	if (len)
		r = copy_fd(in, out, len);
	if (r == 0 && last != '\n' && write_all(out, "\n", 1) < 0)
		r = -errno;
	if (in >= 0)
		close(in);
	if (r < 0) {
		close(out);
		unlink(tmp);
		return r;
	}
	return out;
}

/**
 * netns_bundle_end() - the rest of a trust bundle, and the bundle in place
 * @out:   from netns_bundle_begin() for @to; closed here
 * @extra: PEM text to append (the sandbox's CA)
 * @to:    destination, written atomically, mode 0644
 *
 * Return: 0, or a negative errno (no temporary file is left).
 */
int netns_bundle_end(int out, const char *extra, const char *to)
{
	char tmp[512];
	int r = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", to) >= (int)sizeof(tmp)) {
		close(out);
		return -ENAMETOOLONG;
	}
	if (write_all(out, extra, strlen(extra)) < 0)
		r = -errno;
	if (r == 0 && fchmod(out, 0644) < 0)
		r = -errno;
	if (close(out) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, to) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

/**
 * netns_write_bundle() - a trust bundle: a file's certificates, then more
 * @from:   the system's bundle; a missing one counts as empty
 * @extra:  PEM text to append (the sandbox's CA)
 * @to:     destination, written atomically, mode 0644
 * @max:    the largest @from accepted
 * @missing: set when @from does not exist
 *
 * netns_bundle_begin(), then netns_bundle_end().
 *
 * Return: 0, -EFBIG, or another negative errno.
 */
int netns_write_bundle(const char *from, const char *extra, const char *to, size_t max,
		       bool *missing)
{
	int out = netns_bundle_begin(from, to, max, missing);

	return out < 0 ? out : netns_bundle_end(out, extra, to);
}

int netns_state_write(const struct netns_sandbox *sb)
{
	char path[512], a[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN], *buf = NULL;
	struct in_addr ia = { .s_addr = htonl(sb->addr) }, ig = { .s_addr = htonl(sb->gw) };
	struct sumfile_writer w;
	size_t n = 0;
	FILE *f;
	int r;

	r = netns_path(path, sizeof(path), NETNS_STATE_DIR, sb->name, "sandbox");
	if (r < 0)
		return r;
	inet_ntop(AF_INET, &ia, a, sizeof(a));
	inet_ntop(AF_INET, &ig, g, sizeof(g));
	f = open_memstream(&buf, &n);
	if (!f)
		return -ENOMEM;
	/* Checked lines (common/sumfile.h): a torn or damaged record is told
	 * from a good one when it is read. */
	sumfile_begin(&w, f, STATE_KIND);
	sumfile_line(&w, "name %s", sb->name);
	sumfile_line(&w, "address %s", a);
	sumfile_line(&w, "gateway %s", g);
	sumfile_line(&w, "link %s", sb->link);
	sumfile_line(&w, "proxy_port %u", sb->ports.proxy);
	sumfile_line(&w, "transparent_port %u", sb->ports.transparent);
	sumfile_line(&w, "dns_port %u", sb->ports.dns);
	sumfile_line(&w, "broker_netns %llu:%llu", (unsigned long long)sb->broker_ns_dev,
		     (unsigned long long)sb->broker_ns_ino);
	sumfile_line(&w, "socket %s", sb->socket);
	sumfile_line(&w, "ifname %s", sb->ifname[0] ? sb->ifname : NETNS_SANDBOX_IF);
	sumfile_line(&w, "attached %s", sb->attached ? "yes" : "no");
	sumfile_line(&w, "ns_named %s", sb->ns_named ? "yes" : "no");
	r = sumfile_end(&w);
	if (fclose(f) != 0 && r == 0)
		r = -ENOMEM;
	if (r == 0 && n > STATE_MAX)
		r = -ENAMETOOLONG;
	if (r == 0)
		r = file_write_atomic(path, buf, n, 0644);
	free(buf);
	return r;
}

static int parse_port(const char *v, uint16_t *out)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || *end || end == v || x == 0 || x > 65535 || v[0] == '-' || v[0] == '+')
		return -EINVAL;
	*out = (uint16_t)x;
	return 0;
}

static int parse_v4(const char *v, uint32_t *out)
{
	struct in_addr ia;

	if (inet_pton(AF_INET, v, &ia) != 1)
		return -EINVAL;
	*out = ntohl(ia.s_addr);
	return 0;
}

/* One "key value" line of the record into @sb; -EINVAL for anything else. */
static int state_line(struct netns_sandbox *sb, const char *key, const char *v, unsigned *seen)
{
	unsigned long long dev, ino;
	const char *p;

	if (!strcmp(key, "name")) {
		if (strcmp(v, sb->name))
			return -EINVAL;
		*seen |= 1;
	} else if (!strcmp(key, "address")) {
		if (parse_v4(v, &sb->addr) < 0)
			return -EINVAL;
		*seen |= 2;
	} else if (!strcmp(key, "gateway")) {
		if (parse_v4(v, &sb->gw) < 0)
			return -EINVAL;
		*seen |= 4;
	} else if (!strcmp(key, "link")) {
		if (strncmp(v, NETNS_LINK_PREFIX, 3) || !text_copy(sb->link, sizeof(sb->link), v))
			return -EINVAL;
		*seen |= 8;
	} else if (!strcmp(key, "proxy_port")) {
		if (parse_port(v, &sb->ports.proxy) < 0)
			return -EINVAL;
		*seen |= 16;
	} else if (!strcmp(key, "transparent_port")) {
		if (parse_port(v, &sb->ports.transparent) < 0)
			return -EINVAL;
		*seen |= 32;
	} else if (!strcmp(key, "dns_port")) {
		if (parse_port(v, &sb->ports.dns) < 0)
			return -EINVAL;
		*seen |= 64;
	} else if (!strcmp(key, "broker_netns")) {
		if (!text_ull(v, 10, &p, &dev) || *p != ':' || !text_ull(p + 1, 10, &p, &ino) || *p)
			return -EINVAL;
		sb->broker_ns_dev = dev;
		sb->broker_ns_ino = ino;
		*seen |= 128;
	} else if (!strcmp(key, "socket")) {
		if (!text_copy(sb->socket, sizeof(sb->socket), v))
			return -EINVAL;
	} else if (!strcmp(key, "ifname")) {
		/* The three below are optional: a record from before attach
		 * is a created sandbox's, with eth0, named by sluice. */
		if (!netns_ifname_ok(v) || !text_copy(sb->ifname, sizeof(sb->ifname), v))
			return -EINVAL;
	} else if (!strcmp(key, "attached") || !strcmp(key, "ns_named")) {
		bool *b = key[0] == 'a' ? &sb->attached : &sb->ns_named;

		if (strcmp(v, "yes") && strcmp(v, "no"))
			return -EINVAL;
		*b = !strcmp(v, "yes");
	} else {
		return -EINVAL;
	}
	return 0;
}

struct framed {
	struct netns_sandbox *sb;
	unsigned seen;
	unsigned bad; /* lines that verified but did not parse */
	bool socket;
};

static int framed_line(const char *s, size_t len, bool ok, void *arg)
{
	struct framed *fr = arg;
	char line[700], *sp;

	if (!ok)
		return 0;
	if (len >= sizeof(line)) {
		fr->bad++;
		return 0;
	}
	memcpy(line, s, len);
	line[len] = '\0';
	sp = strchr(line, ' ');
	if (!sp || state_line(fr->sb, (*sp = '\0', line), sp + 1, &fr->seen) < 0)
		fr->bad++;
	else if (!strcmp(line, "socket"))
		fr->socket = true;
	return 0;
}

static int read_legacy(const char *path, char *buf, size_t n, struct netns_sandbox *sb,
		       struct sl_err *err);

/* The record in the checked format; -ENOMSG when it is not in it. */
static int read_framed(const char *path, const char *buf, size_t n, struct netns_sandbox *sb,
		       struct sl_err *err)
{
	struct framed fr = { .sb = sb };
	struct sumfile_result res;
	bool whole;

	sumfile_parse(buf, n, STATE_KIND, false, framed_line, &fr, &res);
	if (res.status == SUMFILE_LEGACY)
		return -ENOMSG;
	whole = fr.seen == 255 && fr.socket && sb->gw + 1 == sb->addr;
	if (res.status == SUMFILE_OK && !fr.bad && whole)
		return 0;
	if (res.status == SUMFILE_OK && !fr.bad)
		return sl_err_set(err, EINVAL, "`%s` is incomplete", path);
	if (whole) {
		fprintf(stderr,
			"sluice: warning: `%s` is damaged (%u lines lost%s), but every field "
			"it needs verifies: used\n",
			path, res.lost + fr.bad, res.end_missing ? ", and its end" : "");
		return 0;
	}
	return sl_err_set(err, EBADMSG,
			  "`%s` is damaged (%u of its lines do not verify%s) and a field it needs "
			  "is lost: `sluice delete %s` removes what it can; then create it again",
			  path, res.lost + fr.bad, res.end_missing ? ", its end is missing" : "",
			  sb->name);
}

/**
 * netns_state_read() - read a sandbox's record
 * @name:   a valid sandbox name
 * @sb:     filled on success
 * @err:    why not, on a failure other than -ENOENT (NULL: not wanted)
 *
 * A record is checked (common/sumfile.h). One written before checksums
 * is read as it is and written again in the checked format. A damaged one
 * whose every field still verifies is used, with a warning on stderr.
 *
 * Return: 0; -ENOENT when sluice has no record of @name; -EINVAL when the
 * record does not parse; -EBADMSG when it is damaged and a field it needs
 * is lost; another negative errno.
 */
int netns_state_read(const char *name, struct netns_sandbox *sb, struct sl_err *err)
{
	char path[512], buf[STATE_MAX + 1];
	ssize_t n;
	int fd, r;

	memset(sb, 0, sizeof(*sb));
	snprintf(sb->name, sizeof(sb->name), "%s", name);
	snprintf(sb->ifname, sizeof(sb->ifname), "%s", NETNS_SANDBOX_IF);
	sb->ns_named = true;
	r = netns_path(path, sizeof(path), NETNS_STATE_DIR, name, "sandbox");
	if (r < 0)
		return r;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		r = -errno;
		if (r != -ENOENT)
			sl_err_sys(err, r, "cannot read `%s`", path);
		return r;
	}
	n = read(fd, buf, sizeof(buf));
	r = n < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		return sl_err_sys(err, r, "cannot read `%s`", path);
	if (n > STATE_MAX)
		return sl_err_set(err, EINVAL, "`%s` is too long", path);
	buf[n] = '\0';
	r = read_framed(path, buf, (size_t)n, sb, err);
	if (r != -ENOMSG)
		return r;
	/* Written before checksums: read the old way, then again in the
	 * checked format (best effort: a read-only /run changes nothing). */
	r = read_legacy(path, buf, (size_t)n, sb, err);
	if (r == 0)
		netns_state_write(sb);
	return r;
}

/* A record of sluice 0.x: "key value" lines, no checksums. */
static int read_legacy(const char *path, char *buf, size_t n, struct netns_sandbox *sb,
		       struct sl_err *err)
{
	unsigned seen = 0, lineno = 0;
	char *line, *save = NULL;

	if (memchr(buf, '\0', n))
		return sl_err_set(err, EINVAL, "`%s` holds a NUL byte", path);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' ');

		lineno++;
		if (!sp || state_line(sb, (*sp = '\0', line), sp + 1, &seen) < 0)
			return sl_err_set(err, EINVAL, "%s:%u: bad line", path, lineno);
	}
	if (seen != 255 || sb->gw + 1 != sb->addr)
		return sl_err_set(err, EINVAL, "`%s` is incomplete", path);
	return 0;
}

/**
 * netns_note_privileged() - tell the broker of an uncontained run, first
 * @sb:     the sandbox (its broker's control socket)
 * @err:    why not (NULL: not wanted)
 *
 * The broker writes the audit line (reason privileged-exec, with this
 * process's pid and uid from the socket's peer credentials).
 *
 * Return: 0, or a negative errno: then the run must not start.
 */
int netns_note_privileged(const struct netns_sandbox *sb, struct sl_err *err)
{
	const char *saved = netns_socket_path;
	char line[200], *resp;
	int r;

	if (sb->socket[0])
		netns_socket_path = sb->socket;
	snprintf(line, sizeof(line), CTL_PRIVILEGED " %s", sb->name);
	r = netns_ctl(line, &resp);
	netns_socket_path = saved;
	if (r == -EPROTO && resp)
		sl_err_set(err, r, "%s", resp); /* the broker's own words */
	else if (r < 0)
		sl_err_set(err, r, "%s", strerror(-r));
	free(resp);
	return r;
}

/*
 * One variable per credential placeholder, as the broker issued them: the
 * sandbox gets the placeholder, never the secret. Asked of the broker the
 * sandbox was created with. Without an answer there is no environment to
 * give: a broker that is down is no egress at all, and a command started
 * anyway would fail later, at its first connection, for a reason it cannot
 * see; so this says what is wrong, on stderr, and fails.
 */
static int placeholders(const struct netns_sandbox *sb,
			void (*fn)(const char *key, const char *value, void *arg), void *arg)
{
	const char *saved = netns_socket_path;
	char line[200], *resp, *l, *save = NULL;
	int r;

	if (sb->socket[0])
		netns_socket_path = sb->socket;
	snprintf(line, sizeof(line), CTL_PLACEHOLDERS " %s", sb->name);
	r = netns_ctl(line, &resp);
	netns_socket_path = saved;
	if (r == -EPROTO) {
		fprintf(stderr, "sluice: the broker at %s does not serve sandbox `%s`: %s\n",
			sb->socket[0] ? sb->socket : netns_socket_path, sb->name, resp);
		free(resp);
		return r;
	}
	if (r < 0) {
		fprintf(stderr,
			"sluice: the broker of sandbox `%s` is not running (control socket %s: "
			"%s); the sandbox has no egress without it: start sluiced, then retry\n",
			sb->name, sb->socket[0] ? sb->socket : netns_socket_path, strerror(-r));
		free(resp);
		return r;
	}
	for (l = strtok_r(resp, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(l, '=');

		if (!eq)
			continue;
		*eq = '\0';
		fn(l, eq + 1, arg);
	}
	free(resp);
	return 0;
}

/**
 * netns_env_each() - the environment of a sandbox's programs (DESIGN.md)
 * @sb:  the sandbox
 * @fn:  called once per variable
 * @arg: passed to @fn
 *
 * Proxy variables name the gateway's explicit proxy; NO_PROXY the gateway
 * itself; every CA variable the one bundle in the sandbox's state directory.
 *
 * Return: 0; a negative errno when the broker gave no placeholders (it is
 * down, or does not know the sandbox: said on stderr), after the other
 * variables.
 */
int netns_env_each(const struct netns_sandbox *sb,
		   void (*fn)(const char *key, const char *value, void *arg), void *arg)
{
	static const char *const proxy_vars[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
						  "https_proxy" };
	/*
	 * One bundle for every client, each by the variable it reads (README,
	 * "Clients"): OpenSSL and what builds on it (Python's ssl, Ruby, Go's
	 * crypto/x509) read SSL_CERT_FILE; the rest carry a store of their own
	 * (certifi, node's, webpki's) and read only their own variable. npm
	 * reads its config from npm_config_* in either case; both spellings,
	 * so that neither a lower- nor an upper-case one the user exports
	 * wins over ours.
	 */
	static const char *const ca_vars[] = {
		"SSL_CERT_FILE",       "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
		"NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO",     "PIP_CERT",
		"npm_config_cafile",   "NPM_CONFIG_CAFILE",  "CARGO_HTTP_CAINFO",
		"AWS_CA_BUNDLE",       "DENO_CERT",	     "BUNDLE_SSL_CA_CERT",
	};
	struct in_addr ig = { .s_addr = htonl(sb->gw) };
	char gw[INET_ADDRSTRLEN], url[64], bundle[512];
	size_t i;

	inet_ntop(AF_INET, &ig, gw, sizeof(gw));
	snprintf(url, sizeof(url), "http://%s:%u", gw, sb->ports.proxy);
	if (netns_path(bundle, sizeof(bundle), NETNS_STATE_DIR, sb->name, "ca-bundle.crt") < 0)
		bundle[0] = '\0';
	for (i = 0; i < sizeof(proxy_vars) / sizeof(proxy_vars[0]); i++)
		fn(proxy_vars[i], url, arg);
	fn("NO_PROXY", gw, arg);
	fn("no_proxy", gw, arg);
	for (i = 0; i < sizeof(ca_vars) / sizeof(ca_vars[0]); i++)
		fn(ca_vars[i], bundle, arg);
	return placeholders(sb, fn, arg);
}
