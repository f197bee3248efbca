// SPDX-License-Identifier: MIT
/* dnsload: a closed-loop UDP DNS load generator for the benchmarks.
 *
 *   dnsload -s SERVER[:PORT] -b FIRST_SOURCE [-n SOCKETS] [-i STEP]
 *           [-w WINDOW] [-d SECONDS] [-c COUNT] [-q NAME] [-t TYPE]
 *
 * Opens SOCKETS UDP sockets, the k-th bound to FIRST_SOURCE + k * STEP (STEP
 * 0: all on one address, different ports; STEP 1: consecutive addresses,
 * e.g. one per registered sandbox) and connected to SERVER (port 53 by
 * default). Each socket keeps WINDOW queries (A for NAME unless -t) in
 * flight and sends the next as soon as one is answered, for SECONDS (5), or
 * until COUNT queries are sent and answered (a readiness probe that must not
 * use up a sandbox's rate budget). A query unanswered after 1 s is counted
 * lost and replaced. At the end it
 * prints one line:
 *
 *   sent N answered N noerror N nxdomain N refused N other N lost N
 *   seconds S qps Q noerror_qps Q p50_us U p99_us U
 *
 * (qps counts every answer; latencies are of answered queries, from 1 us
 * buckets up to 1 ms, then 10 us to 100 ms). Single-threaded, epoll. It
 * refuses to run outside a named network namespace: the test world only. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "netns_guard.h"

#define MAX_SOCKETS 4096
#define MAX_WINDOW 64
#define SLOTS 256 /* per socket; IDs are socket-local, slot = id % SLOTS */
#define LOSS_NS 1000000000ull
#define HIST_FINE 1000	 /* 1 us buckets below 1 ms */
#define HIST_COARSE 9900 /* 10 us buckets from 1 ms to 100 ms */

struct sock {
	int fd;
	uint16_t next_id;
	unsigned inflight;
	uint64_t sent_at[SLOTS]; /* 0: slot free */
};

static uint8_t query[300];
static size_t query_len;
static uint64_t hist[HIST_FINE + HIST_COARSE + 1];
static uint64_t n_sent, n_ans, n_lost, n_rcode[16];
static uint64_t max_sent = UINT64_MAX;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int build_query(const char *name, uint16_t qtype)
{
	size_t o = 12;
	const char *p = name;

	memset(query, 0, 12);
	query[2] = 0x01; /* RD */
	query[5] = 1;	 /* QDCOUNT */
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);

		if (l == 0 || l > 63 || o + l + 1 > 255 + 12)
			return -1;
		query[o++] = (uint8_t)l;
		memcpy(query + o, p, l);
		o += l;
		p += l + (dot ? 1 : 0);
	}
	query[o++] = 0;
	query[o++] = (uint8_t)(qtype >> 8);
	query[o++] = (uint8_t)qtype;
	query[o++] = 0;
	query[o++] = 1;
	query_len = o;
	return 0;
}

static void send_one(struct sock *s)
{
	unsigned slot;

	/* find a free slot by advancing the id; the window is far below SLOTS
	 */
	for (unsigned k = 0; k < SLOTS; k++) {
		slot = s->next_id % SLOTS;
		if (!s->sent_at[slot])
			break;
		s->next_id++;
	}
	slot = s->next_id % SLOTS;
	if (s->sent_at[slot] || n_sent >= max_sent)
		return;
	query[0] = (uint8_t)(s->next_id >> 8);
	query[1] = (uint8_t)s->next_id;
	if (send(s->fd, query, query_len, MSG_DONTWAIT) != (ssize_t)query_len)
		return; /* a full buffer: the loss timer refills the window */
	s->sent_at[slot] = now_ns();
	s->next_id++;
	s->inflight++;
	n_sent++;
}

static void record(uint64_t ns)
{
	uint64_t us = ns / 1000;

	if (us < HIST_FINE)
		hist[us]++;
	else if (us < 100000)
		hist[HIST_FINE + (us - HIST_FINE) / 10]++;
	else
		hist[HIST_FINE + HIST_COARSE]++;
}

static uint64_t percentile(double p)
{
	uint64_t total = 0, want, acc = 0;
	size_t i;

	for (i = 0; i < sizeof(hist) / sizeof(hist[0]); i++)
		total += hist[i];
	if (!total)
		return 0;
	want = (uint64_t)(p * (double)total);
	for (i = 0; i < sizeof(hist) / sizeof(hist[0]); i++) {
		acc += hist[i];
		if (acc > want)
			return i < HIST_FINE ? i : HIST_FINE + (i - HIST_FINE) * 10;
	}
	return 100000;
}

static void usage(void)
{
	fprintf(stderr, "usage: dnsload -s SERVER[:PORT] -b FIRST_SOURCE [-n "
			"SOCKETS] [-i STEP]\n"
			"               [-w WINDOW] [-d SECONDS] [-c COUNT] "
			"[-q NAME] [-t QTYPE-NUMBER]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *server = NULL, *first = NULL, *name = "echo.world.test";
	unsigned n = 1, step = 0, window = 1, secs = 5, qtype = 1, port = 53;
	struct sockaddr_in dst = { .sin_family = AF_INET };
	struct epoll_event evs[256];
	struct in_addr src0;
	struct sock *socks;
	struct rlimit rl;
	uint64_t t0, t_end, t_stop, last_check;
	char host[64];
	int ep, opt;

	while ((opt = getopt(argc, argv, "s:b:n:i:w:d:c:q:t:")) != -1) {
		switch (opt) {
		case 's':
			server = optarg;
			break;
		case 'b':
			first = optarg;
			break;
		case 'n':
			n = (unsigned)atoi(optarg);
			break;
		case 'i':
			step = (unsigned)atoi(optarg);
			break;
		case 'w':
			window = (unsigned)atoi(optarg);
			break;
		case 'd':
			secs = (unsigned)atoi(optarg);
			break;
		case 'c':
			max_sent = strtoull(optarg, NULL, 10);
			break;
		case 'q':
			name = optarg;
			break;
		case 't':
			qtype = (unsigned)atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (!server || !first || n == 0 || n > MAX_SOCKETS || window == 0 || window > MAX_WINDOW ||
	    secs == 0 || secs > 600 || qtype > 65535)
		usage();
	if (!in_named_netns()) {
		fprintf(stderr, "dnsload: refusing to run outside a named "
				"network namespace\n");
		return 2;
	}
	snprintf(host, sizeof(host), "%s", server);
	if (strchr(host, ':')) {
		port = (unsigned)atoi(strchr(host, ':') + 1);
		*strchr(host, ':') = '\0';
	}
	if (inet_pton(AF_INET, host, &dst.sin_addr) != 1 || port == 0 || port > 65535 ||
	    inet_pton(AF_INET, first, &src0) != 1 || build_query(name, (uint16_t)qtype) < 0)
		usage();
	dst.sin_port = htons((uint16_t)port);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}

	socks = calloc(n, sizeof(*socks));
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (!socks || ep < 0) {
		perror("dnsload");
		return 1;
	}
	for (unsigned k = 0; k < n; k++) {
		struct sockaddr_in src = { .sin_family = AF_INET };
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = k };

		src.sin_addr.s_addr = htonl(ntohl(src0.s_addr) + k * step);
		socks[k].fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		socks[k].next_id = (uint16_t)(k * 7919);
		if (socks[k].fd < 0 ||
		    bind(socks[k].fd, (struct sockaddr *)&src, sizeof(src)) < 0 ||
		    connect(socks[k].fd, (struct sockaddr *)&dst, sizeof(dst)) < 0 ||
		    epoll_ctl(ep, EPOLL_CTL_ADD, socks[k].fd, &ev) < 0) {
			fprintf(stderr, "dnsload: socket %u (%s): %s\n", k, inet_ntoa(src.sin_addr),
				strerror(errno));
			return 1;
		}
	}

	t0 = now_ns();
	t_stop = t0 + (uint64_t)secs * 1000000000ull;
	t_end = t_stop + 300000000ull; /* collect late answers for 300 ms */
	last_check = t0;
	for (unsigned k = 0; k < n; k++)
		for (unsigned j = 0; j < window; j++)
			send_one(&socks[k]);

	for (;;) {
		uint64_t t = now_ns();
		int m;

		if (t >= t_end || (n_sent >= max_sent && n_ans + n_lost >= n_sent))
			break;
		m = epoll_wait(ep, evs, 256, 10);
		for (int e = 0; e < m; e++) {
			struct sock *s = &socks[evs[e].data.u32];
			uint8_t r[1500];
			ssize_t got;

			while ((got = recv(s->fd, r, sizeof(r), MSG_DONTWAIT)) >= 12) {
				uint16_t id = (uint16_t)(r[0] << 8 | r[1]);
				unsigned slot = id % SLOTS;

				if (!(r[2] & 0x80) || !s->sent_at[slot])
					continue;
				record(now_ns() - s->sent_at[slot]);
				s->sent_at[slot] = 0;
				s->inflight--;
				n_ans++;
				n_rcode[r[3] & 0xf]++;
				if (now_ns() < t_stop)
					send_one(s);
			}
		}
		t = now_ns();
		if (t - last_check >= 100000000ull) {
			last_check = t;
			for (unsigned k = 0; k < n; k++) {
				struct sock *s = &socks[k];

				for (unsigned j = 0; j < SLOTS; j++) {
					if (s->sent_at[j] && t - s->sent_at[j] > LOSS_NS) {
						s->sent_at[j] = 0;
						s->inflight--;
						n_lost++;
					}
				}
				while (t < t_stop && s->inflight < window) {
					uint64_t before = n_sent;

					send_one(s);
					if (n_sent == before)
						break;
				}
			}
		}
	}
	{
		double el = (double)(t_stop - t0) / 1e9;
		uint64_t other = n_ans - n_rcode[0] - n_rcode[3] - n_rcode[5];

		/* Queries still in flight at the end are neither answered nor
		 * lost. */
		printf("sent %llu answered %llu noerror %llu nxdomain %llu "
		       "refused %llu other %llu "
		       "lost %llu seconds %.2f qps %.0f noerror_qps %.0f "
		       "p50_us %llu p99_us %llu\n",
		       (unsigned long long)n_sent, (unsigned long long)n_ans,
		       (unsigned long long)n_rcode[0], (unsigned long long)n_rcode[3],
		       (unsigned long long)n_rcode[5], (unsigned long long)other,
		       (unsigned long long)n_lost, el, (double)n_ans / el, (double)n_rcode[0] / el,
		       (unsigned long long)percentile(0.5), (unsigned long long)percentile(0.99));
	}
	return 0;
}
