// SPDX-License-Identifier: MIT
/* sluice probe: sockets. One exchange with a peer (TCP, UDP, ICMP), every step
 * bounded by a deadline, and what came back (data, reset, an ICMP error,
 * silence) told apart. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <netinet/icmp6.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "probe/probe_internal.h"

/**
 * probe_now_ms() - monotonic time in milliseconds.
 *
 * Return: the time.
 */
long long probe_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/**
 * probe_random() - random bytes (getrandom(2); a clock mix if that fails).
 * @buf: out
 * @n: how many
 */
void probe_random(void *buf, size_t n)
{
	unsigned char *p = buf;
	size_t i;

	if (getrandom(buf, n, 0) == (ssize_t)n)
		return;
	for (i = 0; i < n; i++)
		p[i] = (unsigned char)((probe_now_ms() * 2654435761u + i * 40503u +
					(size_t)getpid()) >>
				       7);
}

static socklen_t sockaddr_of(const struct probe_ip *ip, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (ip->af == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		s4->sin_addr = ip->u.v4;
		return sizeof(*s4);
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	s6->sin6_family = AF_INET6;
	s6->sin6_port = htons(port);
	s6->sin6_addr = ip->u.v6;
	return sizeof(*s6);
}

static int remaining(long long deadline)
{
	long long left = deadline - probe_now_ms();

	return left > 0 ? (int)left : 0;
}

static void xinit(struct probe_xchg *x, int timeout_ms)
{
	x->kind = PX_SILENT;
	x->err = 0;
	x->timeout_ms = timeout_ms;
	x->icmp_af = 0;
	x->icmp_type = x->icmp_code = -1;
	x->len = 0;
	x->data[0] = '\0';
}

/**
 * probe_route_ok() - is there a route to @ip? (a UDP connect: nothing is sent)
 * @ip: the address
 *
 * Return: 0, or a negative errno (-ENETUNREACH: no route; -EAFNOSUPPORT:
 * no such family here).
 */
int probe_route_ok(const struct probe_ip *ip)
{
	struct sockaddr_storage ss;
	socklen_t sl = sockaddr_of(ip, 9, &ss);
	int fd, r = 0;

	fd = socket(ip->af, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0)
		r = -errno;
	close(fd);
	return r;
}

/**
 * probe_tcp_connect() - a TCP connection, bounded by @timeout_ms.
 * @ip: where to
 * @port: its port
 * @timeout_ms: the bound for the handshake
 * @x: on failure: PX_NOROUTE, PX_ERROR (err) or PX_TIMEOUT
 *
 * Return: a connected, non-blocking socket (the caller closes it), or -1.
 */
int probe_tcp_connect(const struct probe_ip *ip, uint16_t port, int timeout_ms,
		      struct probe_xchg *x)
{
	struct sockaddr_storage ss;
	socklen_t sl = sockaddr_of(ip, port, &ss);
	long long deadline = probe_now_ms() + timeout_ms;
	struct pollfd pfd;
	int fd, e = 0;
	socklen_t el = sizeof(e);

	xinit(x, timeout_ms);
	fd = socket(ip->af, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		x->err = errno;
		x->kind = (errno == EAFNOSUPPORT) ? PX_NOROUTE : PX_ERROR;
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&ss, sl) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		x->err = errno;
		x->kind = (errno == ENETUNREACH || errno == EADDRNOTAVAIL) ? PX_NOROUTE : PX_ERROR;
		close(fd);
		return -1;
	}
	pfd.fd = fd;
	pfd.events = POLLOUT;
	for (;;) {
		int n = poll(&pfd, 1, remaining(deadline));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			x->kind = PX_TIMEOUT;
			close(fd);
			return -1;
		}
		break;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
		e = errno;
	if (e) {
		x->err = e;
		x->kind = PX_ERROR;
		close(fd);
		return -1;
	}
	return fd;
}

static bool complete(const struct probe_xchg *x, enum probe_rmode mode)
{
	switch (mode) {
	case PR_ANY:
		return x->len > 0;
	case PR_HTTP:
		return memmem(x->data, x->len, "\r\n\r\n", 4) != NULL;
	case PR_TLS:
		return x->len >= 7;
	case PR_DNSTCP:
		return x->len >= 2 &&
		       x->len >= 2 + (size_t)((uint8_t)x->data[0] << 8 | (uint8_t)x->data[1]);
	case PR_NONE:
		return true;
	}
	return true;
}

/**
 * probe_tcp_talk() - send @req on a connected socket and read the answer.
 * @fd: the socket (non-blocking; not closed here)
 * @req: what to send (may be NULL with @reqlen 0: only listen)
 * @reqlen: its length
 * @mode: when the answer is complete enough to judge
 * @timeout_ms: the bound for sending and reading together
 * @x: PX_DATA (data, len: whatever came before a reset or close too),
 *     PX_RESET, PX_CLOSED or PX_SILENT
 */
void probe_tcp_talk(int fd, const void *req, size_t reqlen, enum probe_rmode mode, int timeout_ms,
		    struct probe_xchg *x)
{
	long long deadline = probe_now_ms() + timeout_ms;
	const char *p = req;
	struct pollfd pfd = { .fd = fd };

	xinit(x, timeout_ms);
	while (reqlen > 0) {
		ssize_t k = send(fd, p, reqlen, MSG_NOSIGNAL);

		if (k > 0) {
			p += k;
			reqlen -= (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN) {
			pfd.events = POLLOUT;
			if (poll(&pfd, 1, remaining(deadline)) <= 0 && remaining(deadline) == 0)
				return; /* PX_SILENT */
			continue;
		}
		x->err = k < 0 ? errno : EPIPE;
		x->kind = PX_RESET;
		return;
	}
	if (mode == PR_NONE)
		return;
	pfd.events = POLLIN;
	while (x->len < sizeof(x->data) - 1 && !complete(x, mode)) {
		ssize_t k;
		int n = poll(&pfd, 1, remaining(deadline));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* the deadline: silent, or data so far */
		k = recv(fd, x->data + x->len, sizeof(x->data) - 1 - x->len, 0);
		if (k > 0) {
			x->len += (size_t)k;
			continue;
		}
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (x->len == 0) {
			x->err = k < 0 ? errno : 0;
			x->kind = k < 0 ? PX_RESET : PX_CLOSED;
			return;
		}
		break;
	}
	x->data[x->len] = '\0';
	if (x->len)
		x->kind = PX_DATA;
}

/**
 * probe_tcp_exchange() - connect, send @req, read the answer (see
 * probe_tcp_talk()).
 * @ip: where to
 * @port: its port
 * @req: what to send, or NULL to only listen (a server that speaks first)
 * @reqlen: its length
 * @mode: when the answer is complete
 * @timeout_ms: the bound for the connect, and again for the answer
 * @x: the outcome
 */
void probe_tcp_exchange(const struct probe_ip *ip, uint16_t port, const void *req, size_t reqlen,
			enum probe_rmode mode, int timeout_ms, struct probe_xchg *x)
{
	int fd = probe_tcp_connect(ip, port, timeout_ms, x);

	if (fd < 0)
		return;
	probe_tcp_talk(fd, req, reqlen, mode, timeout_ms, x);
	close(fd);
}

/* The ICMP error queued on @fd (IP_RECVERR), if any: 1 when @x was filled. */
static int read_errqueue(int fd, struct probe_xchg *x)
{
	char cbuf[512], dbuf[256];
	struct iovec iov = { dbuf, sizeof(dbuf) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;

	if (recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
		return 0;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		struct sock_extended_err ee;

		if (!((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
		      (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)))
			continue;
		memcpy(&ee, CMSG_DATA(c), sizeof(ee));
		x->err = (int)ee.ee_errno;
		if (ee.ee_origin == SO_EE_ORIGIN_ICMP || ee.ee_origin == SO_EE_ORIGIN_ICMP6) {
			x->kind = PX_ICMP;
			x->icmp_af = ee.ee_origin == SO_EE_ORIGIN_ICMP6 ? AF_INET6 : AF_INET;
			x->icmp_type = ee.ee_type;
			x->icmp_code = ee.ee_code;
		} else {
			x->kind = PX_ERROR;
		}
		return 1;
	}
	return 0;
}

static void recverr_on(int fd, int af)
{
	int one = 1;

	if (af == AF_INET)
		setsockopt(fd, SOL_IP, IP_RECVERR, &one, sizeof(one));
	else
		setsockopt(fd, SOL_IPV6, IPV6_RECVERR, &one, sizeof(one));
}

/* Wait for a datagram (copied into @x) or a queued ICMP error on @fd. */
static void dgram_wait(int fd, long long deadline, struct probe_xchg *x)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	for (;;) {
		int n = poll(&pfd, 1, remaining(deadline));
		ssize_t k;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* PX_SILENT */
		if (pfd.revents & POLLERR) {
			if (read_errqueue(fd, x))
				return;
		}
		k = recv(fd, x->data, sizeof(x->data) - 1, MSG_DONTWAIT);
		if (k >= 0) {
			x->len = (size_t)k;
			x->data[x->len] = '\0';
			x->kind = PX_DATA;
			return;
		}
		if (errno == EAGAIN || errno == EINTR)
			continue;
		/* An error without a queued ICMP message: report errno. */
		if (!read_errqueue(fd, x)) {
			x->err = errno;
			x->kind = PX_ERROR;
		}
		return;
	}
}

/**
 * probe_udp_exchange() - send one datagram and wait for a reply or an ICMP
 * error.
 * @ip: where to
 * @port: its port
 * @msg: the datagram
 * @len: its length
 * @timeout_ms: how long to wait
 * @x: PX_DATA (a reply), PX_ICMP (type, code), PX_ERROR (sending failed),
 *     PX_NOROUTE or PX_SILENT
 */
void probe_udp_exchange(const struct probe_ip *ip, uint16_t port, const void *msg, size_t len,
			int timeout_ms, struct probe_xchg *x)
{
	struct sockaddr_storage ss;
	socklen_t sl = sockaddr_of(ip, port, &ss);
	long long deadline = probe_now_ms() + timeout_ms;
	int fd;

	xinit(x, timeout_ms);
	fd = socket(ip->af, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		x->err = errno;
		x->kind = errno == EAFNOSUPPORT ? PX_NOROUTE : PX_ERROR;
		return;
	}
	recverr_on(fd, ip->af);
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0) {
		x->err = errno;
		x->kind = (errno == ENETUNREACH || errno == EADDRNOTAVAIL) ? PX_NOROUTE : PX_ERROR;
		close(fd);
		return;
	}
	if (send(fd, msg, len, 0) < 0) {
		if (!read_errqueue(fd, x)) {
			x->err = errno;
			x->kind = PX_ERROR;
		}
		close(fd);
		return;
	}
	dgram_wait(fd, deadline, x);
	close(fd);
}

static uint16_t csum(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t s = 0;
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(b[i] << 8 | b[i + 1]);
	if (n & 1)
		s += (uint32_t)(b[n - 1] << 8);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return htons((uint16_t)~s);
}

/* A raw ICMP socket: our echo request, then read every ICMP packet until
 * the reply from @ip or an error about our request. */
static int raw_echo(const struct probe_ip *ip, long long deadline, struct probe_xchg *x)
{
	struct sockaddr_storage ss;
	socklen_t sl = sockaddr_of(ip, 0, &ss);
	uint8_t pkt[64], in[1500];
	uint16_t id;
	int fd;

	fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
	if (fd < 0)
		return -errno;
	probe_random(&id, sizeof(id));
	memset(pkt, 0, sizeof(pkt));
	pkt[0] = ICMP_ECHO;
	memcpy(pkt + 4, &id, 2);
	pkt[7] = 1;
	memcpy(pkt + 8, "sluice-probe", 12);
	{
		uint16_t c = csum(pkt, 20);

		memcpy(pkt + 2, &c, 2);
	}
	if (sendto(fd, pkt, 20, 0, (struct sockaddr *)&ss, sl) < 0) {
		x->err = errno;
		x->kind = (errno == ENETUNREACH) ? PX_NOROUTE : PX_ERROR;
		close(fd);
		return 0;
	}
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t k;
		size_t ihl;
		struct iphdr iph;

		if (poll(&pfd, 1, remaining(deadline)) <= 0)
			break;
		k = recv(fd, in, sizeof(in), MSG_DONTWAIT);
		if (k < (ssize_t)sizeof(iph) + 8)
			continue;
		memcpy(&iph, in, sizeof(iph));
		ihl = (size_t)iph.ihl * 4;
		if ((size_t)k < ihl + 8)
			continue;
		if (in[ihl] == ICMP_ECHOREPLY && iph.saddr == ip->u.v4.s_addr &&
		    !memcmp(in + ihl + 4, &id, 2)) {
			x->kind = PX_DATA;
			x->len = (size_t)k - ihl;
			return close(fd), 0;
		}
		if (in[ihl] == ICMP_DEST_UNREACH || in[ihl] == ICMP_TIME_EXCEEDED) {
			/* Ours if the quoted packet is our echo to @ip. */
			const uint8_t *q = in + ihl + 8;
			size_t qlen = (size_t)k - ihl - 8, qihl;
			struct iphdr qh;

			if (qlen < sizeof(qh) + 8)
				continue;
			memcpy(&qh, q, sizeof(qh));
			qihl = (size_t)qh.ihl * 4;
			if (qlen < qihl + 8 || qh.daddr != ip->u.v4.s_addr ||
			    qh.protocol != IPPROTO_ICMP || memcmp(q + qihl + 4, &id, 2))
				continue;
			x->kind = PX_ICMP;
			x->icmp_af = AF_INET;
			x->icmp_type = in[ihl];
			x->icmp_code = in[ihl + 1];
			return close(fd), 0;
		}
	}
	close(fd);
	return 0; /* PX_SILENT */
}

/**
 * probe_icmp_echo() - one ICMP echo request to @ip, and what came back.
 * @ip: where to
 * @raw: a raw socket (needs CAP_NET_RAW; IPv4 only) instead of an
 *       unprivileged ping socket (needs net.ipv4.ping_group_range)
 * @timeout_ms: how long to wait
 * @x: PX_DATA (an echo reply), PX_ICMP, PX_ERROR, PX_NOROUTE or PX_SILENT
 *
 * Return: 0, or a negative errno when the socket cannot be made (nothing sent).
 */
int probe_icmp_echo(const struct probe_ip *ip, bool raw, int timeout_ms, struct probe_xchg *x)
{
	struct sockaddr_storage ss;
	socklen_t sl = sockaddr_of(ip, 0, &ss);
	long long deadline = probe_now_ms() + timeout_ms;
	uint8_t pkt[20];
	int fd;

	xinit(x, timeout_ms);
	if (raw)
		return ip->af == AF_INET ? raw_echo(ip, deadline, x) : -EAFNOSUPPORT;
	fd = socket(ip->af, SOCK_DGRAM | SOCK_CLOEXEC,
		    ip->af == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6);
	if (fd < 0)
		return -errno;
	recverr_on(fd, ip->af);
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0) {
		x->err = errno;
		x->kind = (errno == ENETUNREACH || errno == EADDRNOTAVAIL) ? PX_NOROUTE : PX_ERROR;
		close(fd);
		return 0;
	}
	/* The kernel sets the identifier and, for IPv4, the checksum. */
	memset(pkt, 0, sizeof(pkt));
	pkt[0] = ip->af == AF_INET ? ICMP_ECHO : ICMP6_ECHO_REQUEST;
	pkt[7] = 1;
	memcpy(pkt + 8, "sluice-probe", 12);
	if (send(fd, pkt, sizeof(pkt), 0) < 0) {
		if (!read_errqueue(fd, x)) {
			x->err = errno;
			x->kind = PX_ERROR;
		}
		close(fd);
		return 0;
	}
	dgram_wait(fd, deadline, x);
	if (x->kind == PX_DATA && x->len >= 1 &&
	    (uint8_t)x->data[0] != (ip->af == AF_INET ? ICMP_ECHOREPLY : ICMP6_ECHO_REPLY))
		x->kind = PX_SILENT; /* not a reply: nothing else is expected here */
	close(fd);
	return 0;
}

/**
 * probe_icmp_text() - what an ICMP destination-unreachable code means.
 * @af: AF_INET or AF_INET6
 * @type: the ICMP type
 * @code: its code
 *
 * Return: a static string.
 */
const char *probe_icmp_text(int af, int type, int code)
{
	if (af == AF_INET && type == ICMP_DEST_UNREACH) {
		switch (code) {
		case 0:
			return "network unreachable";
		case 1:
			return "host unreachable";
		case 2:
			return "protocol unreachable";
		case 3:
			return "port unreachable";
		case 9:
			return "network administratively prohibited";
		case 10:
			return "host administratively prohibited";
		case 13:
			return "admin-prohibited";
		default:
			return "destination unreachable";
		}
	}
	if (af == AF_INET6 && type == ICMP6_DST_UNREACH) {
		switch (code) {
		case 0:
			return "no route to destination";
		case 1:
			return "admin-prohibited";
		case 3:
			return "address unreachable";
		case 4:
			return "port unreachable";
		case 5:
			return "source address failed policy";
		case 6:
			return "reject route";
		default:
			return "destination unreachable";
		}
	}
	if ((af == AF_INET && type == ICMP_TIME_EXCEEDED) ||
	    (af == AF_INET6 && type == ICMP6_TIME_EXCEEDED))
		return "time exceeded";
	return "ICMP error";
}

static const char *errno_text(int e)
{
	switch (e) {
	case ECONNREFUSED:
		return "refused (TCP reset or ICMP port unreachable)";
	case EHOSTUNREACH:
		return "host unreachable (ICMP unreachable or "
		       "admin-prohibited)";
	case ENETUNREACH:
		return "network unreachable";
	case EACCES:
	case EPERM:
		return "not permitted here (a local firewall rule)";
	case ECONNRESET:
		return "reset";
	case EPIPE:
		return "closed by the peer";
	case EADDRNOTAVAIL:
		return "no source address for it";
	default:
		return strerror(e);
	}
}

/**
 * probe_xchg_describe() - what happened, in words (without any data).
 * @x: the outcome
 * @buf: out
 * @n: its size
 */
void probe_xchg_describe(const struct probe_xchg *x, char *buf, size_t n)
{
	double s = x->timeout_ms / 1000.0;

	switch (x->kind) {
	case PX_ERROR:
		snprintf(buf, n, "%s", errno_text(x->err));
		break;
	case PX_TIMEOUT:
		snprintf(buf, n, "no answer within %gs", s);
		break;
	case PX_RESET:
		snprintf(buf, n, "connection reset");
		break;
	case PX_CLOSED:
		snprintf(buf, n, "closed without an answer");
		break;
	case PX_SILENT:
		snprintf(buf, n, "no answer within %gs", s);
		break;
	case PX_DATA:
		snprintf(buf, n, "answered (%zu bytes)", x->len);
		break;
	case PX_ICMP:
		snprintf(buf, n, "ICMP %s (type %d code %d)",
			 probe_icmp_text(x->icmp_af, x->icmp_type, x->icmp_code), x->icmp_type,
			 x->icmp_code);
		break;
	case PX_NOROUTE:
		snprintf(buf, n, "no route (%s)", errno_text(x->err ? x->err : ENETUNREACH));
		break;
	}
}

/**
 * probe_default_gateway() - the IPv4 gateway of the default route
 * (/proc/net/route).
 * @gw: the result
 *
 * Return: 0, or -ENOENT when there is none.
 */
int probe_default_gateway(struct probe_ip *gw)
{
	char line[256];
	FILE *f = fopen("/proc/net/route", "re");
	int r = -ENOENT;

	if (!f)
		return -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		char ifname[64];
		unsigned long dst, gwv, mask;
		unsigned flags;

		/* The kernel's own hex columns: sscanf's silence on overflow
		 * cannot matter here. */
		// NOLINTNEXTLINE(cert-err34-c)
		if (sscanf(line, "%63s %lx %lx %x %*d %*d %*d %lx", ifname, &dst, &gwv, &flags,
			   &mask) != 5)
			continue;
		if (dst == 0 && mask == 0 && gwv != 0) {
			memset(gw, 0, sizeof(*gw));
			gw->af = AF_INET;
			gw->u.v4.s_addr = (uint32_t)gwv; /* printed as the raw 32-bit word */
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}
