// SPDX-License-Identifier: MIT
/* sluice probe: DNS on the wire (queries over UDP and TCP, answers read
 * strictly), and resolv.conf. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe/probe_internal.h"

#define DNS_HDR 12
#define DNS_TYPE_OPT 41
#define DNS_EDNS_UDP 1232 /* the payload size we offer (DNS flag day 2020) */
#define DNS_OPT_EDE 15

/**
 * probe_dns_build() - a recursive query for @name, type @qtype, class IN,
 * with an EDNS(0) OPT record (so that a filter can say why it refuses, with
 * an Extended DNS Error).
 * @buf: out
 * @cap: its size (300 is enough for any name)
 * @id: the query id
 * @name: the name, one trailing dot allowed
 * @qtype: the type
 *
 * Return: the message length, or -EINVAL (a bad name) or -ENOSPC.
 */
int probe_dns_build(uint8_t *buf, size_t cap, uint16_t id, const char *name, uint16_t qtype)
{
	size_t n = strlen(name), o = DNS_HDR, i = 0;

	if (n && name[n - 1] == '.')
		n--;
	if (n == 0 || n > 253)
		return -EINVAL;
	if (cap < DNS_HDR + n + 2 + 4 + 11)
		return -ENOSPC;
	memset(buf, 0, DNS_HDR);
	buf[0] = (uint8_t)(id >> 8);
	buf[1] = (uint8_t)id;
	buf[2] = 0x01; /* RD */
	buf[5] = 1;    /* QDCOUNT */
	while (i < n) {
		const char *dot = memchr(name + i, '.', n - i);
		size_t len = dot ? (size_t)(dot - (name + i)) : n - i;

		if (len == 0 || len > 63)
			return -EINVAL;
		buf[o++] = (uint8_t)len;
		memcpy(buf + o, name + i, len);
		o += len;
		i += len + 1;
	}
	buf[o++] = 0;
	buf[o++] = (uint8_t)(qtype >> 8);
	buf[o++] = (uint8_t)qtype;
	buf[o++] = 0;
	buf[o++] = 1; /* IN */
	/* OPT: root owner, our UDP payload size, no flags, no options. */
	buf[11] = 1; /* ARCOUNT */
	buf[o++] = 0;
	buf[o++] = 0;
	buf[o++] = DNS_TYPE_OPT;
	buf[o++] = DNS_EDNS_UDP >> 8;
	buf[o++] = DNS_EDNS_UDP & 0xff;
	memset(buf + o, 0, 6); /* extended RCODE, version, flags; RDLENGTH 0 */
	o += 6;
	return (int)o;
}

/* Skip a (possibly compressed) name at @off; return the offset after it or -1.
 */
static long skip_name(const uint8_t *m, size_t len, size_t off)
{
	int labels = 0;

	while (off < len && labels++ < 128) {
		uint8_t c = m[off];

		if (c == 0)
			return (long)off + 1;
		if ((c & 0xc0) == 0xc0)
			return off + 2 <= len ? (long)off + 2 : -1;
		if (c & 0xc0)
			return -1;
		off += (size_t)c + 1;
	}
	return -1;
}

/* The first Extended DNS Error option of an OPT record's RDATA. */
static void read_ede(const uint8_t *p, size_t n, struct probe_dns_answer *a)
{
	size_t o = 0;

	while (o + 4 <= n) {
		uint16_t code = (uint16_t)(p[o] << 8 | p[o + 1]);
		uint16_t olen = (uint16_t)(p[o + 2] << 8 | p[o + 3]);

		o += 4;
		if (o + olen > n)
			return;
		if (code == DNS_OPT_EDE && olen >= 2 && a->ede < 0) {
			a->ede = p[o] << 8 | p[o + 1];
			probe_sanitize(a->ede_text, sizeof(a->ede_text), (const char *)p + o + 2,
				       olen - 2u);
		}
		o += olen;
	}
}

static void add_type(struct probe_dns_answer *a, uint16_t t)
{
	int i;

	for (i = 0; i < a->n_types; i++)
		if (a->types[i] == t)
			return;
	if (a->n_types < (int)(sizeof(a->types) / sizeof(a->types[0])))
		a->types[a->n_types++] = t;
}

/**
 * probe_dns_parse() - read an answer to our query.
 * @msg: the message
 * @len: its length
 * @id: the id we sent
 * @qtype: the type we asked
 * @a: rcode, addresses (A, AAAA), how many records carry other data of the
 *     asked type (for ANY: anything but A, AAAA and CNAME), the types seen
 *
 * Return: 0, or -EBADMSG (not a DNS answer to our query, or malformed).
 */
int probe_dns_parse(const uint8_t *msg, size_t len, uint16_t id, uint16_t qtype,
		    struct probe_dns_answer *a)
{
	size_t off = DNS_HDR;
	int qd, an, ns, ar, i;

	memset(a, 0, sizeof(*a));
	a->ede = -1;
	if (len < DNS_HDR || (uint16_t)(msg[0] << 8 | msg[1]) != id || !(msg[2] & 0x80))
		return -EBADMSG;
	a->rcode = msg[3] & 0x0f;
	a->tc = (msg[2] & 0x02) != 0;
	qd = msg[4] << 8 | msg[5];
	an = msg[6] << 8 | msg[7];
	ns = msg[8] << 8 | msg[9];
	ar = msg[10] << 8 | msg[11];
	a->ancount = an;
	for (i = 0; i < qd; i++) {
		long e = skip_name(msg, len, off);

		if (e < 0 || (size_t)e + 4 > len)
			return -EBADMSG;
		off = (size_t)e + 4;
	}
	for (i = 0; i < an; i++) {
		long e = skip_name(msg, len, off);
		uint16_t type, rdlen;

		if (e < 0 || (size_t)e + 10 > len)
			return -EBADMSG;
		off = (size_t)e;
		type = (uint16_t)(msg[off] << 8 | msg[off + 1]);
		rdlen = (uint16_t)(msg[off + 8] << 8 | msg[off + 9]);
		off += 10;
		if (off + rdlen > len)
			return -EBADMSG;
		add_type(a, type);
		if ((type == PROBE_DNS_A && rdlen == 4) ||
		    (type == PROBE_DNS_AAAA && rdlen == 16)) {
			if (a->n_addr < (int)(sizeof(a->addr) / sizeof(a->addr[0]))) {
				struct probe_ip *ip = &a->addr[a->n_addr++];

				memset(ip, 0, sizeof(*ip));
				ip->af = type == PROBE_DNS_A ? AF_INET : AF_INET6;
				memcpy(&ip->u, msg + off, rdlen);
			}
		} else if (qtype == PROBE_DNS_ANY ? type != 5 : type == qtype) {
			a->n_data++;
		}
		off += rdlen;
	}
	/* The authority section is skipped; in the additional one, an OPT
	 * may carry an Extended DNS Error. These sections only add to the
	 * detail: a malformed one is ignored, not an error. */
	for (i = 0; i < ns + ar; i++) {
		long e = skip_name(msg, len, off);
		uint16_t type, rdlen;

		if (e < 0 || (size_t)e + 10 > len)
			break;
		off = (size_t)e;
		type = (uint16_t)(msg[off] << 8 | msg[off + 1]);
		rdlen = (uint16_t)(msg[off + 8] << 8 | msg[off + 9]);
		off += 10;
		if (off + rdlen > len)
			break;
		if (i >= ns && type == DNS_TYPE_OPT)
			read_ede(msg + off, rdlen, a);
		off += rdlen;
	}
	return 0;
}

/**
 * probe_dns_rcode_name() - NOERROR, NXDOMAIN, ...
 * @rcode: the code
 *
 * Return: a static string.
 */
const char *probe_dns_rcode_name(int rcode)
{
	static const char *const names[] = { "NOERROR",	 "FORMERR", "SERVFAIL",
					     "NXDOMAIN", "NOTIMP",  "REFUSED" };

	return rcode >= 0 && rcode < 6 ? names[rcode] : "rcode>5";
}

/**
 * probe_dns_type_name() - A, TXT, ... or TYPEnn.
 * @t: the type
 * @buf: room for TYPEnn
 * @n: its size
 *
 * Return: a static string or @buf.
 */
const char *probe_dns_type_name(uint16_t t, char *buf, size_t n)
{
	switch (t) {
	case 1:
		return "A";
	case 2:
		return "NS";
	case 5:
		return "CNAME";
	case 6:
		return "SOA";
	case 10:
		return "NULL";
	case 13:
		return "HINFO";
	case 15:
		return "MX";
	case 16:
		return "TXT";
	case 28:
		return "AAAA";
	case 33:
		return "SRV";
	case 65:
		return "HTTPS";
	case 255:
		return "ANY";
	}
	snprintf(buf, n, "TYPE%u", t);
	return buf;
}

/**
 * probe_dns_describe() - an answer in words: "NXDOMAIN", "NOERROR, A 1.2.3.4",
 * "NOERROR, no records", "NOERROR, TXT x2".
 * @a: the answer
 * @buf: out
 * @n: its size
 */
void probe_dns_describe(const struct probe_dns_answer *a, char *buf, size_t n)
{
	char ip[INET6_ADDRSTRLEN], tb[16];
	size_t o;
	int i;

	o = (size_t)snprintf(buf, n, "%s", probe_dns_rcode_name(a->rcode));
	if (a->ede >= 0 && o < n)
		o += (size_t)snprintf(buf + o, n - o, " (EDE %d%s%s)", a->ede,
				      a->ede_text[0] ? ": " : "", a->ede_text);
	if (a->ancount == 0) {
		if (a->rcode == 0 && o < n)
			snprintf(buf + o, n - o, ", no records");
		return;
	}
	for (i = 0; i < a->n_types && o < n; i++)
		o += (size_t)snprintf(buf + o, n - o, ", %s",
				      probe_dns_type_name(a->types[i], tb, sizeof(tb)));
	if (a->n_addr && o < n) {
		probe_ip_str(&a->addr[0], ip, sizeof(ip));
		snprintf(buf + o, n - o, " (%s%s)", ip, a->n_addr > 1 ? ", ..." : "");
	}
}

/**
 * probe_dns_query() - one query to @server port 53, and its answer.
 * @server: the resolver
 * @tcp: over TCP (length-prefixed) instead of UDP
 * @name: the name
 * @qtype: the type
 * @timeout_ms: the bound (for TCP: for the connect, and again for the answer)
 * @a: the answer, when 0 is returned
 * @why: what happened otherwise, in words
 * @whylen: its size
 *
 * Return: 0 (a DNS answer), -EBADMSG (bytes came back that are not an answer
 * to the query: something was reached), or another negative errno (nothing
 * answered: -ETIMEDOUT, -EHOSTUNREACH, -ENETUNREACH, ...).
 */
int probe_dns_query(const struct probe_ip *server, bool tcp, const char *name, uint16_t qtype,
		    int timeout_ms, struct probe_dns_answer *a, char *why, size_t whylen)
{
	uint8_t q[2 + 300];
	struct probe_xchg *x;
	uint16_t id;
	int len, r;

	probe_random(&id, sizeof(id));
	len = probe_dns_build(q + 2, sizeof(q) - 2, id, name, qtype);
	if (len < 0) {
		snprintf(why, whylen, "cannot ask for `%s`", name);
		return len;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	q[0] = (uint8_t)(len >> 8);
	q[1] = (uint8_t)len;
	if (tcp)
		probe_tcp_exchange(server, 53, q, (size_t)len + 2, PR_DNSTCP, timeout_ms, x);
	else
		probe_udp_exchange(server, 53, q + 2, (size_t)len, timeout_ms, x);
	if (x->kind != PX_DATA) {
		probe_xchg_describe(x, why, whylen);
		switch (x->kind) {
		case PX_TIMEOUT:
		case PX_SILENT:
			r = -ETIMEDOUT;
			break;
		case PX_NOROUTE:
			r = -ENETUNREACH;
			break;
		case PX_ICMP:
			r = -EHOSTUNREACH;
			break;
		case PX_RESET:
		case PX_CLOSED:
			r = -ECONNRESET;
			break;
		default:
			r = x->err ? -x->err : -EIO;
		}
		free(x);
		return r;
	}
	if (tcp) {
		size_t mlen = (size_t)((uint8_t)x->data[0] << 8 | (uint8_t)x->data[1]);

		r = (x->len >= 2 + mlen)
			    ? probe_dns_parse((uint8_t *)x->data + 2, mlen, id, qtype, a)
			    : -EBADMSG;
	} else {
		r = probe_dns_parse((uint8_t *)x->data, x->len, id, qtype, a);
	}
	if (r < 0)
		snprintf(why, whylen, "an answer that is not DNS (%zu bytes)", x->len);
	free(x);
	return r;
}

/**
 * probe_resolv_conf() - the first usable nameserver of a resolv.conf.
 * @path: the file (/etc/resolv.conf)
 * @ns: the result
 *
 * Return: 0, or -ENOENT (no file, or no nameserver line in it).
 */
int probe_resolv_conf(const char *path, struct probe_ip *ns)
{
	char line[512];
	FILE *f = fopen(path, "re");
	int r = -ENOENT;

	if (!f)
		return -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		char word[32], addr[80], *pct;

		if (sscanf(line, "%31s %79s", word, addr) != 2 || strcmp(word, "nameserver"))
			continue;
		pct = strchr(addr, '%'); /* a zone index: fe80::1%eth0 */
		if (pct)
			*pct = '\0';
		if (probe_ip_parse(addr, ns) == 0) {
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}
