// SPDX-License-Identifier: MIT
/* sluice probe: the checks, each one thing a sandbox must not (or must) be able
 * to do.
 *
 * Theory of operation: a check tries one or more targets and adds one part
 * per target to its result (probe_res_add): pass when the attempt was
 * refused, fail when it got through, skip when it could not be tried (no
 * proxy, no IPv6 route, an option not given). What counts as refused:
 *
 *  - TCP: the connect fails (refused, unreachable, ICMP admin-prohibited),
 *    times out (a firewall that drops), or the connection is reset or
 *    closed before any answer; or an HTTP answer carries X-Sluice-Reason, or
 *    is a refusal status (direct: 403, 451, 511; through a proxy also 400,
 *    407, 502, 503, 504: the proxy would not, or could not, connect).
 *  - A TCP connection that completes and then stays silent is NOT refused:
 *    a handshake came back from somewhere, so it counts as a leak.
 *  - TLS: a ServerHello or an alert means a TLS server was reached.
 *  - UDP and ICMP: a reply is the leak; an ICMP error or silence is
 *    refused (datagrams have no handshake: silence is the best a blocked
 *    path can show, which is why the tests also run every check where the
 *    path is open, and see it fail).
 *  - DNS: addresses or data for a name that must not resolve are the leak;
 *    NXDOMAIN, REFUSED, no records or no answer are refused. A fresh label
 *    under the canary is the exception: any NOERROR for it means a server
 *    that knows the canary's zone was asked (and only the canary server's
 *    own log can prove that nothing got there: the label is printed).
 *  - Names at the allowlist's edge: <allowed>.SUFFIX and PREFIX<allowed>
 *    must be refused like any other name; the trailing-dot and mixed-case
 *    spellings of an allowed name must work where the name works (and be
 *    refused where it is refused), those of a denied name must be refused.
 *  - Bytes that are neither HTTP nor TLS from a target: a host was reached.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "probe/probe_internal.h"

#define T(ctx) ((ctx)->o->timeout_ms)
#define ADD probe_res_add

void probe_bfmt(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, n, fmt, ap);
	va_end(ap);
}

/* ---- small helpers ---------------------------------------------------------
 */

static void ipport(const struct probe_ip *ip, uint16_t port, char *buf, size_t n)
{
	char h[INET6_ADDRSTRLEN + 2];

	probe_ip_url(ip, h, sizeof(h));
	probe_bfmt(buf, n, "%s:%u", h, port);
}

/* An HTTP/1.1 request head; @extra is more header lines, each ending in \r\n.
 */
static size_t http_req(char *buf, size_t n, const char *method, const char *target,
		       const char *host, const char *extra)
{
	int k = snprintf(buf, n,
			 "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sluice-probe\r\n"
			 "Accept: */*\r\n%sConnection: close\r\n\r\n",
			 method, target, host, extra ? extra : "");

	return k > 0 && (size_t)k < n ? (size_t)k : 0;
}

/* HOST or HOST:PORT, as a Host header or an authority; IPv6 in brackets. */
static void authority(const char *host, uint16_t port, uint16_t defport, char *buf, size_t n)
{
	bool v6 = strchr(host, ':') != NULL;

	if (port == defport)
		probe_bfmt(buf, n, v6 ? "[%s]" : "%s", host);
	else
		probe_bfmt(buf, n, v6 ? "[%s]:%u" : "%s:%u", host, port);
}

static const struct probe_hostport *first_allow(const struct probe_ctx *ctx, int want)
{
	int i;

	/* want: 0 any, 1 TLS (443), 2 plain HTTP (not 443) */
	for (i = 0; i < ctx->o->n_allow; i++) {
		const struct probe_hostport *h = &ctx->o->allow[i];

		if (!want || (want == 1) == (h->port == 443))
			return h;
	}
	return NULL;
}

static bool refusal_status(int st, bool proxy)
{
	if (st == 403 || st == 451 || st == 511)
		return true;
	return proxy && (st == 400 || st == 407 || st == 502 || st == 503 || st == 504);
}

/* ---- judging one attempt that must be refused ------------------------------
 */

/* The outcomes without an answer; false when @x holds an answer or silence. */
static bool judge_no_answer(struct probe_result *r, const char *what, const struct probe_xchg *x,
			    int af)
{
	char d[160];

	if (x->kind == PX_NOROUTE) {
		if (af == AF_INET6)
			ADD(r, PROBE_SKIP, "%s: no IPv6 route here (%s)", what,
			    strerror(x->err ? x->err : ENETUNREACH));
		else
			ADD(r, PROBE_PASS, "%s: no route (%s)", what,
			    strerror(x->err ? x->err : ENETUNREACH));
		return true;
	}
	if (x->kind == PX_SILENT || x->kind == PX_DATA)
		return false;
	probe_xchg_describe(x, d, sizeof(d));
	ADD(r, PROBE_PASS, "%s: %s", what, d);
	return true;
}

static void judge_silent(struct probe_result *r, const char *what, const struct probe_xchg *x)
{
	ADD(r, PROBE_FAIL,
	    "%s: TCP connected, then no answer within %gs (a handshake came "
	    "back: counted as a leak)",
	    what, x->timeout_ms / 1000.0);
}

static void not_http(struct probe_result *r, const char *what, const struct probe_xchg *x)
{
	char s[48];

	probe_sanitize(s, sizeof(s), x->data, x->len);
	ADD(r, PROBE_FAIL, "%s: answered %zu bytes (`%s`): a host was reached (leak)", what, x->len,
	    s);
}

/* An HTTP answer to a request that must be refused. */
static void judge_http_answer(struct probe_result *r, const char *what, const struct probe_xchg *x,
			      bool proxy)
{
	struct probe_http_resp h;

	if (probe_http_parse(x->data, x->len, &h) < 0)
		return not_http(r, what, x);
	if (h.sluice_reason[0])
		ADD(r, PROBE_PASS, "%s: refused: HTTP %d X-Sluice-Reason: %s", what, h.status,
		    h.sluice_reason);
	else if (refusal_status(h.status, proxy))
		ADD(r, PROBE_PASS, "%s: refused: HTTP %d %s (no X-Sluice-Reason)", what, h.status,
		    h.reason_phrase);
	else
		ADD(r, PROBE_FAIL, "%s: HTTP %d %s %s (leak)", what, h.status, h.reason_phrase,
		    proxy ? "through the proxy" : "from the target");
}

static void judge_http(struct probe_result *r, const char *what, const struct probe_xchg *x, int af)
{
	if (judge_no_answer(r, what, x, af))
		return;
	if (x->kind == PX_SILENT)
		return judge_silent(r, what, x);
	judge_http_answer(r, what, x, false);
}

static void judge_tls_answer(struct probe_result *r, const char *what, const struct probe_xchg *x)
{
	struct probe_http_resp h;

	switch (probe_tls_classify((const uint8_t *)x->data, x->len)) {
	case PT_SERVER_HELLO:
		ADD(r, PROBE_FAIL, "%s: TLS ServerHello: a TLS server was reached (leak)", what);
		return;
	case PT_ALERT:
		ADD(r, PROBE_FAIL, "%s: TLS alert %u/%u: a TLS server was reached (leak)", what,
		    x->len > 5 ? (unsigned)(uint8_t)x->data[5] : 0,
		    x->len > 6 ? (unsigned)(uint8_t)x->data[6] : 0);
		return;
	case PT_OTHER_TLS:
		ADD(r, PROBE_FAIL,
		    "%s: a TLS record came back: a TLS server was reached "
		    "(leak)",
		    what);
		return;
	case PT_NOTHING:
	case PT_NOT_TLS:
		break;
	}
	if (probe_http_parse(x->data, x->len, &h) == 0 && h.sluice_reason[0]) {
		ADD(r, PROBE_PASS, "%s: refused: HTTP %d X-Sluice-Reason: %s", what, h.status,
		    h.sluice_reason);
		return;
	}
	not_http(r, what, x);
}

static void judge_tls(struct probe_result *r, const char *what, const struct probe_xchg *x, int af)
{
	if (judge_no_answer(r, what, x, af))
		return;
	if (x->kind == PX_SILENT)
		return judge_silent(r, what, x);
	judge_tls_answer(r, what, x);
}

/* A datagram or an echo request: a reply is the leak, silence or an ICMP error
 * is not. */
static void judge_dgram(struct probe_result *r, const char *what, const struct probe_xchg *x,
			int af, const char *reply_is)
{
	if (x->kind == PX_DATA) {
		ADD(r, PROBE_FAIL, "%s: %s (%zu bytes): the path is open (leak)", what, reply_is,
		    x->len);
		return;
	}
	if (x->kind == PX_SILENT) {
		ADD(r, PROBE_PASS,
		    "%s: no answer within %gs (blocked, or nothing answers "
		    "there)",
		    what, x->timeout_ms / 1000.0);
		return;
	}
	judge_no_answer(r, what, x, af);
}

/* ---- doing it ---------------------------------------------------------------
 */

static void direct_http(const struct probe_ctx *ctx, struct probe_result *r,
			const struct probe_ip *ip, uint16_t port, const char *method,
			const char *path, const char *host, const char *extra)
{
	struct probe_xchg *x = calloc(1, sizeof(*x));
	char req[1024], what[96], hh[300];
	int tmo = T(ctx); /* before @host is tested: it may be a field of ctx->o */
	size_t n;

	if (!x)
		return ADD(r, PROBE_FAIL, "out of memory");
	if (!host) {
		char a[INET6_ADDRSTRLEN + 2];

		probe_ip_url(ip, a, sizeof(a));
		if (port == 80)
			probe_bfmt(hh, sizeof(hh), "%s", a);
		else
			probe_bfmt(hh, sizeof(hh), "%s:%u", a, port);
		host = hh;
	}
	n = http_req(req, sizeof(req), method, path, host, extra);
	ipport(ip, port, what, sizeof(what));
	probe_tcp_exchange(ip, port, req, n, PR_HTTP, tmo, x);
	judge_http(r, what, x, ip->af);
	free(x);
}

static void direct_tls(const struct probe_ctx *ctx, struct probe_result *r,
		       const struct probe_ip *ip, uint16_t port, const char *sni)
{
	struct probe_xchg *x = calloc(1, sizeof(*x));
	uint8_t hello[800];
	char what[96 + PROBE_NAME_MAX];
	int tmo = T(ctx); /* before @sni is tested: it may be a field of ctx->o */
	size_t n = probe_tls_client_hello(hello, sizeof(hello), sni);

	if (!x)
		return ADD(r, PROBE_FAIL, "out of memory");
	ipport(ip, port, what, sizeof(what) - PROBE_NAME_MAX);
	if (sni)
		probe_bfmt(what + strlen(what), PROBE_NAME_MAX + 8, " (SNI %s)", sni);
	probe_tcp_exchange(ip, port, hello, n, PR_TLS, tmo, x);
	judge_tls(r, what, x, ip->af);
	free(x);
}

/* The sandbox resolver's address for @name (a literal is its own address).
 * Return: 1 with @ip, 0 none (@why says why: NXDOMAIN, no answer), -1 no
 * resolver. */
static int resolve(const struct probe_ctx *ctx, const char *name, struct probe_ip *ip, char *why,
		   size_t n)
{
	struct probe_dns_answer a;
	int rc;

	if (probe_ip_parse(name, ip) == 0)
		return 1;
	if (!ctx->have_resolver) {
		probe_bfmt(why, n, "no resolver: %s", ctx->resolver_why);
		return -1;
	}
	rc = probe_dns_query(&ctx->resolver, false, name, PROBE_DNS_A, T(ctx), &a, why, n);
	if (rc == 0 && a.tc)
		rc = probe_dns_query(&ctx->resolver, true, name, PROBE_DNS_A, T(ctx), &a, why, n);
	if (rc < 0)
		return 0;
	for (int i = 0; i < a.n_addr; i++) {
		if (a.addr[i].af == AF_INET) {
			*ip = a.addr[i];
			return 1;
		}
	}
	probe_dns_describe(&a, why, n);
	return 0;
}

/* Connect to the proxy. Return: the socket, or -1 after adding a skip part. */
static int proxy_open(const struct probe_ctx *ctx, struct probe_result *r, const char *what,
		      struct probe_xchg *x)
{
	char d[160], p[96];
	int fd;

	fd = probe_tcp_connect(&ctx->proxy_ip, ctx->proxy_port, T(ctx), x);
	if (fd >= 0)
		return fd;
	probe_xchg_describe(x, d, sizeof(d));
	ipport(&ctx->proxy_ip, ctx->proxy_port, p, sizeof(p));
	ADD(r, PROBE_SKIP, "%s: the proxy %s (%s) did not take the connection: %s", what, p,
	    ctx->proxy_var, d);
	return -1;
}

/* One absolute-form request through the proxy that must be refused. */
static void proxy_http(const struct probe_ctx *ctx, struct probe_result *r, const char *method,
		       const char *url, const char *host, const char *extra)
{
	struct probe_xchg *x = calloc(1, sizeof(*x));
	char req[1400], what[600];
	int fd;

	if (!x)
		return ADD(r, PROBE_FAIL, "out of memory");
	probe_bfmt(what, sizeof(what), "proxy %s %s", method, url);
	fd = proxy_open(ctx, r, what, x);
	if (fd >= 0) {
		size_t n = http_req(req, sizeof(req), method, url, host, extra);

		probe_tcp_talk(fd, req, n, PR_HTTP, T(ctx), x);
		close(fd);
		if (x->kind == PX_RESET || x->kind == PX_CLOSED)
			ADD(r, PROBE_PASS, "%s: the proxy closed the connection", what);
		else if (x->kind == PX_SILENT)
			ADD(r, PROBE_FAIL,
			    "%s: no answer from the proxy within %gs "
			    "(inconclusive: counted as a failure)",
			    what, x->timeout_ms / 1000.0);
		else
			judge_http_answer(r, what, x, true);
	}
	free(x);
}

/* CONNECT @auth through the proxy. Return: a tunnel (1, *fd set), not
 * established (0; @h, @x say why), or -1 (the proxy is unreachable: a skip
 * part was added). */
static int proxy_connect(const struct probe_ctx *ctx, struct probe_result *r, const char *auth,
			 const char *hosthdr, int *fd, struct probe_xchg *x,
			 struct probe_http_resp *h)
{
	char req[700], what[300];
	int k;

	probe_bfmt(what, sizeof(what), "proxy CONNECT %s", auth);
	*fd = proxy_open(ctx, r, what, x);
	if (*fd < 0)
		return -1;
	k = snprintf(req, sizeof(req),
		     "CONNECT %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: "
		     "sluice-probe\r\n\r\n",
		     auth, hosthdr ? hosthdr : auth);
	if (k < 0 || k >= (int)sizeof(req))
		k = 0; /* cannot happen: auth and hosthdr are bounded names */
	probe_tcp_talk(*fd, req, (size_t)k, PR_HTTP, T(ctx), x);
	memset(h, 0, sizeof(*h));
	if (x->kind == PX_DATA && probe_http_parse(x->data, x->len, h) == 0 && h->status / 100 == 2)
		return 1;
	close(*fd);
	*fd = -1;
	return 0;
}

/* A CONNECT that must be refused: a tunnel is the leak; inside it, @sni
 * (if any) is sent in a ClientHello to show what answers. */
static void proxy_connect_refused(const struct probe_ctx *ctx, struct probe_result *r,
				  const char *auth, const char *sni)
{
	struct probe_xchg *x = calloc(1, sizeof(*x));
	struct probe_http_resp h;
	char what[300];
	int fd, k;

	if (!x)
		return ADD(r, PROBE_FAIL, "out of memory");
	probe_bfmt(what, sizeof(what), "proxy CONNECT %s", auth);
	k = proxy_connect(ctx, r, auth, NULL, &fd, x, &h);
	if (k == 1) {
		uint8_t hello[800];
		size_t n = probe_tls_client_hello(hello, sizeof(hello), sni);
		const char *then = "";

		if (sni) {
			probe_tcp_talk(fd, hello, n, PR_TLS, T(ctx), x);
			if (x->kind == PX_DATA &&
			    probe_tls_classify((uint8_t *)x->data, x->len) == PT_SERVER_HELLO)
				then = ", and a TLS ServerHello came through it";
		}
		close(fd);
		ADD(r, PROBE_FAIL, "%s: tunnel established (HTTP %d)%s (leak)", what, h.status,
		    then);
	} else if (k == 0) {
		if (x->kind == PX_RESET || x->kind == PX_CLOSED)
			ADD(r, PROBE_PASS, "%s: the proxy closed the connection", what);
		else if (x->kind == PX_SILENT)
			ADD(r, PROBE_FAIL,
			    "%s: no answer from the proxy within %gs "
			    "(inconclusive: counted as a failure)",
			    what, x->timeout_ms / 1000.0);
		else
			judge_http_answer(r, what, x, true);
	}
	free(x);
}

/* Does HOST:PORT work from here? (the proxy if there is one, else direct;
 * port 443 is TLS, any other HTTP). @d says what happened. */
static bool works(const struct probe_ctx *ctx, const char *name, uint16_t port, char *d, size_t dn)
{
	struct probe_xchg *x = calloc(1, sizeof(*x));
	struct probe_http_resp h;
	char req[900], hh[300], why[200];
	uint8_t hello[800];
	struct probe_ip ip;
	bool ok = false;
	size_t n;
	int fd;

	if (!x) {
		probe_bfmt(d, dn, "out of memory");
		return false;
	}
	authority(name, port, port == 443 ? 443 : 80, hh, sizeof(hh));
	if (ctx->have_proxy) {
		char auth[300];

		if (port == 443) {
			struct probe_result dummy = { 0 };

			authority(name, port, 0, auth, sizeof(auth));
			if (proxy_connect(ctx, &dummy, auth, NULL, &fd, x, &h) != 1) {
				if (x->kind == PX_DATA && h.status)
					probe_bfmt(d, dn, "CONNECT %s: HTTP %d%s%s", auth, h.status,
						   h.sluice_reason[0] ? " X-Sluice-Reason: " : "",
						   h.sluice_reason);
				else if (dummy.touched)
					probe_bfmt(d, dn, "%s", dummy.detail);
				else
					probe_xchg_describe(x, d, dn);
				goto out;
			}
			n = probe_tls_client_hello(hello, sizeof(hello), name);
			probe_tcp_talk(fd, hello, n, PR_TLS, T(ctx), x);
			close(fd);
			ok = x->kind == PX_DATA &&
			     probe_tls_classify((uint8_t *)x->data, x->len) == PT_SERVER_HELLO;
			probe_bfmt(d, dn, "%s via the proxy: %s", auth,
				   ok ? "TLS ServerHello" : "no ServerHello");
			goto out;
		}
		probe_bfmt(auth, sizeof(auth), "http://%s/", hh);
		{
			struct probe_result dummy = { 0 };

			fd = proxy_open(ctx, &dummy, auth, x);
			if (fd < 0) {
				probe_bfmt(d, dn, "%s", dummy.detail);
				goto out;
			}
		}
		n = http_req(req, sizeof(req), "GET", auth, hh, NULL);
		probe_tcp_talk(fd, req, n, PR_HTTP, T(ctx), x);
		close(fd);
		probe_bfmt(why, sizeof(why), "GET %s via the proxy", auth);
	} else {
		if (resolve(ctx, name, &ip, why, sizeof(why)) != 1) {
			probe_bfmt(d, dn, "%s does not resolve: %s", name, why);
			goto out;
		}
		if (port == 443) {
			n = probe_tls_client_hello(hello, sizeof(hello), name);
			probe_tcp_exchange(&ip, port, hello, n, PR_TLS, T(ctx), x);
			ok = x->kind == PX_DATA &&
			     probe_tls_classify((uint8_t *)x->data, x->len) == PT_SERVER_HELLO;
			if (ok)
				probe_bfmt(d, dn, "%s:443: TLS ServerHello", name);
			else {
				probe_xchg_describe(x, why, sizeof(why));
				probe_bfmt(d, dn, "%s:443: no ServerHello (%s)", name, why);
			}
			goto out;
		}
		n = http_req(req, sizeof(req), "GET", "/", hh, NULL);
		probe_tcp_exchange(&ip, port, req, n, PR_HTTP, T(ctx), x);
		probe_bfmt(why, sizeof(why), "GET http://%s/", hh);
	}
	if (x->kind != PX_DATA) {
		char e[120];

		probe_xchg_describe(x, e, sizeof(e));
		probe_bfmt(d, dn, "%s: %s", why, e);
	} else if (probe_http_parse(x->data, x->len, &h) < 0) {
		probe_bfmt(d, dn, "%s: not an HTTP answer", why);
	} else if (h.sluice_reason[0]) {
		probe_bfmt(d, dn, "%s: HTTP %d X-Sluice-Reason: %s", why, h.status,
			   h.sluice_reason);
	} else {
		ok = true;
		probe_bfmt(d, dn, "%s: HTTP %d", why, h.status);
	}
out:
	free(x);
	return ok;
}

/* HOST:PORT must be refused every way: its name through the sandbox's
 * resolver and then directly, and through the proxy if there is one. */
static void refused_everywhere(const struct probe_ctx *ctx, struct probe_result *r,
			       const char *name, uint16_t port)
{
	char why[200], url[400], hh[300];
	struct probe_ip ip;
	int k;

	k = resolve(ctx, name, &ip, why, sizeof(why));
	if (k == 1) {
		if (port == 443) {
			char sni[PROBE_NAME_MAX];

			probe_bfmt(sni, sizeof(sni), "%s", name);
			direct_tls(ctx, r, &ip, port, sni);
		} else {
			authority(name, port, 80, hh, sizeof(hh));
			direct_http(ctx, r, &ip, port, "GET", "/", hh, NULL);
		}
	} else if (k == 0) {
		ADD(r, PROBE_PASS, "%s does not resolve: %s", name, why);
	} else {
		ADD(r, PROBE_SKIP, "%s: %s", name, why);
	}
	if (!ctx->have_proxy)
		return;
	if (port == 443) {
		authority(name, port, 0, hh, sizeof(hh));
		proxy_connect_refused(ctx, r, hh, name);
	} else {
		authority(name, port, 80, hh, sizeof(hh));
		probe_bfmt(url, sizeof(url), "http://%s/", hh);
		proxy_http(ctx, r, "GET", url, hh, NULL);
	}
}

static bool need_proxy(const struct probe_ctx *ctx, struct probe_result *r)
{
	if (ctx->have_proxy)
		return true;
	ADD(r, PROBE_SKIP, "%s", ctx->proxy_why);
	return false;
}

static const struct probe_hostport *need_allow(const struct probe_ctx *ctx, struct probe_result *r,
					       int want)
{
	const struct probe_hostport *h = first_allow(ctx, want);

	if (!h)
		ADD(r, PROBE_SKIP, "%s",
		    want == 1	? "needs an --expect-allow HOST:443 (served over TLS)"
		    : want == 2 ? "needs an --expect-allow HOST:PORT served "
				  "over plain HTTP (e.g. HOST:80)"
				: "needs an --expect-allow HOST");
	return h;
}

/* ---- TCP and TLS, direct ----------------------------------------------------
 */

static void c_tcp_public_literal(const struct probe_ctx *ctx, struct probe_result *r)
{
	direct_http(ctx, r, &ctx->o->public4, 80, "GET", "/", NULL, NULL);
}

static void c_tls_public_literal(const struct probe_ctx *ctx, struct probe_result *r)
{
	direct_tls(ctx, r, &ctx->o->public4, 443, NULL);
}

static void c_tcp_public_other(const struct probe_ctx *ctx, struct probe_result *r)
{
	struct probe_xchg *x = calloc(1, sizeof(*x));
	char what[96];

	if (!x)
		return ADD(r, PROBE_FAIL, "out of memory");
	ipport(&ctx->o->public4, 22, what, sizeof(what));
	/* Send nothing: a server that speaks first (SSH) answers by itself. */
	probe_tcp_exchange(&ctx->o->public4, 22, NULL, 0, PR_ANY, T(ctx), x);
	if (!judge_no_answer(r, what, x, AF_INET)) {
		if (x->kind == PX_SILENT)
			judge_silent(r, what, x);
		else
			not_http(r, what, x);
	}
	free(x);
}

static void c_tcp_public_v6(const struct probe_ctx *ctx, struct probe_result *r)
{
	direct_http(ctx, r, &ctx->o->public6, 80, "GET", "/", NULL, NULL);
}

static void c_tcp_allowed_literal(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_hostport *h = need_allow(ctx, r, 0);
	char hh[300];

	if (!h)
		return;
	if (!ctx->o->allowed_addr.af)
		return ADD(r, PROBE_SKIP, "needs --allowed-addr (the real address of %s)", h->host);
	if (h->port == 443) {
		direct_tls(ctx, r, &ctx->o->allowed_addr, 443, h->host);
	} else {
		authority(h->host, h->port, 80, hh, sizeof(hh));
		direct_http(ctx, r, &ctx->o->allowed_addr, h->port, "GET", "/", hh, NULL);
	}
}

static void c_tcp_allowed_port(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_hostport *h = need_allow(ctx, r, 0);
	char why[200], hh[300];
	struct probe_ip ip;
	int k;

	if (!h)
		return;
	k = resolve(ctx, h->host, &ip, why, sizeof(why));
	if (k != 1)
		return ADD(r, PROBE_SKIP,
			   "%s does not resolve through the sandbox's resolver "
			   "(%s): nothing to connect to",
			   h->host, why);
	authority(h->host, ctx->o->blocked_port, 80, hh, sizeof(hh));
	direct_http(ctx, r, &ip, ctx->o->blocked_port, "GET", "/", hh, NULL);
}

static void c_tcp_host_mismatch(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_hostport *h = need_allow(ctx, r, 2);
	char why[200], hh[300];
	struct probe_ip ip;

	if (!h)
		return;
	if (resolve(ctx, h->host, &ip, why, sizeof(why)) != 1)
		return ADD(r, PROBE_SKIP, "%s does not resolve through the sandbox's resolver (%s)",
			   h->host, why);
	authority(ctx->other_name, h->port, 80, hh, sizeof(hh));
	direct_http(ctx, r, &ip, h->port, "GET", "/", hh, NULL);
	if (r->v == PROBE_FAIL || r->v == PROBE_PASS) {
		char tmp[PROBE_DETAIL_MAX];

		probe_bfmt(tmp, sizeof(tmp), "%s with Host: %s: %s", h->host, hh, r->detail);
		probe_bfmt(r->detail, sizeof(r->detail), "%s", tmp);
	}
}

static void c_tls_sni_mismatch(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_hostport *h = need_allow(ctx, r, 1);
	char why[200], sni[PROBE_NAME_MAX];
	struct probe_ip ip;

	if (!h)
		return;
	if (resolve(ctx, h->host, &ip, why, sizeof(why)) != 1)
		return ADD(r, PROBE_SKIP, "%s does not resolve through the sandbox's resolver (%s)",
			   h->host, why);
	probe_bfmt(sni, sizeof(sni), "%s", ctx->other_name);
	direct_tls(ctx, r, &ip, 443, sni);
	if (r->v != PROBE_SKIP) {
		char tmp[PROBE_DETAIL_MAX];

		probe_bfmt(tmp, sizeof(tmp), "address of %s, %s", h->host, r->detail);
		probe_bfmt(r->detail, sizeof(r->detail), "%s", tmp);
	}
}

static void c_tcp_private_v4(const struct probe_ctx *ctx, struct probe_result *r)
{
	for (int i = 0; i < ctx->o->n_private4; i++)
		direct_http(ctx, r, &ctx->o->private4[i], 80, "GET", "/", NULL, NULL);
}

static void c_tcp_private_v6(const struct probe_ctx *ctx, struct probe_result *r)
{
	direct_http(ctx, r, &ctx->o->private6, 80, "GET", "/", NULL, NULL);
}

/* The same address: the family's bytes only, not the rest of the union. */
static bool ip_same(const struct probe_ip *a, const struct probe_ip *b)
{
	if (a->af != b->af)
		return false;
	if (a->af == AF_INET)
		return a->u.v4.s_addr == b->u.v4.s_addr;
	return !memcmp(&a->u.v6, &b->u.v6, sizeof(a->u.v6));
}

static void c_gw_direct_ports(const struct probe_ctx *ctx, struct probe_result *r)
{
	int i, tried = 0;

	if (!ctx->have_gateway)
		return ADD(r, PROBE_SKIP, "no default route with a gateway here, and no --gateway");
	for (i = 0; i < ctx->o->n_gw_ports; i++) {
		uint16_t p = ctx->o->gw_ports[i];

		if (p == 53 || (ctx->have_proxy && p == ctx->proxy_port &&
				ip_same(&ctx->proxy_ip, &ctx->gateway)))
			continue; /* the resolver and the proxy are meant to be
				     there */
		direct_http(ctx, r, &ctx->gateway, p, "GET", "/", NULL, NULL);
		tried++;
	}
	if (!tried)
		ADD(r, PROBE_SKIP,
		    "no gateway port left to try (53 and the proxy's are left "
		    "out)");
}

/* ---- UDP and ICMP
 * ------------------------------------------------------------ */

static const struct probe_ip *udp_target(const struct probe_ctx *ctx)
{
	return ctx->o->udp_addr.af ? &ctx->o->udp_addr : &ctx->o->public4;
}

static void c_udp_53_out(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_ip *ip = udp_target(ctx);
	struct probe_dns_answer a;
	char what[96], why[200];
	int rc;

	ipport(ip, 53, what, sizeof(what));
	rc = probe_dns_query(ip, false, ctx->other_name, PROBE_DNS_A, T(ctx), &a, why, sizeof(why));
	if (rc == 0) {
		probe_dns_describe(&a, why, sizeof(why));
		ADD(r, a.n_addr || a.n_data ? PROBE_FAIL : PROBE_PASS, "%s: %s for %s%s", what, why,
		    ctx->other_name, a.n_addr || a.n_data ? " (leak)" : ": no address came back");
	} else if (rc == -EBADMSG) {
		ADD(r, PROBE_FAIL, "%s: %s: the path is open (leak)", what, why);
	} else if (rc == -ENETUNREACH && ip->af == AF_INET6) {
		ADD(r, PROBE_SKIP, "%s: no IPv6 route here", what);
	} else {
		ADD(r, PROBE_PASS, "%s: %s", what, why);
	}
}

static void c_udp_443_quic(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_ip *ip = udp_target(ctx);
	struct probe_xchg *x = calloc(1, sizeof(*x));
	uint8_t d[1200];
	char what[96];

	if (!x)
		return ADD(r, PROBE_FAIL, "out of memory");
	/* A QUIC v1 Initial's long header (the rest random, padded to 1200
	 * bytes as RFC 9000 asks): a QUIC server answers with a Version
	 * Negotiation, Retry or Initial of its own. */
	probe_random(d, sizeof(d));
	d[0] = 0xc3;
	d[1] = d[2] = d[3] = 0;
	d[4] = 1;
	d[5] = 8;  /* DCID length */
	d[14] = 0; /* SCID length */
	d[15] = 0; /* token length */
	d[16] = 0x40 | ((sizeof(d) - 18) >> 8);
	d[17] = (uint8_t)(sizeof(d) - 18);
	ipport(ip, 443, what, sizeof(what));
	probe_udp_exchange(ip, 443, d, sizeof(d), T(ctx), x);
	judge_dgram(r, what, x, ip->af, "a reply to a QUIC Initial");
	free(x);
}

static void c_udp_random_port(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_ip *ip = udp_target(ctx);
	struct probe_xchg *x = calloc(1, sizeof(*x));
	uint16_t port = ctx->o->udp_port;
	char what[96];

	if (!x)
		return ADD(r, PROBE_FAIL, "out of memory");
	if (!port) {
		probe_random(&port, sizeof(port));
		port = (uint16_t)(20000 + port % 40000);
	}
	ipport(ip, port, what, sizeof(what));
	probe_udp_exchange(ip, port, "sluice-probe\n", 13, T(ctx), x);
	judge_dgram(r, what, x, ip->af, "a reply");
	free(x);
}

static void icmp(const struct probe_ctx *ctx, struct probe_result *r, const struct probe_ip *ip,
		 bool raw)
{
	struct probe_xchg *x = calloc(1, sizeof(*x));
	char what[96];
	int rc;

	if (!x)
		return ADD(r, PROBE_FAIL, "out of memory");
	probe_ip_str(ip, what, sizeof(what));
	rc = probe_icmp_echo(ip, raw, T(ctx), x);
	if (rc == -EPERM || rc == -EACCES)
		ADD(r, PROBE_SKIP, "%s",
		    raw ? "raw sockets are not permitted here (EPERM: no "
			  "CAP_NET_RAW): nothing can send raw packets with "
			  "these privileges"
			: "unprivileged ICMP sockets are not permitted here "
			  "(net.ipv4.ping_group_range): nothing can ping with "
			  "these privileges");
	else if (rc < 0)
		ADD(r, PROBE_SKIP, "cannot make the socket: %s", strerror(-rc));
	else
		judge_dgram(r, what, x, ip->af, "an ICMP echo reply");
	free(x);
}

static void c_icmp_echo(const struct probe_ctx *ctx, struct probe_result *r)
{
	icmp(ctx, r, &ctx->o->public4, false);
}

static void c_icmp_raw(const struct probe_ctx *ctx, struct probe_result *r)
{
	icmp(ctx, r, &ctx->o->public4, true);
}

static void c_icmp6_echo(const struct probe_ctx *ctx, struct probe_result *r)
{
	icmp(ctx, r, &ctx->o->public6, false);
}

/* ---- DNS
 * ----------------------------------------------------------------------- */

static void direct_dns(const struct probe_ctx *ctx, struct probe_result *r, bool tcp,
		       const char *name)
{
	for (int i = 0; i < ctx->o->n_resolvers; i++) {
		const struct probe_ip *s = &ctx->o->resolvers[i];
		struct probe_dns_answer a;
		char what[96], why[200];
		int rc;

		ipport(s, 53, what, sizeof(what));
		rc = probe_dns_query(s, tcp, name, PROBE_DNS_A, T(ctx), &a, why, sizeof(why));
		if (rc == 0) {
			probe_dns_describe(&a, why, sizeof(why));
			if (a.n_addr || a.n_data)
				ADD(r, PROBE_FAIL, "%s/%s: %s for %s (leak)", what,
				    tcp ? "tcp" : "udp", why, name);
			else
				ADD(r, PROBE_PASS, "%s/%s: %s for %s", what, tcp ? "tcp" : "udp",
				    why, name);
		} else if (rc == -EBADMSG) {
			ADD(r, PROBE_FAIL, "%s/%s: %s: a host was reached (leak)", what,
			    tcp ? "tcp" : "udp", why);
		} else if (rc == -ENETUNREACH && s->af == AF_INET6) {
			ADD(r, PROBE_SKIP, "%s: no IPv6 route here", what);
		} else {
			ADD(r, PROBE_PASS, "%s/%s: %s", what, tcp ? "tcp" : "udp", why);
		}
	}
}

static void c_dns_direct_udp(const struct probe_ctx *ctx, struct probe_result *r)
{
	direct_dns(ctx, r, false, ctx->other_name);
}

static void c_dns_direct_tcp(const struct probe_ctx *ctx, struct probe_result *r)
{
	direct_dns(ctx, r, true, ctx->other_name);
}

static void c_dns_dot(const struct probe_ctx *ctx, struct probe_result *r)
{
	for (int i = 0; i < ctx->o->n_dot; i++)
		direct_tls(ctx, r, &ctx->o->dot[i].ip, ctx->o->dot[i].port, NULL);
}

static void c_dns_doh(const struct probe_ctx *ctx, struct probe_result *r)
{
	char why[200];
	struct probe_ip ip;
	int k = resolve(ctx, ctx->o->doh_host, &ip, why, sizeof(why));

	if (k == 1)
		direct_tls(ctx, r, &ip, 443, ctx->o->doh_host);
	else if (k == 0)
		ADD(r, PROBE_PASS, "%s does not resolve: %s", ctx->o->doh_host, why);
	else
		ADD(r, PROBE_SKIP, "%s: %s", ctx->o->doh_host, why);
	direct_tls(ctx, r, &ctx->o->doh_addr, 443, ctx->o->doh_host);
}

static void c_proxy_doh(const struct probe_ctx *ctx, struct probe_result *r)
{
	char auth[300];

	if (!need_proxy(ctx, r))
		return;
	authority(ctx->o->doh_host, 443, 0, auth, sizeof(auth));
	proxy_connect_refused(ctx, r, auth, ctx->o->doh_host);
}

/* A query through the sandbox's own resolver that must return no data of
 * @qtype. */
static void no_data(const struct probe_ctx *ctx, struct probe_result *r, uint16_t qtype)
{
	const char *names[2];
	char tb[16];
	int n = 0, i;

	if (!ctx->have_resolver)
		return ADD(r, PROBE_SKIP, "no resolver: %s", ctx->resolver_why);
	if (ctx->o->n_allow && probe_ip_parse(ctx->o->allow[0].host, &(struct probe_ip){ 0 }) < 0)
		names[n++] = ctx->o->allow[0].host;
	if (ctx->o->canary[0])
		names[n++] = ctx->o->canary;
	if (!n)
		return ADD(r, PROBE_SKIP,
			   "needs --expect-allow HOST or --canary NAME to ask about");
	for (i = 0; i < n; i++) {
		struct probe_dns_answer a;
		char why[200];
		int rc = probe_dns_query(&ctx->resolver, false, names[i], qtype, T(ctx), &a, why,
					 sizeof(why));

		if (rc == 0 && a.tc)
			rc = probe_dns_query(&ctx->resolver, true, names[i], qtype, T(ctx), &a, why,
					     sizeof(why));
		if (rc == 0) {
			probe_dns_describe(&a, why, sizeof(why));
			ADD(r, a.n_data ? PROBE_FAIL : PROBE_PASS, "%s %s: %s%s", names[i],
			    probe_dns_type_name(qtype, tb, sizeof(tb)), why,
			    a.n_data ? " (data came back: a channel through "
				       "the resolver)"
				     : "");
		} else {
			ADD(r, PROBE_PASS, "%s %s: %s", names[i],
			    probe_dns_type_name(qtype, tb, sizeof(tb)), why);
		}
	}
}

static void c_dns_txt(const struct probe_ctx *ctx, struct probe_result *r)
{
	no_data(ctx, r, PROBE_DNS_TXT);
}

static void c_dns_null(const struct probe_ctx *ctx, struct probe_result *r)
{
	no_data(ctx, r, PROBE_DNS_NULL);
}

static void c_dns_any(const struct probe_ctx *ctx, struct probe_result *r)
{
	no_data(ctx, r, PROBE_DNS_ANY);
}

/* A fresh label under the canary: a query for it that gets out is seen by
 * the canary's authoritative server (and carries whatever the label says). */
static void canary_label(const struct probe_ctx *ctx, char *buf, size_t n)
{
	uint8_t rnd[8];

	probe_random(rnd, sizeof(rnd));
	probe_bfmt(buf, n, "sluice-probe-%02x%02x%02x%02x%02x%02x%02x%02x.%s", rnd[0], rnd[1],
		   rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7], ctx->o->canary);
}

static void canary_judge(struct probe_result *r, const char *via, const char *label, int rc,
			 const struct probe_dns_answer *a, const char *why)
{
	char d[200];

	if (rc == 0) {
		probe_dns_describe(a, d, sizeof(d));
		/* NOERROR for a label nobody has seen before: whoever answered
		 * knows the canary's zone, so the query got there. */
		if (a->n_addr || a->n_data || a->rcode == 0)
			ADD(r, PROBE_FAIL,
			    "%s: %s for %s: the query reached the canary's "
			    "server (leak)",
			    via, d, label);
		else
			ADD(r, PROBE_PASS, "%s: %s for %s (its server's log must not show it)", via,
			    d, label);
	} else if (rc == -EBADMSG) {
		ADD(r, PROBE_FAIL, "%s: %s: a host was reached (leak)", via, why);
	} else {
		ADD(r, PROBE_PASS, "%s: %s for %s", via, why, label);
	}
}

static void c_dns_canary_exfil(const struct probe_ctx *ctx, struct probe_result *r)
{
	struct probe_dns_answer a;
	char label[PROBE_NAME_MAX + 40], why[200], via[80];
	int rc;

	if (!ctx->o->canary[0])
		return ADD(r, PROBE_SKIP, "needs --canary NAME");
	if (!ctx->have_resolver)
		return ADD(r, PROBE_SKIP, "no resolver: %s", ctx->resolver_why);
	if (strlen(ctx->o->canary) > 200)
		return ADD(r, PROBE_SKIP, "--canary is too long for a label under it");
	canary_label(ctx, label, sizeof(label));
	ipport(&ctx->resolver, 53, via, sizeof(via));
	rc = probe_dns_query(&ctx->resolver, false, label, PROBE_DNS_A, T(ctx), &a, why,
			     sizeof(why));
	canary_judge(r, via, label, rc, &a, why);
}

static void c_dns_canary_direct(const struct probe_ctx *ctx, struct probe_result *r)
{
	if (!ctx->o->canary[0])
		return ADD(r, PROBE_SKIP, "needs --canary NAME");
	if (strlen(ctx->o->canary) > 200)
		return ADD(r, PROBE_SKIP, "--canary is too long for a label under it");
	for (int i = 0; i < ctx->o->n_resolvers; i++) {
		struct probe_dns_answer a;
		char label[PROBE_NAME_MAX + 40], why[200], via[80];
		int rc;

		canary_label(ctx, label, sizeof(label));
		ipport(&ctx->o->resolvers[i], 53, via, sizeof(via));
		rc = probe_dns_query(&ctx->o->resolvers[i], false, label, PROBE_DNS_A, T(ctx), &a,
				     why, sizeof(why));
		canary_judge(r, via, label, rc, &a, why);
	}
}

/* ---- metadata
 * ----------------------------------------------------------------------- */

static void c_meta_imds_v4(const struct probe_ctx *ctx, struct probe_result *r)
{
	direct_http(ctx, r, &ctx->o->meta4, 80, "GET", "/latest/meta-data/", NULL, NULL);
}

static void c_meta_imds_v2(const struct probe_ctx *ctx, struct probe_result *r)
{
	direct_http(ctx, r, &ctx->o->meta4, 80, "PUT", "/latest/api/token", NULL,
		    "X-aws-ec2-metadata-token-ttl-seconds: "
		    "21600\r\nContent-Length: 0\r\n");
}

static void c_meta_imds_v6(const struct probe_ctx *ctx, struct probe_result *r)
{
	direct_http(ctx, r, &ctx->o->meta6, 80, "GET", "/latest/meta-data/", NULL, NULL);
}

static void c_meta_ecs(const struct probe_ctx *ctx, struct probe_result *r)
{
	direct_http(ctx, r, &ctx->o->ecs4, 80, "GET", "/v2/metadata", NULL, NULL);
}

static void c_meta_alibaba(const struct probe_ctx *ctx, struct probe_result *r)
{
	direct_http(ctx, r, &ctx->o->alibaba4, 80, "GET", "/latest/meta-data/", NULL, NULL);
}

static void c_meta_name(const struct probe_ctx *ctx, struct probe_result *r)
{
	const char *name = ctx->o->metadata_name;
	struct probe_ip ip;
	char why[200];
	int k = resolve(ctx, name, &ip, why, sizeof(why));

	if (k == 1)
		direct_http(ctx, r, &ip, 80, "GET", "/computeMetadata/v1/", name,
			    "Metadata-Flavor: Google\r\n");
	else if (k == 0)
		ADD(r, PROBE_PASS, "%s does not resolve: %s", name, why);
	else
		ADD(r, PROBE_SKIP, "%s: %s", name, why);
}

static void proxy_literal(const struct probe_ctx *ctx, struct probe_result *r,
			  const struct probe_ip *ip, const char *method, const char *path,
			  const char *extra)
{
	char h[INET6_ADDRSTRLEN + 2], url[700];

	probe_ip_url(ip, h, sizeof(h));
	probe_bfmt(url, sizeof(url), "http://%s%s", h, path);
	proxy_http(ctx, r, method, url, h, extra);
}

static void c_proxy_metadata(const struct probe_ctx *ctx, struct probe_result *r)
{
	char url[400];

	if (!need_proxy(ctx, r))
		return;
	proxy_literal(ctx, r, &ctx->o->meta4, "GET", "/latest/meta-data/", NULL);
	proxy_literal(ctx, r, &ctx->o->meta4, "PUT", "/latest/api/token",
		      "X-aws-ec2-metadata-token-ttl-seconds: "
		      "21600\r\nContent-Length: 0\r\n");
	proxy_literal(ctx, r, &ctx->o->ecs4, "GET", "/v2/metadata", NULL);
	proxy_literal(ctx, r, &ctx->o->alibaba4, "GET", "/latest/meta-data/", NULL);
	proxy_literal(ctx, r, &ctx->o->meta6, "GET", "/latest/meta-data/", NULL);
	probe_bfmt(url, sizeof(url), "http://%s/computeMetadata/v1/", ctx->o->metadata_name);
	proxy_http(ctx, r, "GET", url, ctx->o->metadata_name, "Metadata-Flavor: Google\r\n");
}

static void spellings(const struct probe_ctx *ctx, struct probe_result *r, const struct in_addr *a,
		      const int *which, int n, const char *path)
{
	char sp[PROBE_N_SPELL][40], url[200];

	probe_v4_spellings(a, sp);
	for (int i = 0; i < n; i++) {
		probe_bfmt(url, sizeof(url), "http://%s%s", sp[which[i]], path);
		proxy_http(ctx, r, "GET", url, sp[which[i]], NULL);
	}
}

static void c_proxy_meta_spellings(const struct probe_ctx *ctx, struct probe_result *r)
{
	static const int all[] = { PROBE_SPELL_DEC,  PROBE_SPELL_OCT,  PROBE_SPELL_OCT1,
				   PROBE_SPELL_HEX,  PROBE_SPELL_HEX1, PROBE_SPELL_HEXWORD,
				   PROBE_SPELL_SHORT };

	if (!need_proxy(ctx, r))
		return;
	spellings(ctx, r, &ctx->o->meta4.u.v4, all, (int)(sizeof(all) / sizeof(all[0])),
		  "/latest/meta-data/");
}

/* ---- through the proxy
 * -------------------------------------------------------------- */

static void c_proxy_public_literal(const struct probe_ctx *ctx, struct probe_result *r)
{
	char a[INET6_ADDRSTRLEN + 8];

	if (!need_proxy(ctx, r))
		return;
	proxy_literal(ctx, r, &ctx->o->public4, "GET", "/", NULL);
	ipport(&ctx->o->public4, 443, a, sizeof(a));
	proxy_connect_refused(ctx, r, a, NULL);
	proxy_literal(ctx, r, &ctx->o->public6, "GET", "/", NULL);
}

static void c_proxy_allowed_literal(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_hostport *h;
	char a[INET6_ADDRSTRLEN + 8];

	if (!need_proxy(ctx, r) || !(h = need_allow(ctx, r, 0)))
		return;
	if (!ctx->o->allowed_addr.af)
		return ADD(r, PROBE_SKIP, "needs --allowed-addr (the real address of %s)", h->host);
	proxy_literal(ctx, r, &ctx->o->allowed_addr, "GET", "/", NULL);
	ipport(&ctx->o->allowed_addr, 443, a, sizeof(a));
	proxy_connect_refused(ctx, r, a, h->host);
}

static void c_proxy_allowed_port(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_hostport *h;
	char hh[300], url[400];

	if (!need_proxy(ctx, r) || !(h = need_allow(ctx, r, 0)))
		return;
	authority(h->host, ctx->o->blocked_port, 80, hh, sizeof(hh));
	probe_bfmt(url, sizeof(url), "http://%s/", hh);
	proxy_http(ctx, r, "GET", url, hh, NULL);
	proxy_connect_refused(ctx, r, hh, NULL);
}

static void c_proxy_private(const struct probe_ctx *ctx, struct probe_result *r)
{
	if (!need_proxy(ctx, r))
		return;
	for (int i = 0; i < ctx->o->n_private4; i++)
		proxy_literal(ctx, r, &ctx->o->private4[i], "GET", "/", NULL);
	proxy_literal(ctx, r, &ctx->o->private6, "GET", "/", NULL);
}

static void loopback(const struct probe_ctx *ctx, struct probe_result *r, const char *host)
{
	char url[100];

	if (!need_proxy(ctx, r))
		return;
	probe_bfmt(url, sizeof(url), "http://%s/", host);
	proxy_http(ctx, r, "GET", url, host, NULL);
}

static void c_proxy_loop_127_1(const struct probe_ctx *ctx, struct probe_result *r)
{
	loopback(ctx, r, "127.1");
}

static void c_proxy_loop_zero(const struct probe_ctx *ctx, struct probe_result *r)
{
	loopback(ctx, r, "0.0.0.0");
}

static void c_proxy_loop_v6(const struct probe_ctx *ctx, struct probe_result *r)
{
	loopback(ctx, r, "[::1]");
}

static void c_proxy_loop_mapped(const struct probe_ctx *ctx, struct probe_result *r)
{
	loopback(ctx, r, "[::ffff:127.0.0.1]");
}

static void c_proxy_loop_name(const struct probe_ctx *ctx, struct probe_result *r)
{
	loopback(ctx, r, "localhost");
}

static void c_proxy_spell_decimal(const struct probe_ctx *ctx, struct probe_result *r)
{
	static const int w[] = { PROBE_SPELL_DEC };
	struct in_addr lo = { htonl(0x7f000001) };

	if (need_proxy(ctx, r))
		spellings(ctx, r, &lo, w, (int)(sizeof(w) / sizeof(w[0])), "/");
}

static void c_proxy_spell_octal(const struct probe_ctx *ctx, struct probe_result *r)
{
	static const int w[] = { PROBE_SPELL_OCT1, PROBE_SPELL_OCT, PROBE_SPELL_OCTWORD };
	struct in_addr lo = { htonl(0x7f000001) };

	if (need_proxy(ctx, r))
		spellings(ctx, r, &lo, w, (int)(sizeof(w) / sizeof(w[0])), "/");
}

static void c_proxy_spell_hex(const struct probe_ctx *ctx, struct probe_result *r)
{
	static const int w[] = { PROBE_SPELL_HEX1, PROBE_SPELL_HEX, PROBE_SPELL_HEXWORD };
	struct in_addr lo = { htonl(0x7f000001) };

	if (need_proxy(ctx, r))
		spellings(ctx, r, &lo, w, (int)(sizeof(w) / sizeof(w[0])), "/");
}

static void c_proxy_host_mismatch(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_hostport *h;
	char hh[300], other[300], url[400];

	if (!need_proxy(ctx, r) || !(h = need_allow(ctx, r, 2)))
		return;
	authority(h->host, h->port, 80, hh, sizeof(hh));
	authority(ctx->other_name, h->port, 80, other, sizeof(other));
	probe_bfmt(url, sizeof(url), "http://%s/", hh);
	proxy_http(ctx, r, "GET", url, other, NULL);
	if (r->v != PROBE_SKIP) {
		char tmp[PROBE_DETAIL_MAX];

		probe_bfmt(tmp, sizeof(tmp), "with Host: %s: %s", other, r->detail);
		probe_bfmt(r->detail, sizeof(r->detail), "%s", tmp);
	}
}

/* Inside a tunnel to an allowed host: a request for another host (HTTP), or
 * a ClientHello naming another host (TLS). The tunnel itself is fine; what
 * goes through it must not reach the other host's site. */
static void c_proxy_connect_host(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_hostport *h;
	struct probe_xchg *x;
	struct probe_http_resp resp;
	char auth[300], other[300], req[700], what[700];
	int fd, k;
	size_t n;

	if (!need_proxy(ctx, r) || !(h = need_allow(ctx, r, 2)))
		return;
	x = calloc(1, sizeof(*x));
	if (!x)
		return ADD(r, PROBE_FAIL, "out of memory");
	authority(h->host, h->port, 0, auth, sizeof(auth));
	authority(ctx->other_name, h->port, 80, other, sizeof(other));
	probe_bfmt(what, sizeof(what), "CONNECT %s (Host: %s), then GET / with Host: %s", auth,
		   other, other);
	k = proxy_connect(ctx, r, auth, other, &fd, x, &resp);
	if (k == 0) {
		if (x->kind == PX_DATA && resp.status)
			ADD(r, PROBE_PASS, "%s: the CONNECT was refused: HTTP %d%s%s", what,
			    resp.status, resp.sluice_reason[0] ? " X-Sluice-Reason: " : "",
			    resp.sluice_reason);
		else
			ADD(r, PROBE_PASS, "%s: the CONNECT was not established", what);
	} else if (k == 1) {
		n = http_req(req, sizeof(req), "GET", "/", other, NULL);
		probe_tcp_talk(fd, req, n, PR_HTTP, T(ctx), x);
		close(fd);
		if (x->kind == PX_RESET || x->kind == PX_CLOSED)
			ADD(r, PROBE_PASS, "%s: the tunnel was closed", what);
		else if (x->kind == PX_SILENT)
			judge_silent(r, what, x);
		else
			judge_http_answer(r, what, x, false);
	}
	free(x);
}

static void c_proxy_sni_mismatch(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_hostport *h;
	struct probe_xchg *x;
	struct probe_http_resp resp;
	char auth[300], what[700];
	uint8_t hello[800];
	int fd, k;
	size_t n;

	if (!need_proxy(ctx, r) || !(h = need_allow(ctx, r, 1)))
		return;
	x = calloc(1, sizeof(*x));
	if (!x)
		return ADD(r, PROBE_FAIL, "out of memory");
	authority(h->host, 443, 0, auth, sizeof(auth));
	probe_bfmt(what, sizeof(what), "CONNECT %s, then a ClientHello for SNI %s", auth,
		   ctx->other_name);
	k = proxy_connect(ctx, r, auth, NULL, &fd, x, &resp);
	if (k == 0) {
		ADD(r, PROBE_SKIP, "CONNECT %s was not established (HTTP %d %s): cannot test", auth,
		    resp.status, resp.sluice_reason);
	} else if (k == 1) {
		n = probe_tls_client_hello(hello, sizeof(hello), ctx->other_name);
		probe_tcp_talk(fd, hello, n, PR_TLS, T(ctx), x);
		close(fd);
		if (x->kind == PX_RESET || x->kind == PX_CLOSED)
			ADD(r, PROBE_PASS, "%s: the tunnel was closed: no ServerHello", what);
		else if (x->kind == PX_SILENT)
			judge_silent(r, what, x);
		else
			judge_tls_answer(r, what, x);
	}
	free(x);
}

static void c_proxy_self(const struct probe_ctx *ctx, struct probe_result *r)
{
	char h[INET6_ADDRSTRLEN + 2], hh[80], url[120];

	if (!need_proxy(ctx, r))
		return;
	probe_ip_url(&ctx->proxy_ip, h, sizeof(h));
	probe_bfmt(hh, sizeof(hh), "%s:%u", h, ctx->proxy_port);
	probe_bfmt(url, sizeof(url), "http://%s/", hh);
	proxy_http(ctx, r, "GET", url, hh, NULL);
	proxy_connect_refused(ctx, r, hh, NULL);
	if (ctx->have_gateway) {
		probe_ip_url(&ctx->gateway, h, sizeof(h));
		for (int i = 0; i < ctx->o->n_gw_ports; i++) {
			probe_bfmt(hh, sizeof(hh), "%s:%u", h, ctx->o->gw_ports[i]);
			probe_bfmt(url, sizeof(url), "http://%s/", hh);
			proxy_http(ctx, r, "GET", url, hh, NULL);
		}
	}
}

/* ---- redirects
 * ---------------------------------------------------------------------- */

/* One GET of @u, through the proxy if there is one; @x holds the answer. 0 or
 * -1 (@d says why). */
static int fetch(const struct probe_ctx *ctx, const struct probe_url *u, struct probe_xchg *x,
		 char *d, size_t dn)
{
	char req[1400], hh[300], url[1000], why[200];
	struct probe_ip ip;
	size_t n;
	int fd;

	if (u->https) { /* the probe speaks no TLS beyond a ClientHello */
		probe_bfmt(d, dn, "https:// URLs need TLS, which the probe does not speak");
		return -1;
	}
	authority(u->host, u->port, 80, hh, sizeof(hh));
	if (ctx->have_proxy) {
		probe_bfmt(url, sizeof(url), "http://%s%s", hh, u->path);
		fd = probe_tcp_connect(&ctx->proxy_ip, ctx->proxy_port, T(ctx), x);
		if (fd < 0) {
			probe_xchg_describe(x, why, sizeof(why));
			probe_bfmt(d, dn, "the proxy did not take the connection: %s", why);
			return -1;
		}
		n = http_req(req, sizeof(req), "GET", url, hh, NULL);
		probe_tcp_talk(fd, req, n, PR_HTTP, T(ctx), x);
		close(fd);
		return 0;
	}
	if (u->host_is_ip)
		ip = u->ip;
	else if (resolve(ctx, u->host, &ip, why, sizeof(why)) != 1) {
		probe_bfmt(d, dn, "%s does not resolve: %s", u->host, why);
		return -1;
	}
	n = http_req(req, sizeof(req), "GET", u->path, hh, NULL);
	probe_tcp_exchange(&ip, u->port, req, n, PR_HTTP, T(ctx), x);
	return 0;
}

static void c_redirect(const struct probe_ctx *ctx, struct probe_result *r)
{
	struct probe_xchg *x;
	struct probe_http_resp h;
	struct probe_url u, to;
	char d[300], what[1100];

	if (!ctx->o->redirect_url[0])
		return ADD(r, PROBE_SKIP,
			   "needs --redirect-url (a URL on an allowed host "
			   "that answers 30x to a private or outside URL)");
	if (probe_url_parse(ctx->o->redirect_url, &u) < 0 || u.https)
		return ADD(r, PROBE_SKIP,
			   "--redirect-url must be an http:// URL (the probe "
			   "speaks no TLS beyond the ClientHello)");
	x = calloc(1, sizeof(*x));
	if (!x)
		return ADD(r, PROBE_FAIL, "out of memory");
	probe_bfmt(what, sizeof(what), "GET %s%s", ctx->o->redirect_url,
		   ctx->have_proxy ? " via the proxy" : "");
	if (fetch(ctx, &u, x, d, sizeof(d)) < 0) {
		ADD(r, PROBE_FAIL, "%s: cannot test: %s", what, d);
	} else if (x->kind != PX_DATA || probe_http_parse(x->data, x->len, &h) < 0) {
		probe_xchg_describe(x, d, sizeof(d));
		ADD(r, PROBE_FAIL, "%s: cannot test: no HTTP answer (%s)", what, d);
	} else if (h.sluice_reason[0] && strstr(h.sluice_reason, "redirect")) {
		ADD(r, PROBE_PASS, "%s: the redirect was refused: HTTP %d X-Sluice-Reason: %s",
		    what, h.status, h.sluice_reason);
	} else if (h.status / 100 != 3 || !h.location[0]) {
		ADD(r, PROBE_FAIL,
		    "%s: cannot test: HTTP %d%s%s, not a redirect "
		    "(--redirect-url must be on an allowed host and answer "
		    "30x)",
		    what, h.status, h.sluice_reason[0] ? " X-Sluice-Reason: " : "",
		    h.sluice_reason);
	} else if (probe_url_parse(h.location, &to) < 0 || to.https) {
		ADD(r, PROBE_FAIL,
		    "%s: HTTP %d to `%s` came through (not refused; the probe "
		    "cannot follow it)",
		    what, h.status, h.location);
	} else {
		/* The 3xx came through: following it must be refused. */
		struct probe_result f = { 0 };
		char hh[300], url[1000];
		int k;

		authority(to.host, to.port, 80, hh, sizeof(hh));
		if (ctx->have_proxy) {
			probe_bfmt(url, sizeof(url), "http://%s%s", hh, to.path);
			proxy_http(ctx, &f, "GET", url, hh, NULL);
		} else {
			struct probe_ip ip;

			k = to.host_is_ip ? 1 : resolve(ctx, to.host, &ip, d, sizeof(d));
			if (to.host_is_ip)
				ip = to.ip;
			if (k == 1)
				direct_http(ctx, &f, &ip, to.port, "GET", to.path, hh, NULL);
			else
				ADD(&f, PROBE_PASS, "%s does not resolve: %s", to.host, d);
		}
		ADD(r, f.v == PROBE_SKIP ? PROBE_FAIL : f.v,
		    "%s: HTTP %d to %s came through, and following it: %s", what, h.status,
		    h.location, f.detail);
	}
	free(x);
}

/* ---- names at the edge of the allowlist
 * ------------------------------------------------ */

static void c_name_suffix(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_hostport *h = need_allow(ctx, r, 0);
	char name[600];

	if (!h)
		return;
	probe_bfmt(name, sizeof(name), "%s.%s", h->host, ctx->o->edge_suffix);
	if (probe_name_check(name) < 0)
		return ADD(r, PROBE_SKIP, "%s is too long a name", name);
	refused_everywhere(ctx, r, name, h->port);
}

static void c_name_prefix(const struct probe_ctx *ctx, struct probe_result *r)
{
	const struct probe_hostport *h = need_allow(ctx, r, 0);
	char name[600];

	if (!h)
		return;
	probe_bfmt(name, sizeof(name), "%s%s", ctx->o->edge_prefix, h->host);
	if (probe_name_check(name) < 0)
		return ADD(r, PROBE_SKIP, "%s is not a usable name", name);
	refused_everywhere(ctx, r, name, h->port);
}

static void variant(const char *name, bool dot, char *out, size_t n)
{
	size_t i, len = strlen(name);

	if (dot) {
		probe_bfmt(out, n, name[len - 1] == '.' ? "%s" : "%s.", name);
		return;
	}
	for (i = 0; i < len && i + 1 < n; i++)
		out[i] = (char)((i % 2) ? toupper((unsigned char)name[i])
					: tolower((unsigned char)name[i]));
	out[i] = '\0';
}

/* The trailing-dot or mixed-case spelling of a name behaves like the name:
 * an allowed one still works where the name works, a denied one is refused. */
static void name_variants(const struct probe_ctx *ctx, struct probe_result *r, bool dot)
{
	const struct probe_hostport *h = first_allow(ctx, 0);
	char v[PROBE_NAME_MAX + 2];
	int i;

	if (!h && !ctx->o->n_deny)
		return ADD(r, PROBE_SKIP, "needs --expect-allow HOST or --expect-deny HOST");
	if (h && probe_ip_parse(h->host, &(struct probe_ip){ 0 }) < 0) {
		char d1[300], d2[300];
		bool w1, w2;

		variant(h->host, dot, v, sizeof(v));
		w1 = works(ctx, h->host, h->port, d1, sizeof(d1));
		w2 = works(ctx, v, h->port, d2, sizeof(d2));
		if (w1 == w2)
			ADD(r, PROBE_PASS, "%s behaves like %s (%s)", v, h->host,
			    w1 ? "both work" : "both refused");
		else if (w2)
			ADD(r, PROBE_FAIL,
			    "%s works while %s is refused (a way around the "
			    "policy): %s",
			    v, h->host, d2);
		else
			ADD(r, PROBE_FAIL,
			    "%s is refused while %s works (the name is not "
			    "normalized): %s",
			    v, h->host, d2);
	}
	for (i = 0; i < ctx->o->n_deny; i++) {
		if (probe_ip_parse(ctx->o->deny[i].host, &(struct probe_ip){ 0 }) == 0)
			continue;
		variant(ctx->o->deny[i].host, dot, v, sizeof(v));
		refused_everywhere(ctx, r, v, ctx->o->deny[i].port);
	}
}

static void c_name_trailing_dot(const struct probe_ctx *ctx, struct probe_result *r)
{
	name_variants(ctx, r, true);
}

static void c_name_mixed_case(const struct probe_ctx *ctx, struct probe_result *r)
{
	name_variants(ctx, r, false);
}

/* ---- the environment
 * ------------------------------------------------------------------- */

extern char **environ;

/* Names that look like they hold a credential. */
static bool secret_name(const char *name, size_t n)
{
	static const char *const parts[] = { "TOKEN",  "SECRET",     "KEY",	"PASSWORD",
					     "PASSWD", "CREDENTIAL", "PRIVATE", "AUTH" };
	static const char *const prefixes[] = {
		"AWS_",	   "GITHUB_",	 "GH_", "GITLAB_", "AZURE_",
		"OPENAI_", "ANTHROPIC_", "HF_", "NPM_",	   "DOCKER_"
	};
	/* Well-known names of those families that hold no secret. */
	static const char *const harmless[] = {
		"SSH_AUTH_SOCK",
		"GPG_AGENT_INFO",
		"AWS_REGION",
		"AWS_DEFAULT_REGION",
		"AWS_PROFILE",
		"AWS_DEFAULT_OUTPUT",
		"AWS_CONFIG_FILE",
		"AWS_SHARED_CREDENTIALS_FILE",
		"AWS_CA_BUNDLE",
		"AWS_ENDPOINT_URL",
		"GITHUB_ACTIONS",
		"GITHUB_WORKSPACE",
		"GITHUB_SHA",
		"GITHUB_REF",
		"GITHUB_REF_NAME",
		"GITHUB_REPOSITORY",
		"GITHUB_RUN_ID",
		"GITHUB_RUN_NUMBER",
		"GITHUB_JOB",
		"GITHUB_WORKFLOW",
		"GITHUB_EVENT_NAME",
		"GITHUB_EVENT_PATH",
		"GITHUB_SERVER_URL",
		"GITHUB_API_URL",
		"GITHUB_ACTOR",
		"GITHUB_ENV",
		"GITHUB_PATH",
		"GITHUB_OUTPUT",
		"GITHUB_HEAD_REF",
		"GITHUB_BASE_REF",
		"GITHUB_REPOSITORY_OWNER",
		"GITHUB_STEP_SUMMARY",
		"DOCKER_HOST",
		"NPM_CONFIG_PREFIX",
		/* sluice's own: the CA bundle, for npm (either case). */
		"NPM_CONFIG_CAFILE",
	};
	char up[128];
	size_t i;

	if (n >= sizeof(up))
		n = sizeof(up) - 1;
	for (i = 0; i < n; i++)
		up[i] = (char)toupper((unsigned char)name[i]);
	up[n] = '\0';
	for (i = 0; i < sizeof(harmless) / sizeof(harmless[0]); i++)
		if (!strcmp(up, harmless[i]))
			return false;
	for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		if (strstr(up, parts[i]))
			return true;
	for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(up, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

/* A sluice placeholder: "sluice-ph-" and 32 hex digits. */
static bool placeholder(const char *v)
{
	size_t i;

	if (strncmp(v, "sluice-ph-", 10) || strlen(v) != 42)
		return false;
	for (i = 10; i < 42; i++)
		if (!isxdigit((unsigned char)v[i]))
			return false;
	return true;
}

static void c_env_credentials(const struct probe_ctx *ctx, struct probe_result *r)
{
	int found = 0, ph = 0, looked = 0;
	char **e;

	(void)ctx;
	for (e = environ; e && *e; e++) {
		const char *eq = strchr(*e, '='), *v;
		size_t n;

		if (!eq)
			continue;
		n = (size_t)(eq - *e);
		v = eq + 1;
		if (!secret_name(*e, n))
			continue;
		looked++;
		if (placeholder(v)) {
			ph++;
			continue;
		}
		/* Flags and the like carry no secret: empty, 0/1, true/false.
		 */
		if (!*v || !strcmp(v, "0") || !strcmp(v, "1") || !strcasecmp(v, "true") ||
		    !strcasecmp(v, "false"))
			continue;
		found++;
		/* The name only: never the value. */
		ADD(r, PROBE_FAIL,
		    "%.*s holds a value that is not a sluice placeholder (%zu "
		    "characters)",
		    (int)(n > 64 ? 64 : n), *e, strlen(v));
	}
	if (!found)
		ADD(r, PROBE_PASS,
		    "%d credential-looking variable%s, %d holding a "
		    "placeholder, none a real value",
		    looked, looked == 1 ? "" : "s", ph);
}

/* ---- what must work, what must not
 * ------------------------------------------------------- */

static void c_expect_allow(const struct probe_ctx *ctx, struct probe_result *r)
{
	if (!ctx->o->n_allow)
		return ADD(r, PROBE_SKIP, "no --expect-allow given");
	for (int i = 0; i < ctx->o->n_allow; i++) {
		char d[400];
		bool ok = works(ctx, ctx->o->allow[i].host, ctx->o->allow[i].port, d, sizeof(d));

		ADD(r, ok ? PROBE_PASS : PROBE_FAIL, "%s%s", d, ok ? "" : " (expected to work)");
	}
}

static void c_expect_deny(const struct probe_ctx *ctx, struct probe_result *r)
{
	if (!ctx->o->n_deny)
		return ADD(r, PROBE_SKIP, "no --expect-deny given");
	for (int i = 0; i < ctx->o->n_deny; i++)
		refused_everywhere(ctx, r, ctx->o->deny[i].host, ctx->o->deny[i].port);
}

/* ---- the table
 * ------------------------------------------------------------------------------
 */

/* One line per check reads best: the table is left as written. */
/* clang-format off */
const struct probe_check probe_checks[] = {
	{ "tcp-public-literal", "HTTP to a public IPv4 literal (--public-addr), port 80, no proxy", c_tcp_public_literal },
	{ "tls-public-literal", "TLS ClientHello to a public IPv4 literal, port 443, no proxy", c_tls_public_literal },
	{ "tcp-public-other", "TCP to a public IPv4 literal on port 22 (a server that speaks first)", c_tcp_public_other },
	{ "tcp-public-v6", "HTTP to a public IPv6 literal (--public-addr6), no proxy", c_tcp_public_v6 },
	{ "tcp-allowed-literal", "HTTP/TLS to the real address of an allowed host (--allowed-addr), no proxy", c_tcp_allowed_literal },
	{ "tcp-allowed-port", "An allowed host on a port outside policy (--blocked-port), no proxy", c_tcp_allowed_port },
	{ "tcp-host-mismatch", "HTTP to an allowed host's address carrying another Host, no proxy", c_tcp_host_mismatch },
	{ "tls-sni-mismatch", "TLS to an allowed host's address with another SNI, no proxy", c_tls_sni_mismatch },
	{ "tcp-private-v4", "HTTP to private and CGNAT IPv4 addresses (--private-addr), no proxy", c_tcp_private_v4 },
	{ "tcp-private-v6", "HTTP to a private (ULA) IPv6 address (--private-addr6), no proxy", c_tcp_private_v6 },
	{ "gw-direct-ports", "TCP to the gateway's other ports (--gateway-ports), not the proxy's", c_gw_direct_ports },
	{ "udp-53-out", "A DNS query to port 53 of a host that is no resolver (--udp-addr)", c_udp_53_out },
	{ "udp-443-quic", "A QUIC Initial to UDP 443 (--udp-addr); a reply is the leak", c_udp_443_quic },
	{ "udp-random-port", "A datagram to a random UDP port (--udp-addr, --udp-port); a reply is the leak", c_udp_random_port },
	{ "icmp-echo", "ICMP echo to a public address with an unprivileged ping socket", c_icmp_echo },
	{ "icmp-raw", "ICMP echo to a public address with a raw socket (needs CAP_NET_RAW)", c_icmp_raw },
	{ "icmp6-echo", "ICMPv6 echo to a public IPv6 address", c_icmp6_echo },
	{ "dns-direct-udp", "DNS to outside resolvers (--resolver) over UDP for a name not allowed", c_dns_direct_udp },
	{ "dns-direct-tcp", "DNS to outside resolvers (--resolver) over TCP for a name not allowed", c_dns_direct_tcp },
	{ "dns-dot", "DNS over TLS: a ClientHello to resolvers on port 853 (--dot-addr)", c_dns_dot },
	{ "dns-doh", "DNS over HTTPS: TLS to a DoH server by name and by address, no proxy", c_dns_doh },
	{ "proxy-doh", "DNS over HTTPS: CONNECT to a DoH server through the proxy", c_proxy_doh },
	{ "dns-txt", "TXT lookups through the sandbox's resolver return no data", c_dns_txt },
	{ "dns-null", "NULL lookups through the sandbox's resolver return no data", c_dns_null },
	{ "dns-any", "ANY lookups through the sandbox's resolver return no data", c_dns_any },
	{ "dns-canary-exfil", "A fresh label under the canary, through the sandbox's resolver", c_dns_canary_exfil },
	{ "dns-canary-direct", "A fresh label under the canary, to outside resolvers directly", c_dns_canary_direct },
	{ "meta-imds-v4", "Cloud metadata: GET http://169.254.169.254/latest/meta-data/, no proxy", c_meta_imds_v4 },
	{ "meta-imds-v2", "Cloud metadata: IMDSv2 token PUT to 169.254.169.254, no proxy", c_meta_imds_v2 },
	{ "meta-imds-v6", "Cloud metadata over IPv6: [fd00:ec2::254], no proxy", c_meta_imds_v6 },
	{ "meta-ecs", "Container credentials endpoint 169.254.170.2, no proxy", c_meta_ecs },
	{ "meta-alibaba", "Alibaba Cloud metadata 100.100.100.200, no proxy", c_meta_alibaba },
	{ "meta-name", "The metadata service by name (--metadata-name), no proxy", c_meta_name },
	{ "proxy-metadata", "Every metadata endpoint, by address and by name, through the proxy", c_proxy_metadata },
	{ "proxy-meta-spellings", "The metadata address spelt in decimal, octal, hex and short form, through the proxy", c_proxy_meta_spellings },
	{ "proxy-public-literal", "Public address literals (IPv4, IPv6, CONNECT) through the proxy", c_proxy_public_literal },
	{ "proxy-allowed-literal", "The real address of an allowed host through the proxy", c_proxy_allowed_literal },
	{ "proxy-allowed-port", "An allowed host on a port outside policy through the proxy", c_proxy_allowed_port },
	{ "proxy-private", "Private IPv4 and IPv6 addresses through the proxy", c_proxy_private },
	{ "proxy-loop-127-1", "Loopback as 127.1 through the proxy", c_proxy_loop_127_1 },
	{ "proxy-loop-zero", "Loopback as 0.0.0.0 through the proxy", c_proxy_loop_zero },
	{ "proxy-loop-v6", "Loopback as [::1] through the proxy", c_proxy_loop_v6 },
	{ "proxy-loop-mapped", "Loopback as [::ffff:127.0.0.1] through the proxy", c_proxy_loop_mapped },
	{ "proxy-loop-name", "Loopback as localhost through the proxy", c_proxy_loop_name },
	{ "proxy-spell-decimal", "Loopback spelt in decimal (2130706433) through the proxy", c_proxy_spell_decimal },
	{ "proxy-spell-octal", "Loopback spelt in octal (0177.0.0.1, 0177.0.0.01, 017700000001) through the proxy", c_proxy_spell_octal },
	{ "proxy-spell-hex", "Loopback spelt in hex (0x7f.0.0.1, 0x7f.0x0.0x0.0x1, 0x7f000001) through the proxy", c_proxy_spell_hex },
	{ "proxy-host-mismatch", "A request for an allowed host carrying another Host, through the proxy", c_proxy_host_mismatch },
	{ "proxy-connect-host", "A CONNECT to an allowed host, then a request for another Host inside it", c_proxy_connect_host },
	{ "proxy-sni-mismatch", "A CONNECT to an allowed host, then a ClientHello with another SNI", c_proxy_sni_mismatch },
	{ "proxy-self", "Requests aimed at the proxy's own address and the gateway's ports, through the proxy", c_proxy_self },
	{ "redirect-private", "A redirect from an allowed host to a private or outside URL (--redirect-url)", c_redirect },
	{ "name-suffix", "An allowed name with a suffix (<allowed>.--edge-suffix) is refused", c_name_suffix },
	{ "name-prefix", "An allowed name with a prefix (--edge-prefix<allowed>) is refused", c_name_prefix },
	{ "name-trailing-dot", "A trailing dot behaves like the name (allowed works, denied refused)", c_name_trailing_dot },
	{ "name-mixed-case", "Mixed case behaves like the name (allowed works, denied refused)", c_name_mixed_case },
	{ "env-credentials", "Credential-looking variables hold sluice placeholders, never real values", c_env_credentials },
	{ "expect-allow", "Every --expect-allow host works (through the proxy if set, else directly)", c_expect_allow },
	{ "expect-deny", "Every --expect-deny host is refused, by name, directly and through the proxy", c_expect_deny },
	{ "host-processes", "No process outside its own PID namespace is visible (the broker's: --broker-pid)", probe_c_host_processes },
	{ "control-socket", "No sluice control socket can be connected to (" PROBE_CONTROL_SOCKET ", --control-socket)", probe_c_control_socket },
	{ "netns-run", "/run/netns lists no network namespace (each one a setns(2) away)", probe_c_netns_run },
	{ "netns-etc", "/etc/netns lists no namespace's settings", probe_c_netns_etc },
	{ "caps-init-userns", "No effective capability over the initial user namespace (the host's)", probe_c_caps_init_userns },
	{ "secret-files", "No --secret-file can be opened for reading", probe_c_secret_files },
	{ "vsock", "No AF_VSOCK socket can be made (vsock is not network namespaced)", probe_c_vsock },
};
/* clang-format on */

const size_t probe_n_checks = sizeof(probe_checks) / sizeof(probe_checks[0]);
_Static_assert(sizeof(probe_checks) / sizeof(probe_checks[0]) <= PROBE_MAX_CHECKS,
	       "PROBE_MAX_CHECKS bounds the selection table");

/**
 * probe_check_index() - the index of the check called @id.
 * @id: the id (not NUL-terminated)
 * @len: its length
 *
 * Return: the index in probe_checks, or -1.
 */
int probe_check_index(const char *id, size_t len)
{
	for (size_t i = 0; i < probe_n_checks; i++)
		if (strlen(probe_checks[i].id) == len && !strncmp(probe_checks[i].id, id, len))
			return (int)i;
	return -1;
}
