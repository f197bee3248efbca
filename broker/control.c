// SPDX-License-Identifier: MIT
/* The control socket: a unix stream socket (mode 0600) on which `sluice`
 * registers and unregisters sandboxes, lists them, reads counters and asks
 * for a reload. One request line per connection, answered with "ok" and a
 * body, or "error: message". Runs on the main thread, never on a worker. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "broker/broker_internal.h"
#include "broker/tlsca.h"
#include "broker/metrics.h"
#include "common/log.h"

#define REQ_MAX 4096
#define RESP_MAX (1 << 20)

int control_open(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd, e;
	mode_t old;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A stale socket from a previous run; a live broker would answer. */
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0) {
		close(fd);
		return -EADDRINUSE;
	}
	unlink(path);
	old = umask(0177);
	e = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	if (e < 0 || chmod(path, 0600) < 0 || listen(fd, 64) < 0) {
		e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

/* Splits @line in place into at most @max words. */
static int words(char *line, char **w, int max)
{
	int n = 0;
	char *save = NULL, *t;

	for (t = strtok_r(line, " \t\r\n", &save); t && n < max;
	     t = strtok_r(NULL, " \t\r\n", &save))
		w[n++] = t;
	return n;
}

static void handle(char *line, char *out, size_t outlen)
{
	char *w[8], err[700] = "";
	int n = words(line, w, 8), r;

	if (n == 0) {
		snprintf(out, outlen, "error: empty request\n");
		return;
	}
	if (!strcmp(w[0], "ping") && n == 1) {
		snprintf(out, outlen, "ok\n");
	} else if (!strcmp(w[0], "register") && n == 4) {
		struct sl_addr a;
		char as[ADDR_STRLEN];

		r = sandbox_register(w[1], w[2], w[3], true, &a, err, sizeof(err));
		if (r < 0) {
			snprintf(out, outlen, "error: %s\n", err);
		} else {
			char *pem = NULL;

			/* The address, then the sandbox CA's certificate for its
			 * trust bundle. */
			addr_format(&a, as, sizeof(as));
			sandbox_ca_pem(w[1], &pem);
			snprintf(out, outlen, "ok\n%s\n%s", as, pem ? pem : "");
			free(pem);
		}
	} else if (!strcmp(w[0], "unregister") && n == 2) {
		r = sandbox_unregister(w[1], err, sizeof(err));
		snprintf(out, outlen, r < 0 ? "error: %s\n" : "ok\n", err);
	} else if (!strcmp(w[0], "list") && n == 1) {
		int k = snprintf(out, outlen, "ok\n");

		r = sandbox_list(out + k, outlen - (size_t)k);
		if (r < 0)
			snprintf(out, outlen, "error: list too long\n");
	} else if (!strcmp(w[0], "status") && n == 1) {
		struct tlsca_stats ts;
		int k;

		/* Leaf certificates of intercepted hosts, over live sandboxes. */
		sandbox_tls_stats(&ts);
		k = snprintf(out, outlen,
			     "ok\nsandboxes %zu\ntls_leaf_hits %llu\ntls_leaf_misses %llu\n"
			     "tls_leaf_cached %zu\njwt_cached %zu\n",
			     sandbox_count(), (unsigned long long)ts.hits,
			     (unsigned long long)ts.misses, ts.entries, creds_jwt_cached());

		if (metrics_render_text(out + k, outlen - (size_t)k) < 0)
			snprintf(out, outlen, "error: status too long\n");
	} else if (!strcmp(w[0], "metrics") && n == 1) {
		int k = snprintf(out, outlen, "ok\n");

		if (metrics_render_prometheus(out + k, outlen - (size_t)k) < 0)
			snprintf(out, outlen, "error: metrics too long\n");
	} else if (!strcmp(w[0], "jwks") && n == 1) {
		/* Public keys only: what a service needs to verify minted JWTs. */
		int k = snprintf(out, outlen, "ok\n");

		r = creds_jwks(out + k, outlen - (size_t)k - 1);
		if (r < 0) {
			snprintf(out, outlen, "error: cannot list the JWT keys: %s\n", strerror(-r));
		} else {
			out[k + r] = '\n';
			out[k + r + 1] = '\0';
		}
	} else if (!strcmp(w[0], "config") && n == 1) {
		char pool[ADDR_STRLEN + 8], synth[ADDR_STRLEN + 8];

		addr_format_cidr(&broker.cfg.pool_net, broker.cfg.pool_plen, pool, sizeof(pool));
		addr_format_cidr(&broker.cfg.synthetic_net, broker.cfg.synthetic_plen, synth,
				 sizeof(synth));
		snprintf(out, outlen,
			 "ok\nproxy_port %u\ntransparent_port %u\ndns_port %u\n"
			 "sandbox_pool %s\nsynthetic_pool %s\n",
			 broker.cfg.proxy_port, broker.cfg.transparent_port, broker.cfg.dns_port,
			 pool, synth);
	} else if (!strcmp(w[0], "ca") && n == 2) {
		char *pem = NULL;

		r = sandbox_ca_pem(w[1], &pem);
		if (r < 0)
			snprintf(out, outlen, "error: no such sandbox `%s`\n", w[1]);
		else
			snprintf(out, outlen, "ok\n%s", pem);
		free(pem);
	} else if (!strcmp(w[0], "placeholders") && n == 2) {
		r = sandbox_placeholders(w[1], out, outlen, err, sizeof(err));
		if (r < 0)
			snprintf(out, outlen, "error: %s\n", err);
	} else if (!strcmp(w[0], "reload") && n == 1) {
		r = broker_reload(err, sizeof(err));
		snprintf(out, outlen, r < 0 ? "error: %s\n" : "ok\n", err);
	} else {
		snprintf(out, outlen, "error: unknown request `%s`\n", w[0]);
	}
}

void control_accept(struct ev *ev, uint32_t events)
{
	struct timeval tv = { .tv_sec = 2 };
	char req[REQ_MAX + 1];
	char *resp;
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	size_t got = 0;
	int fd;

	(void)events;
	fd = accept4(ev->fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	/* The socket's mode already limits who connects; the peer's uid is
	 * checked as well, so a mode change alone opens nothing. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 ||
	    (cred.uid != 0 && cred.uid != geteuid())) {
		log_warn("control: refused a client with uid %u", (unsigned)cred.uid);
		close(fd);
		return;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (got < REQ_MAX) {
		ssize_t k = recv(fd, req + got, REQ_MAX - got, 0);

		if (k <= 0)
			break;
		got += (size_t)k;
		if (memchr(req, '\n', got))
			break;
	}
	req[got] = '\0';
	resp = malloc(RESP_MAX);
	if (!resp) {
		close(fd);
		return;
	}
	if (!memchr(req, '\n', got))
		snprintf(resp, RESP_MAX, "error: request not terminated by a newline\n");
	else
		handle(req, resp, RESP_MAX);
	if (send(fd, resp, strlen(resp), MSG_NOSIGNAL) < 0)
		log_warn("control: could not answer: %s", strerror(errno));
	free(resp);
	close(fd);
}
