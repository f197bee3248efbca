// SPDX-License-Identifier: MIT
/* sluice probe: command line options, their real-world defaults, and the
 * spellings of addresses. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "probe/probe_internal.h"

#define DEFAULT_TIMEOUT_MS 3000
#define DEFAULT_JOBS 8

/* Every option; "=" marks those that take a value. */
enum opt_id {
	OPT_EXPECT_ALLOW,
	OPT_EXPECT_DENY,
	OPT_CANARY,
	OPT_RESOLVER,
	OPT_RESOLVER_SANDBOX,
	OPT_TIMEOUT,
	OPT_JOBS,
	OPT_JSON,
	OPT_ONLY,
	OPT_SKIP,
	OPT_LIST,
	OPT_HELP,
	OPT_PUBLIC_ADDR,
	OPT_PUBLIC_ADDR6,
	OPT_PRIVATE_ADDR,
	OPT_PRIVATE_ADDR6,
	OPT_METADATA_ADDR,
	OPT_METADATA_ADDR6,
	OPT_ECS_ADDR,
	OPT_ALIBABA_ADDR,
	OPT_METADATA_NAME,
	OPT_UDP_ADDR,
	OPT_UDP_PORT,
	OPT_DNS_NAME,
	OPT_DOH_HOST,
	OPT_DOH_ADDR,
	OPT_DOT_ADDR,
	OPT_ALLOWED_ADDR,
	OPT_BLOCKED_PORT,
	OPT_REDIRECT_URL,
	OPT_EDGE_SUFFIX,
	OPT_EDGE_PREFIX,
	OPT_GATEWAY,
	OPT_GATEWAY_PORTS,
	OPT_CONTROL_SOCKET,
	OPT_SECRET_FILE,
	OPT_BROKER_PID,
	OPT_N /* the count */
};

static const struct {
	const char *name;
	bool arg;
	enum opt_id id;
} opts_table[] = {
	{ "expect-allow", true, OPT_EXPECT_ALLOW },
	{ "expect-deny", true, OPT_EXPECT_DENY },
	{ "canary", true, OPT_CANARY },
	{ "resolver", true, OPT_RESOLVER },
	{ "resolver-sandbox", true, OPT_RESOLVER_SANDBOX },
	{ "timeout", true, OPT_TIMEOUT },
	{ "jobs", true, OPT_JOBS },
	{ "json", false, OPT_JSON },
	{ "only", true, OPT_ONLY },
	{ "skip", true, OPT_SKIP },
	{ "list", false, OPT_LIST },
	{ "help", false, OPT_HELP },
	{ "public-addr", true, OPT_PUBLIC_ADDR },
	{ "public-addr6", true, OPT_PUBLIC_ADDR6 },
	{ "private-addr", true, OPT_PRIVATE_ADDR },
	{ "private-addr6", true, OPT_PRIVATE_ADDR6 },
	{ "metadata-addr", true, OPT_METADATA_ADDR },
	{ "metadata-addr6", true, OPT_METADATA_ADDR6 },
	{ "ecs-addr", true, OPT_ECS_ADDR },
	{ "alibaba-addr", true, OPT_ALIBABA_ADDR },
	{ "metadata-name", true, OPT_METADATA_NAME },
	{ "udp-addr", true, OPT_UDP_ADDR },
	{ "udp-port", true, OPT_UDP_PORT },
	{ "dns-name", true, OPT_DNS_NAME },
	{ "doh-host", true, OPT_DOH_HOST },
	{ "doh-addr", true, OPT_DOH_ADDR },
	{ "dot-addr", true, OPT_DOT_ADDR },
	{ "allowed-addr", true, OPT_ALLOWED_ADDR },
	{ "blocked-port", true, OPT_BLOCKED_PORT },
	{ "redirect-url", true, OPT_REDIRECT_URL },
	{ "edge-suffix", true, OPT_EDGE_SUFFIX },
	{ "edge-prefix", true, OPT_EDGE_PREFIX },
	{ "gateway", true, OPT_GATEWAY },
	{ "gateway-ports", true, OPT_GATEWAY_PORTS },
	{ "control-socket", true, OPT_CONTROL_SOCKET },
	{ "secret-file", true, OPT_SECRET_FILE },
	{ "broker-pid", true, OPT_BROKER_PID },
};

/**
 * probe_usage() - print the usage text.
 * @f: where to
 */
void probe_usage(FILE *f)
{
	/* clang-format off */
	fputs(
"usage: sluice probe [OPTIONS]      (also: sluice-probe [OPTIONS])\n"
"\n"
"Runs acceptance checks from inside a sandbox and reports what its network\n"
"really allows. Exit 0: every check passed (skipped checks do not fail);\n"
"1: a check failed; 2: misuse. The defaults aim at real outside addresses:\n"
"run it only inside the sandbox you mean to test.\n"
"\n"
"What to expect:\n"
"  --expect-allow HOST[:PORT]  a host that must work (repeatable; port 443 by\n"
"                              default: TLS via CONNECT, else HTTP)\n"
"  --expect-deny HOST[:PORT]   a host that must be refused (repeatable)\n"
"  --canary NAME               a domain whose authoritative server you watch:\n"
"                              no query for it may leave the sandbox\n"
"  --allowed-addr ADDR         the real address of the first --expect-allow host\n"
"  --redirect-url URL          a URL on an allowed host that answers 30x to a\n"
"                              private or outside URL\n"
"\n"
"How to run:\n"
"  --timeout DUR               per network exchange [3s] (e.g. 500ms, 2.5, 10s)\n"
"  --jobs N                    checks run in parallel (default 8, 1 to 32)\n"
"  --only ID[,ID]              run only these checks (repeatable)\n"
"  --skip ID[,ID]              do not run these checks (repeatable)\n"
"  --json                      one JSON document instead of the table\n"
"  --list                      list the checks (id and description) and exit\n"
"  --help                      this text\n"
"\n"
"Targets (real-world defaults in brackets):\n"
"  --resolver ADDR             outside resolvers for direct DNS (repeatable)\n"
"                              [1.1.1.1, 8.8.8.8]\n"
"  --resolver-sandbox ADDR     the sandbox's own resolver [/etc/resolv.conf]\n"
"  --public-addr ADDR          a public IPv4 literal with HTTP and TLS [1.1.1.1]\n"
"  --public-addr6 ADDR         a public IPv6 literal [2606:4700:4700::1111]\n"
"  --private-addr ADDR         private IPv4 addresses (repeatable)\n"
"                              [10.0.0.1, 172.16.0.1, 192.168.0.1, 100.64.0.1]\n"
"  --private-addr6 ADDR        a private IPv6 address [fd00::1]\n"
"  --metadata-addr ADDR        the cloud metadata address [169.254.169.254]\n"
"  --metadata-addr6 ADDR       its IPv6 address [fd00:ec2::254]\n"
"  --ecs-addr ADDR             the container credentials address [169.254.170.2]\n"
"  --alibaba-addr ADDR         Alibaba Cloud's metadata address [100.100.100.200]\n"
"  --metadata-name NAME        the metadata service by name\n"
"                              [metadata.google.internal]\n"
"  --udp-addr ADDR             where datagrams go (a reply is a leak: point it at\n"
"                              a host that answers UDP) [--public-addr]\n"
"  --udp-port PORT             the \"random\" UDP port [one chosen at random]\n"
"  --dns-name NAME             a name that exists in public DNS and that the\n"
"                              sandbox must not resolve directly\n"
"                              [the first --expect-deny host, else example.com]\n"
"  --doh-host NAME             a DNS-over-HTTPS server by name [dns.google]\n"
"  --doh-addr ADDR             one by address [8.8.8.8]\n"
"  --dot-addr ADDR[:PORT]      DNS-over-TLS servers (repeatable)\n"
"                              [1.1.1.1:853, 8.8.8.8:853]\n"
"  --blocked-port PORT         a port the policy does not allow [8080]\n"
"  --edge-suffix DOMAIN        for <allowed>.DOMAIN [evil.example]\n"
"  --edge-prefix TEXT          for TEXT<allowed> [evil-]\n"
"  --gateway ADDR              the sandbox's gateway [the default route's]\n"
"  --gateway-ports P[,P]       its ports other than the proxy's\n"
"                              [22,80,443,8080,9090]\n"
"\n"
"Containment (what the runtime keeps from the code besides the network):\n"
"  --control-socket PATH       a sluice control socket that must not connect\n"
"                              (repeatable) [" PROBE_CONTROL_SOCKET " is always tried]\n"
"  --secret-file PATH          a host file that must not open for reading, e.g.\n"
"                              a credential's source file (repeatable)\n"
"  --broker-pid PID            the broker's PID on the host: it must not be visible\n"
"\n"
"The proxy comes from HTTPS_PROXY / https_proxy / HTTP_PROXY / http_proxy;\n"
"names are resolved over the wire by the probe itself, never by NSS.\n", f);
	/* clang-format on */
}

/**
 * probe_ip_parse() - parse an IPv4 (dotted quad) or IPv6 address strictly.
 * @s: the text; an IPv6 address may be in brackets
 * @ip: the result
 *
 * Return: 0, or -EINVAL (nothing but inet_pton(3) forms: no octal, no short
 * forms).
 */
int probe_ip_parse(const char *s, struct probe_ip *ip)
{
	char buf[INET6_ADDRSTRLEN + 2];
	size_t n = strlen(s);

	memset(ip, 0, sizeof(*ip));
	if (inet_pton(AF_INET, s, &ip->u.v4) == 1) {
		ip->af = AF_INET;
		return 0;
	}
	if (n >= 2 && s[0] == '[' && s[n - 1] == ']' && n - 2 < sizeof(buf)) {
		memcpy(buf, s + 1, n - 2);
		buf[n - 2] = '\0';
		s = buf;
	}
	if (inet_pton(AF_INET6, s, &ip->u.v6) == 1) {
		ip->af = AF_INET6;
		return 0;
	}
	memset(ip, 0, sizeof(*ip));
	return -EINVAL;
}

/**
 * probe_ip_str() - an address as text (no brackets).
 * @ip: the address
 * @buf: out
 * @n: its size (INET6_ADDRSTRLEN is enough)
 */
void probe_ip_str(const struct probe_ip *ip, char *buf, size_t n)
{
	if (!ip->af || !inet_ntop(ip->af, &ip->u, buf, (socklen_t)n))
		snprintf(buf, n, "(none)");
}

/**
 * probe_ip_url() - an address as a URL host: IPv6 in brackets.
 * @ip: the address
 * @buf: out
 * @n: its size
 */
void probe_ip_url(const struct probe_ip *ip, char *buf, size_t n)
{
	char t[INET6_ADDRSTRLEN];

	probe_ip_str(ip, t, sizeof(t));
	snprintf(buf, n, ip->af == AF_INET6 ? "[%s]" : "%s", t);
}

/**
 * probe_name_check() - is @s a plausible DNS host name?
 * @s: the name: 1-253 characters of letters, digits, '-', '_' and dots,
 *     labels of 1-63, one trailing dot allowed
 *
 * Return: 0 or -EINVAL.
 */
int probe_name_check(const char *s)
{
	size_t n = strlen(s), label = 0, i;

	if (n == 0 || n > 254 || (n == 254 && s[253] != '.'))
		return -EINVAL;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (c == '.') {
			if (label == 0)
				return -EINVAL;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return -EINVAL;
		if (++label > 63)
			return -EINVAL;
	}
	return 0;
}

static int port_parse(const char *s, uint16_t *port)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < 1 || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

/**
 * probe_hostport_parse() - parse HOST, HOST:PORT, [V6]:PORT or a bare IPv6
 * address.
 * @s: the text
 * @defport: the port when none is given
 * @hp: the result; host holds a name or an address (IPv6 without brackets)
 *
 * Return: 0 or -EINVAL.
 */
int probe_hostport_parse(const char *s, uint16_t defport, struct probe_hostport *hp)
{
	struct probe_ip ip;
	const char *colon;
	size_t hl;

	memset(hp, 0, sizeof(*hp));
	hp->port = defport;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close)
			return -EINVAL;
		hl = (size_t)(close - s - 1);
		if (hl == 0 || hl >= sizeof(hp->host))
			return -EINVAL;
		memcpy(hp->host, s + 1, hl);
		if (close[1] == ':') {
			if (port_parse(close + 2, &hp->port) < 0)
				return -EINVAL;
		} else if (close[1]) {
			return -EINVAL;
		}
		if (probe_ip_parse(hp->host, &ip) < 0 || ip.af != AF_INET6)
			return -EINVAL;
		return 0;
	}
	colon = strchr(s, ':');
	if (colon && strchr(colon + 1, ':')) { /* a bare IPv6 address */
		if (probe_ip_parse(s, &ip) < 0 || strlen(s) >= sizeof(hp->host))
			return -EINVAL;
		memcpy(hp->host, s, strlen(s) + 1);
		return 0;
	}
	hl = colon ? (size_t)(colon - s) : strlen(s);
	if (hl == 0 || hl >= sizeof(hp->host))
		return -EINVAL;
	memcpy(hp->host, s, hl);
	if (colon && port_parse(colon + 1, &hp->port) < 0)
		return -EINVAL;
	if (probe_ip_parse(hp->host, &ip) < 0 && probe_name_check(hp->host) < 0)
		return -EINVAL;
	return 0;
}

/**
 * probe_timeout_parse() - parse a duration: 3, 2.5, 3s, 500ms.
 * @s: the text
 * @ms: the result in milliseconds, 100 to 60000
 *
 * Return: 0 or -EINVAL.
 */
int probe_timeout_parse(const char *s, int *ms)
{
	char *end;
	double v;

	if ((*s < '0' || *s > '9') && *s != '.')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s)
		return -EINVAL;
	if (!strcmp(end, "ms"))
		;
	else if (!strcmp(end, "s") || !*end)
		v *= 1000;
	else
		return -EINVAL;
	if (!(v >= 100 && v <= 60000))
		return -EINVAL;
	*ms = (int)v;
	return 0;
}

/**
 * probe_v4_spellings() - the other spellings of an IPv4 address.
 * @a: the address
 * @out: one text per PROBE_SPELL_*
 */
void probe_v4_spellings(const struct in_addr *a, char out[PROBE_N_SPELL][40])
{
	uint32_t v = ntohl(a->s_addr);
	unsigned o[4] = { v >> 24, (v >> 16) & 255, (v >> 8) & 255, v & 255 };
	char part[4][8];
	int i;

	snprintf(out[PROBE_SPELL_DEC], 40, "%u", v);
	for (i = 0; i < 4; i++)
		snprintf(part[i], sizeof(part[i]), o[i] ? "0%o" : "0", o[i]);
	snprintf(out[PROBE_SPELL_OCT], 40, "%s.%s.%s.%s", part[0], part[1], part[2], part[3]);
	snprintf(out[PROBE_SPELL_HEX], 40, "0x%x.0x%x.0x%x.0x%x", o[0], o[1], o[2], o[3]);
	snprintf(out[PROBE_SPELL_HEXWORD], 40, "0x%08x", v);
	snprintf(out[PROBE_SPELL_OCTWORD], 40, "0%o", v);
	snprintf(out[PROBE_SPELL_SHORT], 40, "%u.%u", o[0], v & 0xffffff);
	snprintf(out[PROBE_SPELL_OCT1], 40, "0%o.%u.%u.%u", o[0], o[1], o[2], o[3]);
	snprintf(out[PROBE_SPELL_HEX1], 40, "0x%x.%u.%u.%u", o[0], o[1], o[2], o[3]);
}

static void set_ip(struct probe_ip *ip, const char *s)
{
	probe_ip_parse(s, ip); /* defaults are valid literals */
}

static void opts_default(struct probe_opts *o)
{
	size_t i;

	memset(o, 0, sizeof(*o));
	o->timeout_ms = DEFAULT_TIMEOUT_MS;
	o->jobs = DEFAULT_JOBS;
	for (i = 0; i < probe_n_checks; i++)
		o->selected[i] = true;
	set_ip(&o->resolvers[0], "1.1.1.1");
	set_ip(&o->resolvers[1], "8.8.8.8");
	o->n_resolvers = 2;
	set_ip(&o->public4, "1.1.1.1");
	set_ip(&o->public6, "2606:4700:4700::1111");
	set_ip(&o->private4[0], "10.0.0.1");
	set_ip(&o->private4[1], "172.16.0.1");
	set_ip(&o->private4[2], "192.168.0.1");
	set_ip(&o->private4[3], "100.64.0.1");
	o->n_private4 = 4;
	set_ip(&o->private6, "fd00::1");
	set_ip(&o->meta4, "169.254.169.254");
	set_ip(&o->meta6, "fd00:ec2::254");
	set_ip(&o->ecs4, "169.254.170.2");
	set_ip(&o->alibaba4, "100.100.100.200");
	snprintf(o->metadata_name, sizeof(o->metadata_name), "metadata.google.internal");
	snprintf(o->doh_host, sizeof(o->doh_host), "dns.google");
	set_ip(&o->doh_addr, "8.8.8.8");
	set_ip(&o->dot[0].ip, "1.1.1.1");
	set_ip(&o->dot[1].ip, "8.8.8.8");
	o->dot[0].port = o->dot[1].port = 853;
	o->n_dot = 2;
	o->blocked_port = 8080;
	snprintf(o->edge_suffix, sizeof(o->edge_suffix), "evil.example");
	snprintf(o->edge_prefix, sizeof(o->edge_prefix), "evil-");
	o->gw_ports[0] = 22;
	o->gw_ports[1] = 80;
	o->gw_ports[2] = 443;
	o->gw_ports[3] = 8080;
	o->gw_ports[4] = 9090;
	o->n_gw_ports = 5;
}

/* --only / --skip: a comma list of known ids into @mark. */
static int id_list(const char *opt, const char *v, bool *mark, struct sl_err *err)
{
	const char *p = v;

	if (!*v)
		return sl_err_set(err, 0, "--%s: empty list of check ids", opt);
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		int i = probe_check_index(p, len);

		if (i < 0)
			return sl_err_set(err, 0,
					  "--%s: unknown check id `%.*s` (sluice "
					  "probe --list shows them)",
					  opt, (int)(len > 64 ? 64 : len), p);
		mark[i] = true;
		if (!comma)
			break;
		p = comma + 1;
		if (!*p)
			return sl_err_set(err, 0, "--%s: empty check id after `,`", opt);
	}
	return 0;
}

static int name_opt(const char *opt, const char *v, char *dst, size_t n, struct sl_err *err)
{
	if (probe_name_check(v) < 0 || strlen(v) >= n)
		return sl_err_set(err, 0, "--%s: `%s` is not a host name", opt, v);
	snprintf(dst, n, "%s", v);
	return 0;
}

static int ip_opt(const char *opt, const char *v, int af, struct probe_ip *ip, struct sl_err *err)
{
	if (probe_ip_parse(v, ip) < 0 || (af && ip->af != af))
		return sl_err_set(err, 0, "--%s: `%s` is not an %s address", opt, v,
				  af == AF_INET	   ? "IPv4"
				  : af == AF_INET6 ? "IPv6"
						   : "IP");
	return 0;
}

/* A repeatable option that replaces its defaults when first given. */
static int list_slot(const char *opt, int *n, bool *given, struct sl_err *err)
{
	if (!*given) {
		*n = 0;
		*given = true;
	}
	if (*n >= PROBE_LIST_MAX)
		return sl_err_set(err, 0, "--%s: at most %d", opt, PROBE_LIST_MAX);
	return (*n)++;
}

static int one(struct probe_opts *o, enum opt_id id, const char *opt, const char *v, bool *only,
	       bool *skip, bool *any_only, bool given[], struct sl_err *err)
{
	struct probe_hostport hp;
	int k;

	switch (id) {
	case OPT_EXPECT_ALLOW:
	case OPT_EXPECT_DENY: {
		bool allow = id == OPT_EXPECT_ALLOW;
		int *n = allow ? &o->n_allow : &o->n_deny;

		if (probe_hostport_parse(v, 443, &hp) < 0)
			return sl_err_set(err, 0, "--%s: `%s` is not HOST[:PORT]", opt, v);
		if (*n >= PROBE_LIST_MAX)
			return sl_err_set(err, 0, "--%s: at most %d", opt, PROBE_LIST_MAX);
		(allow ? o->allow : o->deny)[(*n)++] = hp;
		return 0;
	}
	case OPT_CANARY:
		return name_opt(opt, v, o->canary, sizeof(o->canary), err);
	case OPT_RESOLVER:
		if ((k = list_slot(opt, &o->n_resolvers, &given[id], err)) < 0)
			return k;
		return ip_opt(opt, v, 0, &o->resolvers[k], err);
	case OPT_RESOLVER_SANDBOX:
		return ip_opt(opt, v, 0, &o->sandbox_resolver, err);
	case OPT_TIMEOUT:
		if (probe_timeout_parse(v, &o->timeout_ms) < 0)
			return sl_err_set(err, 0,
					  "--timeout: `%s` is not a duration from "
					  "100ms to 60s (3, 2.5s, 500ms)",
					  v);
		return 0;
	case OPT_JOBS: {
		char *end;
		long j = strtol(v, &end, 10);

		if (*v < '0' || *v > '9' || *end || j < 1 || j > 32)
			return sl_err_set(err, 0, "--jobs: `%s` is not a number from 1 to 32", v);
		o->jobs = (int)j;
		return 0;
	}
	case OPT_JSON:
		o->json = true;
		return 0;
	case OPT_LIST:
		o->list = true;
		return 0;
	case OPT_HELP:
		o->help = true;
		return 0;
	case OPT_ONLY:
		*any_only = true;
		return id_list(opt, v, only, err);
	case OPT_SKIP:
		return id_list(opt, v, skip, err);
	case OPT_PUBLIC_ADDR:
		return ip_opt(opt, v, AF_INET, &o->public4, err);
	case OPT_PUBLIC_ADDR6:
		return ip_opt(opt, v, AF_INET6, &o->public6, err);
	case OPT_PRIVATE_ADDR:
		if ((k = list_slot(opt, &o->n_private4, &given[id], err)) < 0)
			return k;
		return ip_opt(opt, v, AF_INET, &o->private4[k], err);
	case OPT_PRIVATE_ADDR6:
		return ip_opt(opt, v, AF_INET6, &o->private6, err);
	case OPT_METADATA_ADDR:
		return ip_opt(opt, v, AF_INET, &o->meta4, err);
	case OPT_METADATA_ADDR6:
		return ip_opt(opt, v, AF_INET6, &o->meta6, err);
	case OPT_ECS_ADDR:
		return ip_opt(opt, v, AF_INET, &o->ecs4, err);
	case OPT_ALIBABA_ADDR:
		return ip_opt(opt, v, AF_INET, &o->alibaba4, err);
	case OPT_METADATA_NAME:
		return name_opt(opt, v, o->metadata_name, sizeof(o->metadata_name), err);
	case OPT_UDP_ADDR:
		return ip_opt(opt, v, 0, &o->udp_addr, err);
	case OPT_UDP_PORT:
	case OPT_BLOCKED_PORT:
		if (port_parse(v, id == OPT_UDP_PORT ? &o->udp_port : &o->blocked_port) < 0)
			return sl_err_set(err, 0, "--%s: `%s` is not a port (1-65535)", opt, v);
		return 0;
	case OPT_DNS_NAME:
		return name_opt(opt, v, o->dns_name, sizeof(o->dns_name), err);
	case OPT_DOH_HOST:
		return name_opt(opt, v, o->doh_host, sizeof(o->doh_host), err);
	case OPT_DOH_ADDR:
		return ip_opt(opt, v, 0, &o->doh_addr, err);
	case OPT_DOT_ADDR:
		if ((k = list_slot(opt, &o->n_dot, &given[id], err)) < 0)
			return k;
		if (probe_hostport_parse(v, 853, &hp) < 0 ||
		    probe_ip_parse(hp.host, &o->dot[k].ip) < 0)
			return sl_err_set(err, 0, "--%s: `%s` is not ADDR[:PORT]", opt, v);
		o->dot[k].port = hp.port;
		return 0;
	case OPT_ALLOWED_ADDR:
		return ip_opt(opt, v, 0, &o->allowed_addr, err);
	case OPT_REDIRECT_URL: {
		struct probe_url u;

		if (strlen(v) >= sizeof(o->redirect_url) || probe_url_parse(v, &u) < 0)
			return sl_err_set(err, 0, "--%s: `%s` is not an http:// or https:// URL",
					  opt, v);
		snprintf(o->redirect_url, sizeof(o->redirect_url), "%s", v);
		return 0;
	}
	case OPT_EDGE_SUFFIX:
		return name_opt(opt, v, o->edge_suffix, sizeof(o->edge_suffix), err);
	case OPT_EDGE_PREFIX: {
		size_t i, n = strlen(v);

		for (i = 0; i < n; i++)
			if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') ||
			      (v[i] >= '0' && v[i] <= '9') || v[i] == '-'))
				break;
		if (n == 0 || i < n || n >= sizeof(o->edge_prefix))
			return sl_err_set(err, 0, "--%s: `%s` is not a label prefix", opt, v);
		snprintf(o->edge_prefix, sizeof(o->edge_prefix), "%s", v);
		return 0;
	}
	case OPT_GATEWAY:
		return ip_opt(opt, v, 0, &o->gateway, err);
	case OPT_GATEWAY_PORTS: {
		const char *p = v;
		char num[8];

		o->n_gw_ports = 0;
		for (;;) {
			const char *comma = strchr(p, ',');
			size_t len = comma ? (size_t)(comma - p) : strlen(p);

			if (len == 0 || len >= sizeof(num) || o->n_gw_ports >= PROBE_LIST_MAX)
				return sl_err_set(err, 0, "--%s: `%s` is not a list of ports", opt,
						  v);
			memcpy(num, p, len);
			num[len] = '\0';
			if (port_parse(num, &o->gw_ports[o->n_gw_ports++]) < 0)
				return sl_err_set(err, 0, "--%s: `%s` is not a port (1-65535)", opt,
						  num);
			if (!comma)
				return 0;
			p = comma + 1;
		}
	}
	case OPT_CONTROL_SOCKET:
		if (!*v || strlen(v) >= sizeof(o->control_sockets[0]))
			return sl_err_set(err, 0,
					  "--%s: `%s` is not a socket path (1 to %zu "
					  "bytes)",
					  opt, v, sizeof(o->control_sockets[0]) - 1);
		if (o->n_control_sockets >= PROBE_LIST_MAX)
			return sl_err_set(err, 0, "--%s: at most %d", opt, PROBE_LIST_MAX);
		snprintf(o->control_sockets[o->n_control_sockets++], sizeof(o->control_sockets[0]),
			 "%s", v);
		return 0;
	case OPT_SECRET_FILE:
		if (!*v || strlen(v) >= sizeof(o->secret_files[0]))
			return sl_err_set(err, 0, "--%s: `%s` is not a path (1 to %zu bytes)", opt,
					  v, sizeof(o->secret_files[0]) - 1);
		if (o->n_secret_files >= PROBE_LIST_MAX)
			return sl_err_set(err, 0, "--%s: at most %d", opt, PROBE_LIST_MAX);
		snprintf(o->secret_files[o->n_secret_files++], sizeof(o->secret_files[0]), "%s", v);
		return 0;
	case OPT_BROKER_PID: {
		char *end;
		long p;

		errno = 0;
		p = strtol(v, &end, 10);
		/* PID_MAX_LIMIT: 4194304 on 64-bit kernels */
		if (*v < '0' || *v > '9' || *end || errno || p < 1 || p > 4194304)
			return sl_err_set(err, 0, "--%s: `%s` is not a PID (1 to 4194304)", opt, v);
		o->broker_pid = (int)p;
		return 0;
	}
	case OPT_N:
		break;
	}
	return sl_err_set(err, 0, "--%s: not handled", opt);
}

/**
 * probe_opts_parse() - parse the command line (argv[0] is the command).
 * @argc: argument count
 * @argv: arguments; --opt VALUE and --opt=VALUE
 * @o: filled with the defaults, then the options
 * @err: a one-line message on misuse (NULL: not wanted)
 *
 * Return: 0, or -EINVAL with @err set (the caller exits 2).
 */
int probe_opts_parse(int argc, char **argv, struct probe_opts *o, struct sl_err *err)
{
	bool only[PROBE_MAX_CHECKS] = { 0 }, skip[PROBE_MAX_CHECKS] = { 0 };
	bool given[OPT_N] = { 0 };
	bool any_only = false;
	size_t i;
	int a, r;

	opts_default(o);
	sl_err_clear(err);
	for (a = 1; a < argc; a++) {
		const char *arg = argv[a], *eq, *v = NULL;
		size_t nlen, k;

		if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
			if (!strcmp(arg, "-h"))
				arg = "--help";
			else
				return sl_err_set(err, 0, "unexpected argument `%s`", arg);
		}
		eq = strchr(arg + 2, '=');
		nlen = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
		for (k = 0; k < sizeof(opts_table) / sizeof(opts_table[0]); k++)
			if (strlen(opts_table[k].name) == nlen &&
			    !strncmp(opts_table[k].name, arg + 2, nlen))
				break;
		if (k == sizeof(opts_table) / sizeof(opts_table[0]))
			return sl_err_set(err, 0, "unknown option `%.*s`", (int)(nlen + 2), arg);
		if (opts_table[k].arg) {
			if (eq)
				v = eq + 1;
			else if (a + 1 < argc)
				v = argv[++a];
			else
				return sl_err_set(err, 0, "--%s needs a value", opts_table[k].name);
		} else if (eq) {
			return sl_err_set(err, 0, "--%s takes no value", opts_table[k].name);
		}
		r = one(o, opts_table[k].id, opts_table[k].name, v, only, skip, &any_only, given,
			err);
		if (r < 0)
			return r;
	}
	for (i = 0; i < probe_n_checks; i++)
		o->selected[i] = (!any_only || only[i]) && !skip[i];
	return 0;
}
