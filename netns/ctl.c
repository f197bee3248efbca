// SPDX-License-Identifier: MIT
/* The client side of the broker's control socket: one request line, one
 * answer. In the library, not in cli/: create, delete and the sandbox
 * record (state.c) register and unregister through it, and so do
 * sluice-cni and sluice-oci-hook. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/ctlproto.h"
#include "common/err.h"
#include "common/text.h"
#include "netns/netns.h"

/* A refusal that passes (netns_ctl_transient()) is asked again, bounded:
 * at most this many times more, this far apart (1 s in all). */
#define CTL_RETRIES 20
#define CTL_RETRY_US 50000

const char *netns_socket_path = "/run/sluice/sluiced.sock";

/**
 * netns_ctl_send() - connect to sluiced and send one request line, without
 * waiting for the answer
 * @line: the request, without its newline
 *
 * The broker works on the request while the caller goes on; the answer is
 * read with netns_ctl_recv(), which closes the connection.
 *
 * Return: the connection (an fd), or a negative errno when the broker
 * cannot be reached.
 */
int netns_ctl_send(const char *line)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 30 };
	struct iovec iov[2] = { { .iov_base = (void *)line, .iov_len = strlen(line) },
				{ .iov_base = "\n", .iov_len = 1 } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	int fd, r;

	if (!text_copy(sun.sun_path, sizeof(sun.sun_path), netns_socket_path))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	/* The line and its newline in one message: one wake-up of the broker. */
	errno = 0;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    sendmsg(fd, &msg, MSG_NOSIGNAL) != (ssize_t)(iov[0].iov_len + 1)) {
		r = errno ? -errno : -EIO;
		close(fd);
		return r;
	}
	return fd;
}

/* netns_ctl_recv(); *@refused says the broker answered with an error,
 * which -EPROTO alone cannot (a socket call may fail so too). */
static int ctl_recv(int fd, char **resp, bool *refused)
{
	size_t got = 0;
	char *buf;

	*resp = NULL;
	*refused = false;
	if (fd < 0)
		return fd;
	buf = malloc(CTL_RESP_MAX + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t k = recv(fd, buf + got, CTL_RESP_MAX - got, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
		if (got == CTL_RESP_MAX)
			break;
	}
	close(fd);
	buf[got] = '\0';
	if (strncmp(buf, CTL_OK, strlen(CTL_OK)) == 0) {
		memmove(buf, buf + strlen(CTL_OK), got - strlen(CTL_OK) + 1);
		*resp = buf;
		return 0;
	}
	if (strncmp(buf, CTL_ERR, strlen(CTL_ERR)) == 0) {
		memmove(buf, buf + strlen(CTL_ERR), got - strlen(CTL_ERR) + 1);
		buf[strcspn(buf, "\n")] = '\0';
		*resp = buf;
		*refused = true;
		return -EPROTO;
	}
	free(buf);
	return -EIO;
}

/**
 * netns_ctl_recv() - the answer to a request of netns_ctl_send()
 * @fd:   the connection; closed here (a negative errno is returned as is)
 * @resp: the answer after "ok\n", or the broker's error message (malloc'd,
 *        the caller frees it; NULL on other failures)
 *
 * Return: 0; -EPROTO with *resp holding the broker's error message; another
 * negative errno.
 */
int netns_ctl_recv(int fd, char **resp)
{
	bool refused;

	return ctl_recv(fd, resp, &refused);
}

/* netns_ctl(), asking again while a refusal passes; *@refused as ctl_recv(). */
static int ctl(const char *line, char **resp, bool *refused)
{
	int r, i;

	for (i = 0;; i++) {
		*resp = NULL;
		r = ctl_recv(netns_ctl_send(line), resp, refused);
		if (!*refused || !netns_ctl_transient(*resp) || i == CTL_RETRIES)
			return r;
		free(*resp);
		usleep(CTL_RETRY_US);
	}
}

int netns_ctl(const char *line, char **resp)
{
	bool refused;

	return ctl(line, resp, &refused);
}

int netns_ctl_err(const char *line, char **resp, struct sl_err *err)
{
	bool refused;
	int r = ctl(line, resp, &refused);

	if (r < 0 && refused)
		sl_err_set(err, 0, "%s", *resp);
	else if (r < 0)
		sl_err_sys(err, r, "cannot reach sluiced at %s", netns_socket_path);
	return r;
}

bool netns_ctl_transient(const char *msg)
{
	/* The broker refuses a caller it cannot place while a sandbox is
	 * registered without its wire (one being created or deleted at this
	 * moment): that passes. So does a broker holding as many control
	 * connections as it keeps (this one was not served). */
	if (!msg)
		return false;
	if (strncmp(msg, CTL_BUSY, strlen(CTL_BUSY)) == 0)
		return true;
	return strncmp(msg, CTL_REFUSED, strlen(CTL_REFUSED)) == 0 &&
	       (strstr(msg, CTL_REFUSED_NO_WIRE) || strstr(msg, CTL_REFUSED_GONE));
}
