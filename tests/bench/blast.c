// SPDX-License-Identifier: MIT
/* blast: a fast HTTP/1.1 origin for the benchmarks (bulk bodies, tiny answers).
 *
 * Theory of operation: THREADS threads each own an epoll loop and one
 * SO_REUSEPORT listener per address, so the kernel spreads connections over
 * them. Every connection reads request heads into a bounded buffer and
 * answers them in order (keep-alive and pipelining):
 *
 *   GET /bytes/N   200 with N bytes (N <= 2^40) sent with sendfile(2) from a
 *                  memfd, so the server's cost per byte is close to nothing
 *   anything else  200 with a two-byte body "ok"
 *
 * HEAD gets the same head and no body; a request carrying a body, an
 * oversized head (over 8 KiB) or a malformed request line gets 400 and the
 * connection is closed (with a reset when unread input remains). HTTP/1.0 closes unless it asked for keep-alive; "Connection: close"
 * closes after the answer. The peer's EOF closes the connection.
 *
 *   blast [-t THREADS] [-r READY_FILE] ADDR:PORT...
 *
 * READY_FILE is written once every listener is bound. blast refuses to run in
 * the root network namespace (one not named under /run/netns): it is meant for
 * the test world only. It runs until killed. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "netns_guard.h"

#define MAX_LISTEN 8
#define MAX_THREADS 16
#define INBUF 8192
#define HEADBUF 256
#define MEMFD_SIZE (4u << 20)
#define MAX_BODY (1ull << 40)
#define EMFILE_PAUSE_MS 100

struct conn {
	int fd;
	size_t in_len;
	char in[INBUF];
	char head[HEADBUF];
	size_t head_len, head_off;
	uint64_t body_left; /* bytes still to send with sendfile */
	uint64_t body_pos;  /* bytes of the body sent so far */
	bool close_after;
	bool sending;
};

static pthread_barrier_t bound; /* every worker has bound its listeners */
static struct sockaddr_storage laddr[MAX_LISTEN];
static socklen_t laddr_len[MAX_LISTEN];
static int n_listen;
static int body_fd = -1;

static int listen_on(int i)
{
	int one = 1, fd;

	fd = socket(laddr[i].ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&laddr[i], laddr_len[i]) < 0 || listen(fd, 4096) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

static int parse_listen(const char *spec, int i)
{
	char host[64];
	const char *colon = strrchr(spec, ':');
	size_t hl;
	char *end;
	unsigned long port;

	if (!colon || colon == spec)
		return -EINVAL;
	hl = (size_t)(colon - spec);
	if (spec[0] == '[' && hl >= 2 && spec[hl - 1] == ']') {
		spec++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, spec, hl);
	host[hl] = '\0';
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || port == 0 || port > 65535)
		return -EINVAL;
	memset(&laddr[i], 0, sizeof(laddr[i]));
	if (strchr(host, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&laddr[i];

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
			return -EINVAL;
		laddr_len[i] = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&laddr[i];

		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return -EINVAL;
		laddr_len[i] = sizeof(*s4);
	}
	return 0;
}

/* Case-insensitive: does the head (NUL-terminated) carry header NAME with a
 * value containing TOKEN? Good enough for the bench's own clients. */
static bool header_has(const char *head, const char *name, const char *token)
{
	size_t nl = strlen(name);
	const char *p = strstr(head, "\r\n");

	while (p && p[2] != '\r' && p[2] != '\0') {
		const char *line = p + 2, *eol = strstr(line, "\r\n");

		if (!eol)
			break;
		if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
			if (!token)
				return true;
			for (const char *v = line + nl + 1; v + strlen(token) <= eol; v++)
				if (strncasecmp(v, token, strlen(token)) == 0)
					return true;
		}
		p = eol;
	}
	return false;
}

/* Queues a 400 and has the connection close after it. */
static void refuse(struct conn *c)
{
	int k = snprintf(c->head, sizeof(c->head),
			 "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
			 "Connection: close\r\n\r\n");

	c->head_len = (size_t)k;
	c->head_off = 0;
	c->body_left = 0;
	c->close_after = true;
	c->sending = true;
}

/*
 * Builds the answer to the head in c->in[0..hlen) (hlen includes the blank
 * line). Return: 0, or -EINVAL for a request the server refuses (a 400 head is
 * queued and the connection closes after it).
 */
static int prepare(struct conn *c, size_t hlen)
{
	char *req = c->in, *sp1, *sp2, *target, *crlf;
	bool head_only, v10;
	uint64_t n = 2;
	int k;

	req[hlen - 1] = '\0'; /* the final \n: makes the head a C string */
	crlf = strstr(req, "\r\n");
	sp1 = memchr(req, ' ', (size_t)(crlf - req));
	sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(crlf - sp1 - 1)) : NULL;
	if (!sp1 || !sp2 || (strncmp(sp2 + 1, "HTTP/1.1", 8) && strncmp(sp2 + 1, "HTTP/1.0", 8)) ||
	    header_has(req, "content-length", NULL) || header_has(req, "transfer-encoding", NULL))
		goto bad;
	head_only = (size_t)(sp1 - req) == 4 && strncmp(req, "HEAD", 4) == 0;
	v10 = strncmp(sp2 + 1, "HTTP/1.0", 8) == 0;
	*sp2 = '\0';
	target = sp1 + 1;
	/* absolute-form: skip scheme and authority */
	if (strncmp(target, "http://", 7) == 0) {
		target = strchr(target + 7, '/');
		if (!target)
			target = "/";
	}
	if (strncmp(target, "/bytes/", 7) == 0) {
		char *end;

		errno = 0;
		n = strtoull(target + 7, &end, 10);
		if (errno || end == target + 7 || (*end && *end != '?') || n > MAX_BODY)
			goto bad;
	}
	*sp2 = ' ';
	c->close_after = v10 ? !header_has(req, "connection", "keep-alive")
			     : header_has(req, "connection", "close");
	k = snprintf(c->head, sizeof(c->head),
		     "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
		     "Content-Length: %" PRIu64 "\r\n%s\r\n%s",
		     n,
		     c->close_after ? "Connection: close\r\n"
		     : v10	    ? "Connection: keep-alive\r\n"
				    : "",
		     head_only || n != 2 ? "" : "ok");
	c->head_len = (size_t)k;
	c->head_off = 0;
	c->body_left = head_only || n == 2 ? 0 : n;
	c->body_pos = 0;
	c->sending = true;
	return 0;
bad:
	refuse(c);
	return -EINVAL;
}

/* Sends what is pending. Return: 1 done, 0 would block, -errno on error. */
static int send_pending(struct conn *c)
{
	while (c->head_off < c->head_len) {
		ssize_t k = send(c->fd, c->head + c->head_off, c->head_len - c->head_off,
				 MSG_NOSIGNAL | (c->body_left ? MSG_MORE : 0));

		if (k < 0)
			return errno == EAGAIN ? 0 : -errno;
		c->head_off += (size_t)k;
	}
	while (c->body_left) {
		/* The memfd holds MEMFD_SIZE bytes: walk it round and round. */
		off_t off = (off_t)(c->body_pos % MEMFD_SIZE);
		size_t chunk = MEMFD_SIZE - (size_t)off;
		ssize_t k;

		if (chunk > c->body_left)
			chunk = (size_t)c->body_left;
		k = sendfile(c->fd, body_fd, &off, chunk);
		if (k < 0)
			return errno == EAGAIN ? 0 : -errno;
		if (k == 0)
			return -EIO;
		c->body_left -= (uint64_t)k;
		c->body_pos += (uint64_t)k;
	}
	c->sending = false;
	return 1;
}

/*
 * Runs the connection as far as it goes without blocking.
 * Return: the epoll events to wait for, or 0 when the connection is to close.
 */
static uint32_t drive(struct conn *c)
{
	for (;;) {
		char *end;
		size_t hlen;
		int r;

		if (c->sending) {
			r = send_pending(c);
			if (r < 0)
				return 0;
			if (r == 0)
				return EPOLLOUT;
			if (c->close_after)
				return 0;
		}
		end = c->in_len >= 4 ? memmem(c->in, c->in_len, "\r\n\r\n", 4) : NULL;
		if (end) {
			hlen = (size_t)(end - c->in) + 4;
			prepare(c, hlen);
			memmove(c->in, c->in + hlen, c->in_len - hlen);
			c->in_len -= hlen;
			continue;
		}
		if (c->in_len == sizeof(c->in)) {
			/* no head end in a full buffer: refuse and close */
			c->in_len = 0;
			refuse(c);
			continue;
		}
		{
			ssize_t k = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, 0);

			if (k == 0)
				return 0;
			if (k < 0)
				return errno == EAGAIN ? EPOLLIN : 0;
			c->in_len += (size_t)k;
		}
	}
}

static void *worker(void *arg)
{
	int ep, lfd[MAX_LISTEN], i, one = 1;
	uint64_t paused_until = 0;
	struct epoll_event ev, evs[256];
	bool paused = false;

	(void)arg;
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		perror("blast: epoll_create1");
		exit(1);
	}
	for (i = 0; i < n_listen; i++) {
		lfd[i] = listen_on(i);
		if (lfd[i] < 0) {
			fprintf(stderr, "blast: listen #%d: %s\n", i, strerror(-lfd[i]));
			exit(1);
		}
		ev.events = EPOLLIN;
		ev.data.ptr = NULL;
		ev.data.u64 = (uint64_t)i;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd[i], &ev) < 0) {
			perror("blast: epoll_ctl");
			exit(1);
		}
	}
	pthread_barrier_wait(&bound);
	for (;;) {
		int n, timeout = -1;
		struct timespec ts;
		uint64_t now;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
		if (paused && now >= paused_until) {
			/* out of descriptors a while ago: listen again */
			for (i = 0; i < n_listen; i++) {
				ev.events = EPOLLIN;
				ev.data.u64 = (uint64_t)i;
				epoll_ctl(ep, EPOLL_CTL_ADD, lfd[i], &ev);
			}
			paused = false;
		}
		if (paused)
			timeout = (int)(paused_until - now);
		n = epoll_wait(ep, evs, 256, timeout);
		for (i = 0; i < n; i++) {
			struct conn *c;
			uint32_t want;

			if (evs[i].data.u64 < MAX_LISTEN) {
				int fd = accept4(lfd[evs[i].data.u64], NULL, NULL,
						 SOCK_NONBLOCK | SOCK_CLOEXEC);

				if (fd < 0) {
					if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) {
						int j;

						fprintf(stderr, "blast: accept: %s; pausing\n",
							strerror(errno));
						for (j = 0; j < n_listen; j++)
							epoll_ctl(ep, EPOLL_CTL_DEL, lfd[j], NULL);
						paused = true;
						paused_until = now + EMFILE_PAUSE_MS;
					}
					continue;
				}
				c = calloc(1, sizeof(*c));
				if (!c) {
					close(fd);
					continue;
				}
				c->fd = fd;
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				ev.events = EPOLLIN;
				ev.data.ptr = c;
				if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
					close(fd);
					free(c);
				}
				continue;
			}
			c = evs[i].data.ptr;
			want = drive(c);
			if (!want) {
				close(c->fd);
				free(c);
				continue;
			}
			ev.events = want;
			ev.data.ptr = c;
			epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
		}
	}
	return NULL;
}

static int make_body(void)
{
	char *p;
	size_t i;
	int fd = memfd_create("blast-body", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, MEMFD_SIZE) < 0)
		return -errno;
	p = mmap(NULL, MEMFD_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	for (i = 0; i < MEMFD_SIZE; i++)
		p[i] = (char)('a' + i % 26);
	munmap(p, MEMFD_SIZE);
	return fd;
}

int main(int argc, char **argv)
{
	pthread_t th[MAX_THREADS];
	const char *ready = NULL;
	struct rlimit rl;
	int opt, threads = 1, i;

	while ((opt = getopt(argc, argv, "t:r:")) != -1) {
		switch (opt) {
		case 't':
			threads = atoi(optarg);
			break;
		case 'r':
			ready = optarg;
			break;
		default:
			goto usage;
		}
	}
	if (threads < 1 || threads > MAX_THREADS || optind >= argc || argc - optind > MAX_LISTEN)
		goto usage;
	for (i = optind; i < argc; i++) {
		if (parse_listen(argv[i], n_listen) < 0) {
			fprintf(stderr, "blast: bad listen address `%s`\n", argv[i]);
			return 2;
		}
		n_listen++;
	}
	if (!in_named_netns()) {
		fprintf(stderr, "blast: refusing to run outside a named network namespace\n");
		return 2;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	body_fd = make_body();
	if (body_fd < 0) {
		fprintf(stderr, "blast: memfd: %s\n", strerror(-body_fd));
		return 1;
	}
	/* Bind once here so that a bad address fails before READY is written;
	 * the workers bind their own (SO_REUSEPORT) sockets. */
	for (i = 0; i < n_listen; i++) {
		int fd = listen_on(i);

		if (fd < 0) {
			fprintf(stderr, "blast: listen `%s`: %s\n", argv[optind + i],
				strerror(-fd));
			return 1;
		}
		close(fd);
	}
	pthread_barrier_init(&bound, NULL, (unsigned)threads + 1);
	for (i = 0; i < threads; i++) {
		if (pthread_create(&th[i], NULL, worker, NULL)) {
			fprintf(stderr, "blast: pthread_create failed\n");
			return 1;
		}
	}
	pthread_barrier_wait(&bound);
	if (ready) {
		FILE *f = fopen(ready, "w");

		if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f)) {
			fprintf(stderr, "blast: cannot write `%s`\n", ready);
			return 1;
		}
	}
	for (i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	return 0;
usage:
	fprintf(stderr, "usage: blast [-t THREADS] [-r READY_FILE] ADDR:PORT...\n");
	return 2;
}
