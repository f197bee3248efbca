// SPDX-License-Identifier: MIT
/* sluice probe: the bits of HTTP/1.1, URLs and TLS a verdict needs: response
 * heads, a hand-built ClientHello. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "probe/probe_internal.h"

/* The value of header @name in the head @p..@end, sanitized into @out; 0 if
 * found. */
static int header_value(const char *p, const char *end, const char *name, char *out, size_t n)
{
	size_t nl = strlen(name);

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *v;

		if (!eol)
			eol = end;
		if ((size_t)(eol - p) > nl && p[nl] == ':' && !strncasecmp(p, name, nl)) {
			v = p + nl + 1;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			probe_sanitize(out, n, v, (size_t)(eol - v));
			/* trailing blanks */
			for (size_t k = strlen(out); k && out[k - 1] == ' '; k--)
				out[k - 1] = '\0';
			return 0;
		}
		if (eol == p || (eol == p + 1 && *p == '\r'))
			break; /* end of the head */
		p = eol + 1;
	}
	return -ENOENT;
}

/**
 * probe_http_parse() - the status line and the headers a verdict uses.
 * @buf: the bytes received (a head, maybe more)
 * @len: their count
 * @resp: status, reason phrase, X-Sluice-Reason, Location
 *
 * Return: 0, or -EBADMSG when the bytes do not start with an HTTP/1.x status
 * line.
 */
int probe_http_parse(const char *buf, size_t len, struct probe_http_resp *resp)
{
	const char *end = buf + len, *eol, *p;
	int st = 0, i;

	memset(resp, 0, sizeof(*resp));
	if (len < 12 || strncmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ')
		return -EBADMSG;
	for (i = 9; i < 12; i++) {
		if (buf[i] < '0' || buf[i] > '9')
			return -EBADMSG;
		st = st * 10 + (buf[i] - '0');
	}
	if (st < 100 || (len > 12 && buf[12] != ' ' && buf[12] != '\r' && buf[12] != '\n'))
		return -EBADMSG;
	resp->status = st;
	eol = memchr(buf, '\n', len);
	if (!eol)
		eol = end;
	p = buf + 12;
	while (p < eol && *p == ' ')
		p++;
	probe_sanitize(resp->reason_phrase, sizeof(resp->reason_phrase), p, (size_t)(eol - p));
	if (eol < end) {
		header_value(eol + 1, end, "X-Sluice-Reason", resp->sluice_reason,
			     sizeof(resp->sluice_reason));
		header_value(eol + 1, end, "Location", resp->location, sizeof(resp->location));
	}
	return 0;
}

static int port_of(const char *s, size_t n, uint16_t *port)
{
	unsigned long v = 0;
	size_t i;

	if (n == 0 || n > 5)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v < 1 || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

/* AUTHORITY (no userinfo): host or [v6], optional :port. */
static int authority(const char *s, size_t n, char *host, size_t hostlen, uint16_t *port)
{
	const char *colon = NULL;
	size_t hl;

	if (n && s[0] == '[') {
		const char *close = memchr(s, ']', n);

		if (!close)
			return -EINVAL;
		hl = (size_t)(close - s - 1);
		if (close + 1 < s + n) {
			if (close[1] != ':')
				return -EINVAL;
			colon = close + 1;
		}
		if (hl == 0 || hl >= hostlen)
			return -EINVAL;
		memcpy(host, s + 1, hl);
		host[hl] = '\0';
	} else {
		colon = memchr(s, ':', n);
		hl = colon ? (size_t)(colon - s) : n;
		if (hl == 0 || hl >= hostlen)
			return -EINVAL;
		memcpy(host, s, hl);
		host[hl] = '\0';
	}
	if (colon && port_of(colon + 1, (size_t)(s + n - colon - 1), port) < 0)
		return -EINVAL;
	return 0;
}

/**
 * probe_url_parse() - http://HOST[:PORT][/PATH] or https://...
 * @url: the URL (no userinfo)
 * @u: the result; host_is_ip and ip when the host is a strict address literal
 *
 * Return: 0 or -EINVAL.
 */
int probe_url_parse(const char *url, struct probe_url *u)
{
	const char *a, *slash;
	size_t alen;

	memset(u, 0, sizeof(*u));
	if (!strncasecmp(url, "http://", 7)) {
		a = url + 7;
		u->port = 80;
	} else if (!strncasecmp(url, "https://", 8)) {
		a = url + 8;
		u->https = true;
		u->port = 443;
	} else {
		return -EINVAL;
	}
	slash = strpbrk(a, "/?#");
	alen = slash ? (size_t)(slash - a) : strlen(a);
	if (memchr(a, '@', alen))
		return -EINVAL;
	if (authority(a, alen, u->host, sizeof(u->host), &u->port) < 0)
		return -EINVAL;
	if (probe_ip_parse(u->host, &u->ip) == 0)
		u->host_is_ip = true;
	else if (probe_name_check(u->host) < 0)
		return -EINVAL;
	if (!slash)
		snprintf(u->path, sizeof(u->path), "/");
	else if (*slash == '/')
		snprintf(u->path, sizeof(u->path), "%s", slash);
	else
		snprintf(u->path, sizeof(u->path), "/%s", slash);
	for (const char *p = u->path; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return -EINVAL;
	return 0;
}

/**
 * probe_proxy_parse() - the host and port of a proxy variable's value.
 * @val: http://[user:pass@]HOST[:PORT][/], or HOST[:PORT]
 * @host: out (a name or an address, IPv6 without brackets)
 * @hostlen: its size
 * @port: out (80 when not given)
 *
 * Return: 0, -ENOTSUP (a scheme other than http://), or -EINVAL.
 */
int probe_proxy_parse(const char *val, char *host, size_t hostlen, uint16_t *port)
{
	const char *a = val, *end, *at;
	size_t n;

	if (strstr(val, "://")) {
		if (strncasecmp(val, "http://", 7))
			return -ENOTSUP;
		a = val + 7;
	}
	end = strpbrk(a, "/?#");
	n = end ? (size_t)(end - a) : strlen(a);
	at = memchr(a, '@', n);
	if (at) {
		n -= (size_t)(at + 1 - a);
		a = at + 1;
	}
	*port = 80;
	if (authority(a, n, host, hostlen, port) < 0)
		return -EINVAL;
	return 0;
}

static size_t put16(uint8_t *p, size_t o, unsigned v)
{
	p[o] = (uint8_t)(v >> 8);
	p[o + 1] = (uint8_t)v;
	return o + 2;
}

/**
 * probe_tls_client_hello() - a TLS 1.3/1.2 ClientHello record, built by hand.
 * @buf: out
 * @cap: its size (600 is enough)
 * @sni: the server_name to send, or NULL for none
 *
 * It offers what common servers accept (TLS 1.3 with an X25519 key share
 * of random bytes, ECDHE suites for 1.2), so that a server reached answers
 * with a ServerHello. No handshake is ever finished.
 *
 * Return: the record's length, or 0 if it does not fit.
 */
size_t probe_tls_client_hello(uint8_t *buf, size_t cap, const char *sni)
{
	static const uint16_t suites[] = { 0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f,
					   0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013,
					   0xc014, 0x009c, 0x009d, 0x002f, 0x0035 };
	static const uint16_t sigalgs[] = { 0x0403, 0x0804, 0x0401, 0x0503, 0x0805,
					    0x0501, 0x0806, 0x0601, 0x0201 };
	size_t sl = sni ? strlen(sni) : 0, o, hs, ext, i;

	if (sl && sni[sl - 1] == '.')
		sl--; /* SNI carries no trailing dot (RFC 6066) */
	if (sl > 255 || cap < 400 + sl)
		return 0;
	buf[0] = 0x16;
	buf[1] = 0x03;
	buf[2] = 0x01;
	/* record length at 3..4, handshake header at 5..8 */
	o = 9;
	hs = 5;
	buf[o++] = 0x03;
	buf[o++] = 0x03;
	probe_random(buf + o, 32); /* random */
	o += 32;
	buf[o++] = 32; /* legacy session id (middlebox compatibility) */
	probe_random(buf + o, 32);
	o += 32;
	o = put16(buf, o, sizeof(suites));
	for (i = 0; i < sizeof(suites) / sizeof(suites[0]); i++)
		o = put16(buf, o, suites[i]);
	buf[o++] = 1;
	buf[o++] = 0; /* null compression */
	ext = o;
	o += 2;
	if (sl) {
		o = put16(buf, o, 0x0000);
		o = put16(buf, o, (unsigned)sl + 5);
		o = put16(buf, o, (unsigned)sl + 3);
		buf[o++] = 0; /* host_name */
		o = put16(buf, o, (unsigned)sl);
		memcpy(buf + o, sni, sl);
		o += sl;
	}
	o = put16(buf, o, 0x0017); /* extended_master_secret */
	o = put16(buf, o, 0);
	o = put16(buf, o, 0xff01); /* renegotiation_info */
	o = put16(buf, o, 1);
	buf[o++] = 0;
	o = put16(buf, o, 0x000a); /* supported_groups: x25519, P-256, P-384 */
	o = put16(buf, o, 8);
	o = put16(buf, o, 6);
	o = put16(buf, o, 0x001d);
	o = put16(buf, o, 0x0017);
	o = put16(buf, o, 0x0018);
	o = put16(buf, o, 0x000b); /* ec_point_formats: uncompressed */
	o = put16(buf, o, 2);
	buf[o++] = 1;
	buf[o++] = 0;
	o = put16(buf, o, 0x000d); /* signature_algorithms */
	o = put16(buf, o, (unsigned)sizeof(sigalgs) + 2);
	o = put16(buf, o, (unsigned)sizeof(sigalgs));
	for (i = 0; i < sizeof(sigalgs) / sizeof(sigalgs[0]); i++)
		o = put16(buf, o, sigalgs[i]);
	o = put16(buf, o, 0x0010); /* ALPN: http/1.1 */
	o = put16(buf, o, 11);
	o = put16(buf, o, 9);
	buf[o++] = 8;
	memcpy(buf + o, "http/1.1", 8);
	o += 8;
	o = put16(buf, o, 0x002b); /* supported_versions: 1.3, 1.2 */
	o = put16(buf, o, 5);
	buf[o++] = 4;
	o = put16(buf, o, 0x0304);
	o = put16(buf, o, 0x0303);
	o = put16(buf, o, 0x002d); /* psk_key_exchange_modes: psk_dhe_ke */
	o = put16(buf, o, 2);
	buf[o++] = 1;
	buf[o++] = 1;
	o = put16(buf, o, 0x0033); /* key_share: one X25519 share */
	o = put16(buf, o, 38);
	o = put16(buf, o, 36);
	o = put16(buf, o, 0x001d);
	o = put16(buf, o, 32);
	probe_random(buf + o, 32);
	o += 32;
	put16(buf, ext, (unsigned)(o - ext - 2));
	buf[hs] = 0x01; /* client_hello */
	buf[hs + 1] = (uint8_t)((o - 9) >> 16);
	buf[hs + 2] = (uint8_t)((o - 9) >> 8);
	buf[hs + 3] = (uint8_t)(o - 9);
	put16(buf, 3, (unsigned)(o - 5));
	return o;
}

/**
 * probe_tls_classify() - what the first bytes of a TLS server's answer are.
 * @buf: the bytes
 * @len: their count
 *
 * Return: PT_NOTHING (none), PT_SERVER_HELLO, PT_ALERT, PT_OTHER_TLS (another
 * TLS record) or PT_NOT_TLS.
 */
enum probe_tls_answer probe_tls_classify(const uint8_t *buf, size_t len)
{
	if (len == 0)
		return PT_NOTHING;
	if (len < 5 || buf[1] != 0x03 || buf[0] < 0x14 || buf[0] > 0x17)
		return PT_NOT_TLS;
	if (buf[0] == 0x16 && len >= 6 && buf[5] == 0x02)
		return PT_SERVER_HELLO;
	if (buf[0] == 0x15)
		return PT_ALERT;
	return PT_OTHER_TLS;
}
