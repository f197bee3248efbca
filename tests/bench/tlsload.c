// SPDX-License-Identifier: MIT
/* tlsload: HTTPS through an explicit proxy (CONNECT + TLS) for the interception bench, and its origin.
 *
 * Theory of operation. Two modes in one binary, so that the bench builds one
 * file (like blast.c):
 *
 *   tlsload client [-x PROXY:PORT | -D ORIGIN:PORT] [-A CAFILE] -H HOST[,HOST...] [-p PORT]
 *                  [-P PATH] [-c CONNS] [-d SECONDS] [-n REQS_PER_CONN]
 *                  [-w TIMEOUT_S]
 *
 *     CONNS threads, each with one connection at a time, blocking I/O: TCP
 *     to the proxy, "CONNECT HOST:PORT", a full TLS handshake (no session
 *     is ever resumed: each connection costs the proxy a handshake with the
 *     client, and whatever it does upstream) that verifies the chain against
 *     CAFILE and the name HOST, then GET PATH requests one after the other
 *     (HTTP/1.1, kept alive). -n 0 (the default) keeps one connection for
 *     the whole run; -n 1 is a new connection for every request. Hosts of a
 *     list are taken in turn, one per connection. The proxy and CA default
 *     to HTTPS_PROXY (or https_proxy) and SSL_CERT_FILE (or CURL_CA_BUNDLE),
 *     which is what `sluice exec` gives a sandbox. -D connects straight to
 *     the origin at ORIGIN:PORT instead (no proxy, no CONNECT: the
 *     baseline). Runs for SECONDS; a
 *     request counts when its whole answer arrived before the end. Prints
 *     one line:
 *
 *       TLSLOAD requests=N secs=S rps=R p50_us=N p99_us=N conns=N
 *               auth_ok=N auth_bad=N err_connect=N err_proxy=N err_tls=N
 *               err_http=N cpu_s=S tls=VERSION/CIPHER
 *
 *     latency is from writing the request to the end of the answer; with
 *     -n 1 it is from the TCP connect (CONNECT, handshake and request).
 *     auth_ok counts answers whose body says the origin saw the expected
 *     Authorization header (see the server); auth_bad the others. cpu_s is
 *     this process's own user+system time; tls what the first handshake
 *     negotiated. The first few errors are printed to stderr.
 *
 *   tlsload server -l ADDR:PORT [-l ...] -C CERT -K KEY -a SECRET_FILE
 *                  [-r READY_FILE]
 *
 *     An HTTPS origin: a thread per connection (blocking; the bench keeps
 *     the connection count small), keep-alive, requests without bodies.
 *     Every answer is 200 with the 8-byte body "auth=ok\n" when the request
 *     carried "Authorization: Bearer <the file's first line>", "auth=no\n"
 *     when it carried none and "auth=xx\n" when it carried another one, so
 *     that the client checks injection on every request without anyone
 *     printing the secret. ADDR is IPv4 or [IPv6]. READY_FILE is written once
 *     every listener is bound. On SIGTERM it prints its counters and exits.
 *
 * Both refuse to run in the root network namespace (one not named under
 * /run/netns): they are for the test world only. Every socket has a send and
 * receive timeout, and the client ends itself (alarm) DURATION + 30 s after
 * it started, so nothing waits without bound.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "netns_guard.h"

#define MAX_LISTEN 8
#define MAX_HOSTS 256
#define MAX_THREADS 256
#define MAX_SERVER_CONNS 4096
#define HEAD_MAX 16384
#define SAMPLES_MAX (1u << 20) /* per client thread */
#define ERR_PRINT_MAX 5
#define BODY_LEN 8

/* --- common ---------------------------------------------------------------- */

/* errmsg() - print a message to stderr. Return: @code, for `return errmsg(...)`. */
__attribute__((format(printf, 2, 3))) static int errmsg(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	return code;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void set_timeouts(int fd, int secs)
{
	struct timeval tv = { .tv_sec = secs };
	int one = 1;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* parse_addr() - "A.B.C.D:PORT" or "[V6]:PORT" into @ss. Return: 0 or -1. */
static int parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon = strrchr(s, ':');
	size_t hl;
	long port;
	char *end;

	if (!colon)
		return -1;
	port = strtol(colon + 1, &end, 10);
	if (*end || port < 1 || port > 65535)
		return -1;
	hl = (size_t)(colon - s);
	if (hl >= sizeof(host))
		return -1;
	memcpy(host, s, hl);
	host[hl] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

		host[hl - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
			return -1;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a6);
		return 0;
	}
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;

	if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
		return -1;
	a4->sin_family = AF_INET;
	a4->sin_port = htons((uint16_t)port);
	*len = sizeof(*a4);
	return 0;
}

/* A blocking reader over a socket or a TLS connection. */
struct rd {
	int fd;
	SSL *ssl;
	size_t len;
	char buf[HEAD_MAX];
};

/* rd_more() - read more into @r. Return: bytes read, 0 at EOF, -1 on error. */
static ssize_t rd_more(struct rd *r)
{
	size_t room = sizeof(r->buf) - r->len;
	ssize_t n;

	if (room == 0)
		return -1;
	if (r->ssl) {
		int k = SSL_read(r->ssl, r->buf + r->len, room > INT32_MAX ? INT32_MAX : (int)room);

		if (k <= 0)
			return SSL_get_error(r->ssl, k) == SSL_ERROR_ZERO_RETURN ? 0 : -1;
		n = k;
	} else {
		do
			n = recv(r->fd, r->buf + r->len, room, 0);
		while (n < 0 && errno == EINTR);
	}
	if (n > 0)
		r->len += (size_t)n;
	return n;
}

/* rd_head() - read until a whole head is buffered.
 * Return: the head's length (through "\r\n\r\n"), or -1 on EOF/error/overflow. */
static ssize_t rd_head(struct rd *r)
{
	for (;;) {
		char *e = memmem(r->buf, r->len, "\r\n\r\n", 4);

		if (e)
			return e + 4 - r->buf;
		if (rd_more(r) <= 0)
			return -1;
	}
}

static void rd_consume(struct rd *r, size_t n)
{
	memmove(r->buf, r->buf + n, r->len - n);
	r->len -= n;
}

/* header_value() - the value of header @name in @head (NUL-terminated, the
 * head's lines end in CRLF), copied into @out; false when absent. */
static bool header_value(const char *head, const char *name, char *out, size_t outlen)
{
	size_t nl = strlen(name);
	const char *p = strstr(head, "\r\n");

	while (p && p[2] != '\r' && p[2] != '\0') {
		const char *line = p + 2, *eol = strstr(line, "\r\n");

		if (!eol)
			break;
		if ((size_t)(eol - line) > nl && !strncasecmp(line, name, nl) && line[nl] == ':') {
			const char *v = line + nl + 1;
			size_t vl;

			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			vl = (size_t)(eol - v);
			while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				vl--;
			if (vl >= outlen)
				vl = outlen - 1;
			memcpy(out, v, vl);
			out[vl] = '\0';
			return true;
		}
		p = eol;
	}
	return false;
}

/* --- server ------------------------------------------------------------------- */

static SSL_CTX *srv_ctx;
static char srv_expect[1024]; /* "Bearer <secret>" */
static atomic_ulong srv_conns, srv_reqs, srv_auth_ok, srv_auth_no, srv_auth_bad, srv_tls_err;
static atomic_int srv_live;

static void *srv_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	struct rd *r = calloc(1, sizeof(*r));
	SSL *ssl = NULL;

	if (!r)
		goto out;
	set_timeouts(fd, 30);
	ssl = SSL_new(srv_ctx);
	if (!ssl || SSL_set_fd(ssl, fd) != 1 || SSL_accept(ssl) != 1) {
		atomic_fetch_add(&srv_tls_err, 1);
		goto out;
	}
	atomic_fetch_add(&srv_conns, 1);
	r->fd = fd;
	r->ssl = ssl;
	for (;;) {
		char head[HEAD_MAX + 1], auth[sizeof(srv_expect)], conn[64], resp[160];
		ssize_t hl = rd_head(r);
		const char *body;
		bool close_after;
		int n;

		if (hl < 0)
			break;
		memcpy(head, r->buf, (size_t)hl);
		head[hl] = '\0';
		rd_consume(r, (size_t)hl);
		if (!header_value(head, "Authorization", auth, sizeof(auth))) {
			body = "auth=no\n";
			atomic_fetch_add(&srv_auth_no, 1);
		} else if (!strcmp(auth, srv_expect)) {
			body = "auth=ok\n";
			atomic_fetch_add(&srv_auth_ok, 1);
		} else {
			body = "auth=xx\n";
			atomic_fetch_add(&srv_auth_bad, 1);
		}
		OPENSSL_cleanse(auth, sizeof(auth));
		close_after = header_value(head, "Connection", conn, sizeof(conn)) &&
			      !strcasecmp(conn, "close");
		n = snprintf(resp, sizeof(resp),
			     "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
			     "Content-Length: %d\r\n%s\r\n%s",
			     BODY_LEN, close_after ? "Connection: close\r\n" : "", body);
		atomic_fetch_add(&srv_reqs, 1);
		if (SSL_write(ssl, resp, n) != n || close_after)
			break;
	}
	SSL_shutdown(ssl);
out:
	SSL_free(ssl);
	free(r);
	close(fd);
	atomic_fetch_sub(&srv_live, 1);
	return NULL;
}

static void *srv_accept(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	pthread_attr_t at;

	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 256 * 1024);
	for (;;) {
		pthread_t t;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM)
				usleep(10000);
			continue;
		}
		if (atomic_fetch_add(&srv_live, 1) >= MAX_SERVER_CONNS ||
		    pthread_create(&t, &at, srv_conn, (void *)(intptr_t)fd) != 0) {
			atomic_fetch_sub(&srv_live, 1);
			close(fd);
		}
	}
	return NULL;
}

static int server_main(int argc, char **argv)
{
	const char *listen_on[MAX_LISTEN], *cert = NULL, *key = NULL, *secret = NULL, *ready = NULL;
	int n_listen = 0, opt, i, sig;
	char line[sizeof(srv_expect) - 8];
	sigset_t ss;
	FILE *f;

	while ((opt = getopt(argc, argv, "l:C:K:a:r:")) != -1) {
		switch (opt) {
		case 'l':
			if (n_listen == MAX_LISTEN)
				return errmsg(2, "tlsload: too many -l\n");
			listen_on[n_listen++] = optarg;
			break;
		case 'C':
			cert = optarg;
			break;
		case 'K':
			key = optarg;
			break;
		case 'a':
			secret = optarg;
			break;
		case 'r':
			ready = optarg;
			break;
		default:
			return 2;
		}
	}
	if (!n_listen || !cert || !key || !secret) {
		fprintf(stderr,
			"usage: tlsload server -l ADDR:PORT... -C CERT -K KEY -a SECRET_FILE [-r READY]\n");
		return 2;
	}
	f = fopen(secret, "r");
	if (!f || !fgets(line, sizeof(line), f)) {
		fprintf(stderr, "tlsload: cannot read %s\n", secret);
		if (f)
			fclose(f);
		return 1;
	}
	fclose(f);
	line[strcspn(line, "\r\n")] = '\0';
	snprintf(srv_expect, sizeof(srv_expect), "Bearer %s", line);
	OPENSSL_cleanse(line, sizeof(line));

	srv_ctx = SSL_CTX_new(TLS_server_method());
	if (!srv_ctx || SSL_CTX_use_certificate_chain_file(srv_ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(srv_ctx, key, SSL_FILETYPE_PEM) != 1) {
		fprintf(stderr, "tlsload: cannot load %s / %s\n", cert, key);
		ERR_print_errors_fp(stderr);
		return 1;
	}
	SSL_CTX_set_min_proto_version(srv_ctx, TLS1_2_VERSION);

	/* SIGTERM and SIGINT are taken by sigwait() below, in this thread. */
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	pthread_sigmask(SIG_BLOCK, &ss, NULL);
	for (i = 0; i < n_listen; i++) {
		struct sockaddr_storage sa;
		socklen_t sl;
		pthread_t t;
		int fd, one = 1;

		if (parse_addr(listen_on[i], &sa, &sl) < 0) {
			fprintf(stderr, "tlsload: bad address `%s'\n", listen_on[i]);
			return 2;
		}
		fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return errmsg(1, "tlsload: socket: %s\n", strerror(errno));
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (sa.ss_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&sa, sl) < 0 || listen(fd, 1024) < 0) {
			fprintf(stderr, "tlsload: %s: %s\n", listen_on[i], strerror(errno));
			return 1;
		}
		if (pthread_create(&t, NULL, srv_accept, (void *)(intptr_t)fd) != 0)
			return errmsg(1, "tlsload: pthread_create failed\n");
	}
	if (ready) {
		f = fopen(ready, "w");
		if (!f || fprintf(f, "ready\n") < 0 || fclose(f) != 0)
			return errmsg(1, "tlsload: cannot write %s\n", ready);
	}
	sigwait(&ss, &sig);
	printf("TLSSERVER conns=%lu requests=%lu auth_ok=%lu auth_no=%lu auth_other=%lu tls_errors=%lu\n",
	       atomic_load(&srv_conns), atomic_load(&srv_reqs), atomic_load(&srv_auth_ok),
	       atomic_load(&srv_auth_no), atomic_load(&srv_auth_bad), atomic_load(&srv_tls_err));
	fflush(stdout);
	_exit(0);
}

/* --- client ------------------------------------------------------------------- */

enum cerr { E_CONNECT, E_PROXY, E_TLS, E_HTTP, E_N };
static const char *const cerr_name[E_N] = {
	[E_CONNECT] = "connect",
	[E_PROXY] = "proxy",
	[E_TLS] = "tls",
	[E_HTTP] = "http",
};

static struct {
	struct sockaddr_storage proxy;
	socklen_t proxy_len;
	bool direct; /* -D: the address is the origin's, no CONNECT */
	const char *hosts[MAX_HOSTS];
	int n_hosts;
	int port;
	const char *path;
	int per_conn; /* 0: unlimited */
	int timeout;
	uint64_t t_start, t_end;
	SSL_CTX *ctx;
} cl;
static atomic_uint cl_next_host;
static atomic_int cl_errs_printed;
static atomic_flag cl_proto_seen = ATOMIC_FLAG_INIT;
static char cl_proto[64] = "-"; /* of the first handshake: "TLSv1.3/TLS_AES_256_GCM_SHA384" */

struct worker {
	pthread_t t;
	uint64_t requests, conns, auth_ok, auth_bad, err[E_N];
	uint32_t *lat;
	size_t n_lat;
};

static void cl_error(struct worker *w, enum cerr e, const char *fmt, ...)
{
	va_list ap;

	w->err[e]++;
	if (atomic_fetch_add(&cl_errs_printed, 1) >= ERR_PRINT_MAX)
		return;
	fprintf(stderr, "tlsload: %s error: ", cerr_name[e]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (e == E_TLS)
		ERR_print_errors_fp(stderr);
}

static void sample(struct worker *w, uint64_t us)
{
	if (w->n_lat < SAMPLES_MAX)
		w->lat[w->n_lat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

/* One request on @ssl. Return: 1 done and kept alive, 0 done and the
 * connection must close, -1 failed (error counted). */
static int cl_request(struct worker *w, SSL *ssl, struct rd *r, const char *host, uint64_t t0)
{
	char req[600], head[HEAD_MAX + 1], v[64];
	ssize_t hl;
	long clen;
	int n, status = 0;
	bool keep = true;

	/* The port is in Host unless it is the default (RFC 9110 7.2): squid
	 * takes a bumped request's URL from it. */
	if (cl.port == 443)
		n = snprintf(req, sizeof(req),
			     "GET %s HTTP/1.1\r\nHost: %s\r\n"
			     "User-Agent: tlsload\r\nAccept: */*\r\n\r\n",
			     cl.path, host);
	else
		n = snprintf(req, sizeof(req),
			     "GET %s HTTP/1.1\r\nHost: %s:%d\r\n"
			     "User-Agent: tlsload\r\nAccept: */*\r\n\r\n",
			     cl.path, host, cl.port);
	if (n < 0 || (size_t)n >= sizeof(req) || SSL_write(ssl, req, n) != n) {
		cl_error(w, E_HTTP, "%s: write failed", host);
		return -1;
	}
	hl = rd_head(r);
	if (hl < 0) {
		cl_error(w, E_HTTP, "%s: no answer head", host);
		return -1;
	}
	memcpy(head, r->buf, (size_t)hl);
	head[hl] = '\0';
	rd_consume(r, (size_t)hl);
	if (sscanf(head, "HTTP/1.%*1d %3d", &status) != 1 || status != 200) {
		cl_error(w, E_HTTP, "%s: answer `%.*s'", host, (int)strcspn(head, "\r\n"), head);
		return -1;
	}
	if (!header_value(head, "Content-Length", v, sizeof(v)) || (clen = atol(v)) < 0 ||
	    clen > HEAD_MAX) {
		cl_error(w, E_HTTP, "%s: no usable Content-Length", host);
		return -1;
	}
	if (header_value(head, "Connection", v, sizeof(v)) && !strcasecmp(v, "close"))
		keep = false;
	while (r->len < (size_t)clen) {
		if (rd_more(r) <= 0) {
			cl_error(w, E_HTTP, "%s: body cut short", host);
			return -1;
		}
	}
	if (now_us() > cl.t_end) /* finished too late: not counted */
		return 0;
	if (clen >= 7 && !memcmp(r->buf, "auth=ok", 7))
		w->auth_ok++;
	else
		w->auth_bad++;
	rd_consume(r, (size_t)clen);
	w->requests++;
	sample(w, now_us() - t0);
	return keep;
}

/* One connection: CONNECT, handshake, requests. Return: 0, or -1 after an error. */
static int cl_conn(struct worker *w, struct rd *r)
{
	const char *host = cl.hosts[atomic_fetch_add(&cl_next_host, 1) % (unsigned)cl.n_hosts];
	uint64_t t0 = now_us();
	char req[600], head[HEAD_MAX + 1];
	int fd, n, k, status = 0, done = 0, rc = -1;
	SSL *ssl = NULL;
	ssize_t hl;

	fd = socket(cl.proxy.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		cl_error(w, E_CONNECT, "socket: %s", strerror(errno));
		return -1;
	}
	set_timeouts(fd, cl.timeout);
	if (connect(fd, (struct sockaddr *)&cl.proxy, cl.proxy_len) < 0) {
		cl_error(w, E_CONNECT, "connect: %s", strerror(errno));
		goto out;
	}
	r->fd = fd;
	r->ssl = NULL;
	r->len = 0;
	if (!cl.direct) {
		n = snprintf(req, sizeof(req),
			     "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n"
			     "User-Agent: tlsload\r\n\r\n",
			     host, cl.port, host, cl.port);
		if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
			cl_error(w, E_PROXY, "%s: CONNECT not sent", host);
			goto out;
		}
		hl = rd_head(r);
		if (hl < 0 || (size_t)hl != r->len) {
			cl_error(w, E_PROXY, "%s: no (clean) CONNECT answer", host);
			goto out;
		}
		memcpy(head, r->buf, (size_t)hl);
		head[hl] = '\0';
		if (sscanf(head, "HTTP/1.%*1d %3d", &status) != 1 || status != 200) {
			cl_error(w, E_PROXY, "%s: CONNECT answered `%.*s'", host,
				 (int)strcspn(head, "\r\n"), head);
			goto out;
		}
		r->len = 0;
	}
	ssl = SSL_new(cl.ctx);
	if (!ssl || SSL_set_fd(ssl, fd) != 1 || SSL_set_tlsext_host_name(ssl, host) != 1 ||
	    SSL_set1_host(ssl, host) != 1) {
		cl_error(w, E_TLS, "%s: SSL setup", host);
		goto out;
	}
	ERR_clear_error();
	k = SSL_connect(ssl);
	if (k != 1) {
		long vr = SSL_get_verify_result(ssl);

		cl_error(w, E_TLS, "%s: handshake failed (%s)", host,
			 vr != X509_V_OK ? X509_verify_cert_error_string(vr) : "see below");
		goto out;
	}
	w->conns++;
	if (!atomic_flag_test_and_set(&cl_proto_seen))
		snprintf(cl_proto, sizeof(cl_proto), "%s/%s", SSL_get_version(ssl),
			 SSL_get_cipher_name(ssl));
	r->ssl = ssl;
	for (;;) {
		uint64_t t = now_us();

		if (t >= cl.t_end)
			break;
		k = cl_request(w, ssl, r, host, cl.per_conn == 1 ? t0 : t);
		if (k < 0)
			goto out;
		done++;
		if (k == 0 || (cl.per_conn && done >= cl.per_conn))
			break;
	}
	/* close_notify, not waiting for the peer's (as a client that is done does). */
	SSL_shutdown(ssl);
	rc = 0;
out:
	SSL_free(ssl);
	close(fd);
	return rc;
}

static void *cl_worker(void *arg)
{
	struct worker *w = arg;
	struct rd *r = malloc(sizeof(*r));

	if (!r)
		return NULL;
	while (now_us() < cl.t_end) {
		if (cl_conn(w, r) < 0)
			usleep(10000); /* an error: do not spin */
	}
	free(r);
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* proxy_from_env() - host:port from http://HOST:PORT[/] in HTTPS_PROXY. */
static const char *proxy_from_env(char *out, size_t outlen)
{
	const char *v = getenv("HTTPS_PROXY");
	size_t n;

	if (!v || !*v)
		v = getenv("https_proxy");
	if (!v || strncmp(v, "http://", 7))
		return NULL;
	v += 7;
	n = strcspn(v, "/");
	if (n >= outlen)
		return NULL;
	memcpy(out, v, n);
	out[n] = '\0';
	return out;
}

static int client_main(int argc, char **argv)
{
	const char *proxy = NULL, *cafile = NULL;
	char pbuf[128], *hostlist = NULL, *save = NULL, *h;
	int conns = 1, secs = 10, opt, i;
	uint64_t requests = 0, nconns = 0, ok = 0, bad = 0, err[E_N] = { 0 };
	struct worker *ws;
	struct rusage ru;
	uint32_t *all;
	size_t n_all = 0;
	double el;

	cl.port = 443;
	cl.path = "/";
	cl.timeout = 5;
	while ((opt = getopt(argc, argv, "x:D:A:H:p:P:c:d:n:w:")) != -1) {
		switch (opt) {
		case 'x':
			proxy = optarg;
			break;
		case 'D':
			proxy = optarg;
			cl.direct = true;
			break;
		case 'A':
			cafile = optarg;
			break;
		case 'H':
			hostlist = optarg;
			break;
		case 'p':
			cl.port = atoi(optarg);
			break;
		case 'P':
			cl.path = optarg;
			break;
		case 'c':
			conns = atoi(optarg);
			break;
		case 'd':
			secs = atoi(optarg);
			break;
		case 'n':
			cl.per_conn = atoi(optarg);
			break;
		case 'w':
			cl.timeout = atoi(optarg);
			break;
		default:
			return 2;
		}
	}
	if (!proxy)
		proxy = proxy_from_env(pbuf, sizeof(pbuf));
	if (!cafile)
		cafile = getenv("SSL_CERT_FILE");
	if (!cafile || !*cafile)
		cafile = getenv("CURL_CA_BUNDLE");
	if (!proxy || !cafile || !hostlist || conns < 1 || conns > MAX_THREADS || secs < 1 ||
	    secs > 3600 || cl.per_conn < 0 || cl.port < 1 || cl.port > 65535 || cl.timeout < 1 ||
	    strlen(cl.path) > 256 || cl.path[0] != '/') {
		fprintf(stderr,
			"usage: tlsload client [-x PROXY:PORT | -D ORIGIN:PORT] [-A CAFILE] -H HOST[,HOST...] [-p PORT] "
			"[-P PATH] [-c 1-%d] [-d SECS] [-n REQS_PER_CONN] [-w TIMEOUT]\n"
			"  (proxy and CA default to HTTPS_PROXY and SSL_CERT_FILE/CURL_CA_BUNDLE)\n",
			MAX_THREADS);
		return 2;
	}
	if (parse_addr(proxy, &cl.proxy, &cl.proxy_len) < 0) {
		fprintf(stderr, "tlsload: proxy `%s' is not ADDR:PORT\n", proxy);
		return 2;
	}
	for (h = strtok_r(hostlist, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
		if (cl.n_hosts == MAX_HOSTS || strlen(h) > 253)
			return errmsg(2, "tlsload: too many or too long hosts\n");
		cl.hosts[cl.n_hosts++] = h;
	}
	if (!cl.n_hosts)
		return errmsg(2, "tlsload: no host\n");

	cl.ctx = SSL_CTX_new(TLS_client_method());
	if (!cl.ctx || SSL_CTX_load_verify_locations(cl.ctx, cafile, NULL) != 1) {
		fprintf(stderr, "tlsload: cannot load CA file %s\n", cafile);
		ERR_print_errors_fp(stderr);
		return 1;
	}
	SSL_CTX_set_verify(cl.ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_min_proto_version(cl.ctx, TLS1_2_VERSION);
	/* Every connection is a full handshake: no session is kept to resume. */
	SSL_CTX_set_session_cache_mode(cl.ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_alpn_protos(cl.ctx, (const unsigned char *)"\x08http/1.1", 9);

	signal(SIGPIPE, SIG_IGN);
	alarm((unsigned)secs + 30); /* the hard bound on this process */
	ws = calloc((size_t)conns, sizeof(*ws));
	if (!ws)
		return 1;
	cl.t_start = now_us();
	cl.t_end = cl.t_start + (uint64_t)secs * 1000000u;
	for (i = 0; i < conns; i++) {
		ws[i].lat = malloc(SAMPLES_MAX * sizeof(uint32_t));
		if (!ws[i].lat || pthread_create(&ws[i].t, NULL, cl_worker, &ws[i]) != 0) {
			fprintf(stderr, "tlsload: cannot start thread %d\n", i);
			return 1;
		}
	}
	for (i = 0; i < conns; i++) {
		pthread_join(ws[i].t, NULL);
		requests += ws[i].requests;
		nconns += ws[i].conns;
		ok += ws[i].auth_ok;
		bad += ws[i].auth_bad;
		n_all += ws[i].n_lat;
		for (int e = 0; e < E_N; e++)
			err[e] += ws[i].err[e];
	}
	el = (double)(cl.t_end - cl.t_start) / 1e6;
	all = malloc((n_all ? n_all : 1) * sizeof(uint32_t));
	if (!all)
		return 1;
	n_all = 0;
	for (i = 0; i < conns; i++) {
		memcpy(all + n_all, ws[i].lat, ws[i].n_lat * sizeof(uint32_t));
		n_all += ws[i].n_lat;
	}
	qsort(all, n_all, sizeof(uint32_t), cmp_u32);
	getrusage(RUSAGE_SELF, &ru);
	/* Percentiles by nearest rank. */
	printf("TLSLOAD requests=%llu secs=%.3f rps=%.1f p50_us=%u p99_us=%u conns=%llu auth_ok=%llu "
	       "auth_bad=%llu err_connect=%llu err_proxy=%llu err_tls=%llu err_http=%llu cpu_s=%.2f tls=%s\n",
	       (unsigned long long)requests, el, requests / el,
	       n_all ? all[(n_all * 50 + 99) / 100 - 1] : 0,
	       n_all ? all[(n_all * 99 + 99) / 100 - 1] : 0, (unsigned long long)nconns,
	       (unsigned long long)ok, (unsigned long long)bad, (unsigned long long)err[E_CONNECT],
	       (unsigned long long)err[E_PROXY], (unsigned long long)err[E_TLS],
	       (unsigned long long)err[E_HTTP],
	       ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
		       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
	       cl_proto);
	fflush(stdout);
	for (i = 0; i < conns; i++)
		free(ws[i].lat);
	free(ws);
	free(all);
	SSL_CTX_free(cl.ctx);
	return 0;
}

int main(int argc, char **argv)
{
	struct rlimit rl;

	if (argc < 2 || (strcmp(argv[1], "client") && strcmp(argv[1], "server"))) {
		fprintf(stderr,
			"usage: tlsload client|server OPTIONS (see tests/bench/tlsload.c)\n");
		return 2;
	}
	if (!in_named_netns()) {
		fprintf(stderr, "tlsload: refusing to run outside a named network namespace\n");
		return 2;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	return !strcmp(argv[1], "client") ? client_main(argc - 1, argv + 1)
					  : server_main(argc - 1, argv + 1);
}
