// SPDX-License-Identifier: MIT
/* dnsflood: a bounded UDP DNS flood from one sandbox, for the fairness check
 * of tests/integration/test_dns.sh.
 *
 *   dnsflood -s SERVER[:PORT] [-n SOCKETS] [-c COUNT] [-d SECONDS] [-q NAME]
 *            [-l LENGTH]
 *
 * Sends A queries for NAME (echo.world.test) to SERVER (port 53) over
 * SOCKETS (16) UDP sockets, that is from as many source ports, so that
 * SO_REUSEPORT puts the flood on every worker's socket, as fast as
 * sendmmsg() goes and never waiting for an answer (answers are read and
 * thrown away, so that our own buffers never matter), until COUNT
 * (2,000,000) are sent or SECONDS (3) have passed. Both are capped. With
 * LENGTH, each query is padded with zeros to that many bytes (at most 1400,
 * one unfragmented datagram). Prints
 *
 *   sent N answered N seconds S
 *
 * It refuses to run outside a named network namespace: the test world only.
 * Compiled by the test that uses it (one file, libc only). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../bench/netns_guard.h"

#define MAX_SOCKETS 256
#define MAX_COUNT 20000000ull
#define MAX_SECONDS 30.0
#define BATCH 64

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t make_query(uint8_t *q, size_t len, const char *name)
{
	static const uint8_t head[12] = { 0, 0, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0 };
	size_t o = sizeof(head);
	const char *p = name;

	memcpy(q, head, sizeof(head));
	while (*p) {
		size_t l = strcspn(p, ".");

		if (l == 0 || l > 63 || o + 1 + l + 5 >= len)
			return 0;
		q[o++] = (uint8_t)l;
		memcpy(q + o, p, l);
		o += l;
		p += l;
		if (*p == '.')
			p++;
	}
	q[o++] = 0;
	q[o++] = 0;
	q[o++] = 1; /* A */
	q[o++] = 0;
	q[o++] = 1; /* IN */
	return o;
}

int main(int argc, char **argv)
{
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(53) };
	unsigned long long count = 2000000, sent = 0, answered = 0;
	const char *server = NULL, *name = "echo.world.test";
	double secs = 3, t0, deadline;
	struct mmsghdr msg[BATCH];
	struct iovec iov[BATCH];
	uint8_t q[BATCH][1400], junk[512];
	int fds[MAX_SOCKETS], nsock = 16, opt, i, k;
	size_t qlen, pad = 0;
	char *colon;

	while ((opt = getopt(argc, argv, "s:n:c:d:q:l:")) != -1) {
		switch (opt) {
		case 's':
			server = optarg;
			break;
		case 'n':
			nsock = atoi(optarg);
			break;
		case 'c':
			count = strtoull(optarg, NULL, 10);
			break;
		case 'd':
			secs = atof(optarg);
			break;
		case 'q':
			name = optarg;
			break;
		case 'l':
			pad = strtoul(optarg, NULL, 10);
			break;
		default:
			goto usage;
		}
	}
	if (!server || nsock < 1 || nsock > MAX_SOCKETS || count < 1 || !(secs > 0))
		goto usage;
	if (count > MAX_COUNT)
		count = MAX_COUNT;
	if (secs > MAX_SECONDS)
		secs = MAX_SECONDS;
	if (!in_named_netns()) {
		fprintf(stderr, "dnsflood: not in a named network namespace; refusing\n");
		return 1;
	}
	colon = strchr(server, ':');
	if (colon) {
		*colon = '\0';
		dst.sin_port = htons((uint16_t)atoi(colon + 1));
	}
	if (inet_pton(AF_INET, server, &dst.sin_addr) != 1)
		goto usage;
	qlen = make_query(q[0], sizeof(q[0]), name);
	if (!qlen || pad > sizeof(q[0]))
		goto usage;
	if (pad > qlen) {
		memset(q[0] + qlen, 0, pad - qlen);
		qlen = pad;
	}
	for (k = 0; k < BATCH; k++) {
		if (k)
			memcpy(q[k], q[0], qlen);
		q[k][0] = (uint8_t)(k >> 8);
		q[k][1] = (uint8_t)k;
		iov[k] = (struct iovec){ q[k], qlen };
		memset(&msg[k], 0, sizeof(msg[k]));
		msg[k].msg_hdr.msg_iov = &iov[k];
		msg[k].msg_hdr.msg_iovlen = 1;
	}
	for (i = 0; i < nsock; i++) {
		fds[i] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&dst, sizeof(dst)) < 0) {
			perror("dnsflood: socket");
			return 1;
		}
	}
	t0 = now_s();
	deadline = t0 + secs;
	/* Bounded by COUNT and by the clock, read once a round of sockets. */
	while (sent < count && now_s() < deadline) {
		for (i = 0; i < nsock && sent < count; i++) {
			unsigned want = count - sent < BATCH ? (unsigned)(count - sent) : BATCH;
			int n = sendmmsg(fds[i], msg, want, MSG_DONTWAIT), r;

			if (n > 0)
				sent += (unsigned)n;
			for (r = 0; r < 2 * BATCH; r++) {
				if (recv(fds[i], junk, sizeof(junk), MSG_DONTWAIT) <= 0)
					break;
				answered++;
			}
		}
	}
	printf("sent %llu answered %llu seconds %.3f\n", sent, answered, now_s() - t0);
	return 0;
usage:
	fprintf(stderr, "usage: dnsflood -s SERVER[:PORT] [-n SOCKETS] [-c "
			"COUNT] [-d SECONDS] "
			"[-q NAME] [-l LENGTH]\n");
	return 2;
}
