// SPDX-License-Identifier: MIT
/* Bench: a bare relay, what the download rows of `make bench` set sluice
 * beside.
 *
 *   floor -l ADDR:PORT -u ORIGIN_IP [-m threads|poll] [-p PIPE_BYTES] [-r READY_FILE]
 *
 * Takes a CONNECT (answers 200) or an absolute-form request (passes its head
 * on as it came), connects to ORIGIN_IP at the port the request names, sets
 * TCP_NODELAY on both sockets (as sluiced does; without it this relay
 * carried a fifth less here), and then moves the bytes both ways with
 * splice(2) through a pipe per direction (64 KiB unless -p): by default one
 * blocking thread per direction; -m poll does both directions in one
 * thread, non-blocking, with poll(2) between, the shape of an event loop's
 * tunnel. No policy, no parsing past the first line, no audit, no TLS.
 * What it carries is what two TCP connections and a splice between them
 * carry on this machine. Any name goes to ORIGIN_IP and every client is
 * trusted: it is for the test world only (tests/bench/run.sh runs it in
 * the broker's namespace, for the client namespace c1). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEAD_MAX 16384

static struct in_addr origin;
static int pipe_bytes = 65536, use_poll;

struct pump {
	int from, to;
};

/* Writes all of @len bytes; returns 0, or -1. */
static int send_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t k = send(fd, p, len, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* @from -> pipe -> @to until @from ends or either side fails; then shuts
 * the write side of @to. */
static void pump_run(int from, int to)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) != 0)
		goto out;
	(void)fcntl(p[1], F_SETPIPE_SZ, pipe_bytes);
	for (;;) {
		ssize_t k = splice(from, NULL, p[1], NULL, pipe_bytes, SPLICE_F_MOVE);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		while (k > 0) {
			ssize_t m = splice(p[0], NULL, to, NULL, (size_t)k, SPLICE_F_MOVE);

			if (m < 0 && errno == EINTR)
				continue;
			if (m <= 0)
				goto done;
			k -= m;
		}
	}
done:
	close(p[0]);
	close(p[1]);
out:
	shutdown(to, SHUT_WR);
}

/* One direction's state in relay_poll(). */
struct side {
	int from, to, p[2];
	size_t inpipe;
	bool eof, shut, full;
};

/* Moves what it can @d->from -> pipe -> @d->to without blocking; returns
 * -1 on a hard error. */
static int side_move(struct side *d)
{
	for (int rounds = 0; rounds < 16; rounds++) {
		bool progress = false;
		ssize_t k;

		if (!d->eof && !d->full && d->inpipe < (size_t)pipe_bytes) {
			k = splice(d->from, NULL, d->p[1], NULL, (size_t)pipe_bytes - d->inpipe,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k > 0) {
				d->inpipe += (size_t)k;
				progress = true;
			} else if (k == 0) {
				d->eof = true;
			} else if (errno == EAGAIN) {
				d->full = d->inpipe >
					  0; /* maybe out of pipe buffers: wait for the out side */
			} else if (errno != EINTR) {
				return -1;
			}
		}
		if (d->inpipe > 0) {
			k = splice(d->p[0], NULL, d->to, NULL, d->inpipe,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (k > 0) {
				d->inpipe -= (size_t)k;
				d->full = false;
				progress = true;
			} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
				return -1;
			}
		}
		if (!progress)
			break;
	}
	if (d->eof && d->inpipe == 0 && !d->shut) {
		shutdown(d->to, SHUT_WR);
		d->shut = true;
	}
	return 0;
}

/* Both directions in one thread, non-blocking, poll(2) between: the shape
 * of an event loop's tunnel, with nothing else around it. */
static void relay_poll(int a, int b)
{
	struct side s[2] = { { .from = a, .to = b }, { .from = b, .to = a } };

	if (pipe2(s[0].p, O_CLOEXEC | O_NONBLOCK) != 0)
		return;
	if (pipe2(s[1].p, O_CLOEXEC | O_NONBLOCK) != 0)
		goto out0;
	(void)fcntl(s[0].p[1], F_SETPIPE_SZ, pipe_bytes);
	(void)fcntl(s[1].p[1], F_SETPIPE_SZ, pipe_bytes);
	(void)fcntl(a, F_SETFL, O_NONBLOCK);
	(void)fcntl(b, F_SETFL, O_NONBLOCK);
	for (;;) {
		struct pollfd f[2] = { { .fd = a }, { .fd = b } };

		if (side_move(&s[0]) != 0 || side_move(&s[1]) != 0)
			break;
		if (s[0].shut && s[1].shut)
			break;
		for (int i = 0; i < 2; i++) {
			if (!s[i].eof && !s[i].full && s[i].inpipe < (size_t)pipe_bytes)
				f[i].events |= POLLIN;
			if (s[i].inpipe > 0)
				f[1 - i].events |= POLLOUT;
		}
		if (poll(f, 2, -1) < 0 && errno != EINTR)
			break;
	}
	close(s[1].p[0]);
	close(s[1].p[1]);
out0:
	close(s[0].p[0]);
	close(s[0].p[1]);
}

static void *pump_thread(void *arg)
{
	struct pump *pu = arg;

	pump_run(pu->from, pu->to);
	return NULL;
}

/* The port of "host:port" or of "http://host[:port]/...", or 0. */
static int target_port(const char *t, size_t n, int connect)
{
	const char *end = t + n, *colon = NULL, *p = t;
	long port = 0;

	if (!connect) {
		if (n < 7 || strncmp(t, "http://", 7) != 0)
			return 0;
		p = t + 7;
		end = memchr(p, '/', (size_t)(t + n - p));
		if (!end)
			end = t + n;
	}
	for (const char *q = p; q < end; q++)
		if (*q == ':')
			colon = q;
	if (!colon)
		return connect ? 0 : 80;
	for (const char *q = colon + 1; q < end; q++) {
		if (*q < '0' || *q > '9' || port > 65535)
			return 0;
		port = port * 10 + (*q - '0');
	}
	return port > 0 && port <= 65535 ? (int)port : 0;
}

static void *serve(void *arg)
{
	int cfd = (int)(long)arg, ufd = -1, port, connect_method, one = 1;
	char head[HEAD_MAX + 1];
	size_t have = 0, hlen = 0;
	const char *sp1, *sp2;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct pump down;
	pthread_t t;

	while (have < HEAD_MAX) {
		ssize_t k = recv(cfd, head + have, HEAD_MAX - have, 0);
		char *e;

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			goto out;
		have += (size_t)k;
		head[have] = '\0';
		e = strstr(head, "\r\n\r\n");
		if (e) {
			hlen = (size_t)(e + 4 - head);
			break;
		}
	}
	if (hlen == 0)
		goto out;
	sp1 = memchr(head, ' ', hlen);
	sp2 = sp1 ? memchr(sp1 + 1, ' ', hlen - (size_t)(sp1 + 1 - head)) : NULL;
	if (!sp2)
		goto out;
	connect_method = sp1 - head == 7 && memcmp(head, "CONNECT", 7) == 0;
	port = target_port(sp1 + 1, (size_t)(sp2 - sp1 - 1), connect_method);
	if (port == 0)
		goto out;
	sa.sin_addr = origin;
	sa.sin_port = htons((uint16_t)port);
	ufd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ufd < 0 || connect(ufd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		goto out;
	(void)setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	(void)setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect_method) {
		static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

		if (send_all(cfd, ok, sizeof(ok) - 1) != 0 ||
		    send_all(ufd, head + hlen, have - hlen) != 0)
			goto out;
	} else if (send_all(ufd, head, have) != 0) {
		goto out;
	}
	if (use_poll) {
		relay_poll(cfd, ufd);
		goto out;
	}
	down.from = ufd;
	down.to = cfd;
	if (pthread_create(&t, NULL, pump_thread, &down) != 0)
		goto out;
	pump_run(cfd, ufd);
	pthread_join(t, NULL);
out:
	if (ufd >= 0)
		close(ufd);
	close(cfd);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *listen_at = NULL, *up = NULL, *ready = NULL;
	char host[64];
	const char *colon;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int opt, lfd, one = 1;

	while ((opt = getopt(argc, argv, "l:u:r:p:m:")) != -1) {
		switch (opt) {
		case 'l':
			listen_at = optarg;
			break;
		case 'u':
			up = optarg;
			break;
		case 'r':
			ready = optarg;
			break;
		case 'p':
			pipe_bytes = atoi(optarg);
			break; /* checked below */
		case 'm':
			if (strcmp(optarg, "poll") != 0 && strcmp(optarg, "threads") != 0)
				goto usage;
			use_poll = optarg[0] == 'p';
			break;
		default:
			goto usage;
		}
	}
	if (!listen_at || !up || optind != argc || pipe_bytes < 4096)
		goto usage;
	colon = strrchr(listen_at, ':');
	if (!colon || (size_t)(colon - listen_at) >= sizeof(host) ||
	    inet_pton(AF_INET, up, &origin) != 1)
		goto usage;
	memcpy(host, listen_at, (size_t)(colon - listen_at));
	host[colon - listen_at] = '\0';
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		goto usage;
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	signal(SIGPIPE, SIG_IGN);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 128) != 0) {
		perror("floor: listen");
		return 1;
	}
	if (ready) {
		FILE *f = fopen(ready, "w");

		if (!f || fputs("ready\n", f) < 0 || fclose(f) != 0) {
			perror("floor: ready file");
			return 1;
		}
	}
	for (;;) {
		int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		pthread_t t;

		if (cfd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				usleep(10000);
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE ||
			    errno == ENFILE)
				continue;
			perror("floor: accept");
			return 1;
		}
		if (pthread_create(&t, NULL, serve, (void *)(long)cfd) != 0) {
			close(cfd);
			continue;
		}
		pthread_detach(t);
	}
usage:
	fprintf(stderr,
		"usage: floor -l ADDR:PORT -u ORIGIN_IP [-m threads|poll] [-p PIPE_BYTES] [-r READY_FILE]\n");
	return 2;
}
