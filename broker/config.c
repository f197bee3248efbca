// SPDX-License-Identifier: MIT
/* Loading sluiced's configuration, with FILE:LINE:COL errors like policies. */
#include "broker/config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/audit.h"
#include "broker/resolve.h"
#include "common/err.h"
#include "common/file.h"
#include "common/ytree.h"

void broker_config_defaults(struct broker_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->control_socket, sizeof(c->control_socket), "/run/sluice/sluiced.sock");
	snprintf(c->state_dir, sizeof(c->state_dir), "/run/sluice");
	addr_parse_cidr("10.200.0.0/16", &c->pool_net, &c->pool_plen);
	addr_parse_cidr("198.18.0.0/15", &c->synthetic_net, &c->synthetic_plen);
	c->proxy_port = 3128;
	c->transparent_port = 3129;
	c->dns_port = 3153;
	snprintf(c->audit_log, sizeof(c->audit_log), "-");
	c->max_connections = 16384;
	c->max_head_bytes = 16384;
	c->head_timeout_ms = 10000;
	c->audit_fold_ms = AUDIT_REPEAT_MS;
	c->connect_timeout_ms = 10000;
	c->response_timeout_ms = 60000;
	c->resolve_timeout_ms = RESOLVE_DEADLINE_MS;
	c->drain_timeout_ms = 10000;
	c->dns_cache_size = 4096;
}

struct cfgload {
	const char *file;
	struct ytree_error *err;
};

static int str_into(struct cfgload *ld, const struct ynode *v, const char *key, char *dst,
		    size_t dlen)
{
	if (v->type != YNODE_SCALAR)
		return ytree_fail(ld->err, ld->file, v, "`%s` must be a single value", key);
	if (v->len >= dlen || strlen(v->str) != v->len)
		return ytree_fail(ld->err, ld->file, v, "`%s` is too long (at most %zu bytes)", key,
				  dlen - 1);
	memcpy(dst, v->str, v->len + 1);
	return 0;
}

static int num(struct cfgload *ld, const struct ynode *v, const char *key, uint64_t min,
	       uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long x;

	if (v->type != YNODE_SCALAR || v->len == 0 || v->str[0] < '0' || v->str[0] > '9')
		return ytree_fail(ld->err, ld->file, v, "`%s` must be a number", key);
	errno = 0;
	x = strtoull(v->str, &end, 10);
	if (errno || *end || x < min || x > max)
		return ytree_fail(ld->err, ld->file, v, "`%s` must be %llu-%llu, not `%s`", key,
				  (unsigned long long)min, (unsigned long long)max, v->str);
	*out = x;
	return 0;
}

/* Durations as in policies ("10s", "2m", "500ms"), into milliseconds. */
static int ms(struct cfgload *ld, const struct ynode *v, const char *key, uint32_t *out)
{
	char *end;
	unsigned long long x;
	uint64_t mul;

	if (v->type != YNODE_SCALAR || v->len == 0 || v->str[0] < '0' || v->str[0] > '9')
		goto bad;
	errno = 0;
	x = strtoull(v->str, &end, 10);
	if (errno)
		goto bad;
	if (!strcmp(end, "ms"))
		mul = 1;
	else if (!strcmp(end, "s"))
		mul = 1000;
	else if (!strcmp(end, "m"))
		mul = 60000;
	else
		goto bad;
	if (x == 0 || x * mul > 3600000ull)
		goto bad;
	*out = (uint32_t)(x * mul);
	return 0;
bad:
	return ytree_fail(ld->err, ld->file, v,
			  "bad duration `%s` for `%s` (e.g. 500ms, 10s, 2m; at most 1h)",
			  v->type == YNODE_SCALAR ? v->str : "...", key);
}

static int prefix(struct cfgload *ld, const struct ynode *v, const char *key, struct sl_addr *net,
		  unsigned *plen, unsigned max_plen)
{
	if (v->type != YNODE_SCALAR || addr_parse_cidr(v->str, net, plen) < 0 || !addr_is_v4(net) ||
	    *plen < 96 + 8 || *plen > max_plen)
		return ytree_fail(ld->err, ld->file, v,
				  "`%s` must be an IPv4 CIDR from /8 to /%u, not `%s`", key,
				  max_plen - 96, v->type == YNODE_SCALAR ? v->str : "...");
	return 0;
}

static int resolvers(struct cfgload *ld, const struct ynode *v, struct broker_config *c)
{
	size_t i, o = 0;

	if (v->type != YNODE_SEQ)
		return ytree_fail(ld->err, ld->file, v, "`upstream_resolvers` must be a list");
	if (v->n > CONFIG_MAX_RESOLVERS)
		return ytree_fail(ld->err, ld->file, v, "more than %d upstream_resolvers",
				  CONFIG_MAX_RESOLVERS);
	c->upstream_resolvers[0] = '\0';
	for (i = 0; i < v->n; i++) {
		const struct ynode *it = v->kids[i];
		struct sl_addr a;
		char host[64];
		const char *port = NULL;
		int k;

		if (it->type != YNODE_SCALAR || it->len >= sizeof(host))
			goto bad;
		memcpy(host, it->str, it->len + 1);
		if (host[0] == '[') {
			char *rb = strchr(host, ']');

			if (!rb)
				goto bad;
			*rb = '\0';
			if (rb[1] == ':')
				port = rb + 2;
			else if (rb[1])
				goto bad;
			memmove(host, host + 1, strlen(host + 1) + 1);
		} else if (strchr(host, ':') == strrchr(host, ':') && strchr(host, ':')) {
			port = strchr(host, ':') + 1;
			*strchr(host, ':') = '\0';
		}
		if (addr_parse(host, &a) < 0)
			goto bad;
		if (port) {
			char *end;
			unsigned long pv = strtoul(port, &end, 10);

			if (!*port || *end || pv == 0 || pv > 65535)
				goto bad;
		}
		k = snprintf(c->upstream_resolvers + o, sizeof(c->upstream_resolvers) - o,
			     "%s%s%s%s%s%s", o ? "," : "", addr_is_v4(&a) ? "" : "[", host,
			     addr_is_v4(&a) ? "" : "]", port ? ":" : "", port ? port : "");
		if (k < 0 || (size_t)k >= sizeof(c->upstream_resolvers) - o)
			goto bad;
		o += (size_t)k;
		continue;
bad:
		return ytree_fail(ld->err, ld->file, it,
				  "bad resolver `%s` (ADDR, ADDR:PORT or [V6]:PORT)",
				  it->type == YNODE_SCALAR ? it->str : "...");
	}
	return 0;
}

/* control_group: a group name, resolved now (see config.h). */
static int group(struct cfgload *ld, const struct ynode *v, struct broker_config *c)
{
	char buf[16384];
	struct group gr, *res = NULL;
	int r;

	r = str_into(ld, v, "control_group", c->control_group, sizeof(c->control_group));
	if (r < 0 || !c->control_group[0])
		return r;
	r = getgrnam_r(c->control_group, &gr, buf, sizeof(buf), &res);
	if (r || !res)
		return ytree_fail(ld->err, ld->file, v, "`control_group`: unknown group `%s`%s%s",
				  c->control_group, r ? ": " : "", r ? strerror(r) : "");
	c->control_gid = res->gr_gid;
	return 0;
}

/* A whole decimal number of at most 10 digits in [s, s + n); -1 otherwise. */
static long long id_num(const char *s, size_t n)
{
	long long x = 0;
	size_t i;

	if (n == 0 || n > 10)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		x = x * 10 + (s[i] - '0');
	}
	return x < 0xffffffffLL ? x : -1; /* (uid_t)-1 means "no change" */
}

/* user, key_user: NAME (its passwd entry's uid and group), UID or UID:GID,
 * resolved now (see config.h) into @name, @uid, @gid. */
static int user(struct cfgload *ld, const struct ynode *v, const char *key, char *name,
		size_t namelen, uid_t *uid, gid_t *gid)
{
	char buf[16384];
	struct passwd pw, *res = NULL;
	const char *colon;
	long long u, g;
	int r;

	r = str_into(ld, v, key, name, namelen);
	if (r < 0)
		return r;
	if (!name[0])
		return 0; /* "": the default, as if not set (main.c resolve_user()) */
	colon = strchr(name, ':');
	u = id_num(name, colon ? (size_t)(colon - name) : strlen(name));
	g = colon ? id_num(colon + 1, strlen(colon + 1)) : -2;
	if (u >= 0 && g != -1) {
		*uid = (uid_t)u;
		if (g >= 0) {
			*gid = (gid_t)g;
			return 0;
		}
		/* UID alone: its passwd entry's group where it has one, else
		 * the same number. */
		r = getpwuid_r((uid_t)u, &pw, buf, sizeof(buf), &res);
		*gid = !r && res ? res->pw_gid : (gid_t)u;
		return 0;
	}
	if (colon)
		return ytree_fail(ld->err, ld->file, v, "`%s`: `%s` is not NAME, UID or UID:GID",
				  key, name);
	r = getpwnam_r(name, &pw, buf, sizeof(buf), &res);
	if (r || !res)
		return ytree_fail(ld->err, ld->file, v, "`%s`: unknown user `%s`%s%s", key, name,
				  r ? ": " : "", r ? strerror(r) : "");
	*uid = res->pw_uid;
	*gid = res->pw_gid;
	return 0;
}

/* clang-format off */
static const char *const known_keys[] = {
	"control_socket",
	"state_dir",
	"sandbox_pool",
	"proxy_port",
	"transparent_port",
	"dns_port",
	"upstream_resolvers",
	"upstream_ca",
	"audit_log",
	"workers",
	"max_connections",
	"max_head_bytes",
	"head_timeout",
	"connect_timeout",
	"drain_timeout",
	"dns_cache_size",
	"synthetic_pool",
	"response_timeout",
	"resolve_timeout",
	"audit_fold",
	"control_group",
	"user",
	"key_user",
	NULL,
};
/* clang-format on */

static int apply(struct cfgload *ld, const struct ynode *k, const struct ynode *v,
		 struct broker_config *c)
{
	const char *key = k->str;
	uint64_t x = 0; /* num() sets it only on success */
	int r;

#define IS(name) (strcmp(key, name) == 0)
	if (IS("control_socket"))
		return str_into(ld, v, key, c->control_socket, sizeof(c->control_socket));
	if (IS("state_dir"))
		return str_into(ld, v, key, c->state_dir, sizeof(c->state_dir));
	if (IS("upstream_ca"))
		return str_into(ld, v, key, c->upstream_ca, sizeof(c->upstream_ca));
	if (IS("audit_log"))
		return str_into(ld, v, key, c->audit_log, sizeof(c->audit_log));
	if (IS("control_group"))
		return group(ld, v, c);
	if (IS("user"))
		return user(ld, v, key, c->user, sizeof(c->user), &c->user_uid, &c->user_gid);
	if (IS("key_user"))
		return user(ld, v, key, c->key_user, sizeof(c->key_user), &c->key_uid, &c->key_gid);
	if (IS("sandbox_pool"))
		return prefix(ld, v, key, &c->pool_net, &c->pool_plen, 96 + 28);
	if (IS("synthetic_pool"))
		return prefix(ld, v, key, &c->synthetic_net, &c->synthetic_plen, 96 + 24);
	if (IS("upstream_resolvers"))
		return resolvers(ld, v, c);
	if (IS("audit_fold")) {
		/* 0 writes every refusal on a line of its own. */
		if (v->type == YNODE_SCALAR && (!strcmp(v->str, "0") || !strcmp(v->str, "0s"))) {
			c->audit_fold_ms = 0;
			return 0;
		}
		return ms(ld, v, key, &c->audit_fold_ms);
	}
	if (IS("head_timeout"))
		return ms(ld, v, key, &c->head_timeout_ms);
	if (IS("connect_timeout"))
		return ms(ld, v, key, &c->connect_timeout_ms);
	if (IS("response_timeout"))
		return ms(ld, v, key, &c->response_timeout_ms);
	if (IS("resolve_timeout"))
		return ms(ld, v, key, &c->resolve_timeout_ms);
	if (IS("drain_timeout"))
		return ms(ld, v, key, &c->drain_timeout_ms);
	if (IS("proxy_port") || IS("transparent_port") || IS("dns_port")) {
		r = num(ld, v, key, 1, 65535, &x);
		if (r == 0)
			*(IS("proxy_port") ? &c->proxy_port
			  : IS("dns_port") ? &c->dns_port
					   : &c->transparent_port) = (uint16_t)x;
		return r;
	}
	if (IS("workers")) {
		r = num(ld, v, key, 0, 256, &x);
		if (r == 0)
			c->workers = (unsigned)x;
		return r;
	}
	if (IS("max_connections")) {
		r = num(ld, v, key, 1, 1000000, &x);
		if (r == 0)
			c->max_connections = (uint32_t)x;
		return r;
	}
	if (IS("max_head_bytes")) {
		r = num(ld, v, key, 1024, 1048576, &x);
		if (r == 0)
			c->max_head_bytes = (uint32_t)x;
		return r;
	}
	if (IS("dns_cache_size")) {
		r = num(ld, v, key, 0, 1000000, &x);
		if (r == 0)
			c->dns_cache_size = (uint32_t)x;
		return r;
	}
#undef IS
	return ytree_fail(ld->err, ld->file, k, "unknown key `%s`", key);
}

int broker_config_load(const char *path, struct broker_config *out, struct sl_err *err)
{
	struct ytree_error yerr = { .msg = "" };
	struct sl_err fe = { 0 };
	struct broker_config c = *out;
	struct cfgload ld = { .file = path, .err = &yerr };
	struct ynode *root = NULL;
	char *buf = NULL;
	size_t i, j, got = 0;
	int r;

	/* A refusal of the file (not regular, too big: errno 0) is -EINVAL
	 * to the caller, a call's failure its errno. */
	r = file_read_all_err(path, YTREE_MAX_BYTES, &buf, &got, &fe);
	if (r < 0) {
		sl_err_set(err, sl_err_errno(&fe), "%s", sl_err_msg(&fe));
		return sl_err_errno(&fe) ? r : -EINVAL;
	}
	r = ytree_load(path, buf, got, &root, &yerr);
	free(buf);
	if (r < 0)
		goto out;
	if (!root)
		goto out; /* an empty file: all defaults */
	if (root->type != YNODE_MAP) {
		r = ytree_fail(&yerr, path, root, "the configuration must be a mapping");
		goto out;
	}
	for (i = 0; i + 1 < root->n; i += 2) {
		const struct ynode *k = root->kids[i];
		bool known = false;

		if (k->type != YNODE_SCALAR) {
			r = ytree_fail(&yerr, path, k, "keys must be plain words");
			goto out;
		}
		for (j = 0; known_keys[j]; j++)
			known |= strcmp(known_keys[j], k->str) == 0;
		for (j = 0; j < i; j += 2) {
			if (strcmp(root->kids[j]->str, k->str) == 0) {
				r = ytree_fail(&yerr, path, k, "duplicate key `%s`", k->str);
				goto out;
			}
		}
		if (!known) {
			r = ytree_fail(&yerr, path, k, "unknown key `%s`", k->str);
			goto out;
		}
		r = apply(&ld, k, root->kids[i + 1], &c);
		if (r < 0)
			goto out;
	}
	/* Listeners share no port: SO_REUSEPORT would join them silently. */
	{
		static const char *const key[] = { "proxy_port", "transparent_port", "dns_port" };
		const uint16_t port[] = { c.proxy_port, c.transparent_port, c.dns_port };
		size_t a, b;

		for (a = 0; a < 3; a++) {
			for (b = a + 1; b < 3; b++) {
				const struct ynode *at = root;

				if (port[a] != port[b])
					continue;
				/* At the later of the two in the file. */
				for (j = 0; j + 1 < root->n; j += 2) {
					if (!strcmp(root->kids[j]->str, key[a]) ||
					    !strcmp(root->kids[j]->str, key[b]))
						at = root->kids[j + 1];
				}
				r = ytree_fail(&yerr, path, at,
					       "`%s` and `%s` are both %u: each listener needs a "
					       "port of its own",
					       key[a], key[b], port[a]);
				goto out;
			}
		}
	}
	if (c.control_socket[0] != '/' || c.state_dir[0] != '/') {
		r = ytree_fail(&yerr, path, root,
			       "`control_socket` and `state_dir` must be absolute paths");
		goto out;
	}
out:
	ytree_free(root);
	if (r < 0) {
		if (yerr.msg[0])
			ytree_error_to_err(&yerr, err);
		else
			sl_err_set(err, r, "%s", strerror(-r));
		return r;
	}
	*out = c;
	return 0;
}
