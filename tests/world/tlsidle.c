// SPDX-License-Identifier: MIT
/*
 * tlsidle: a TLS 1.3 origin that, after each answer, sends records of its
 * own while the connection idles: a NewSessionTicket and a KeyUpdate (not
 * requested), 200 ms after the answer. Such records are not data; a proxy
 * keeping the connection alive may use it again for the next request. Each
 * answer is "PATH conn=N", N counting the connections accepted, so that a
 * test sees whether two requests went over one connection.
 *
 *   tlsidle ADDR PORT CERT KEY READYFILE SECONDS [requested]
 *
 * With "requested", the key update asks the peer to update its own keys
 * too (update_requested): the peer owes a KeyUpdate of its own, which
 * OpenSSL sends with its next write.
 *
 * Connections are served one at a time; the program ends after SECONDS
 * (alarm) or 16 connections, whichever is first.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int listen_on(const char *addr, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int one = 1, fd;

	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 8) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Reads one request head; copies its target to @path. 0 at EOF or error. */
static int read_head(SSL *ssl, char *path, size_t pathsz)
{
	char buf[4096];
	size_t n = 0;
	const char *sp, *sp2;

	while (n < sizeof(buf) - 1) {
		int k = SSL_read(ssl, buf + n, (int)(sizeof(buf) - 1 - n));

		if (k <= 0)
			return 0;
		n += (size_t)k;
		buf[n] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	sp = strchr(buf, ' ');
	sp2 = sp ? strchr(sp + 1, ' ') : NULL;
	if (!sp2 || (size_t)(sp2 - sp - 1) >= pathsz)
		return 0;
	memcpy(path, sp + 1, (size_t)(sp2 - sp - 1));
	path[sp2 - sp - 1] = '\0';
	return 1;
}

static int key_update_type = SSL_KEY_UPDATE_NOT_REQUESTED;

static void serve(SSL *ssl, int conn_no)
{
	char path[1024], body[1200], out[1400];
	struct timespec pause = { 0, 200 * 1000 * 1000 };

	for (int req = 0; req < 8 && read_head(ssl, path, sizeof(path)); req++) {
		int bl = snprintf(body, sizeof(body), "%s conn=%d", path, conn_no);
		int ol = snprintf(out, sizeof(out),
				  "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
				  "Content-Length: %d\r\n\r\n%s",
				  bl, body);

		if (SSL_write(ssl, out, ol) != ol)
			return;
		nanosleep(&pause, NULL);
		/* While the connection idles: a ticket, then a key update. */
		if (SSL_new_session_ticket(ssl) != 1 || SSL_do_handshake(ssl) != 1 ||
		    SSL_key_update(ssl, key_update_type) != 1 || SSL_do_handshake(ssl) != 1) {
			fprintf(stderr, "tlsidle: conn %d: sending a ticket or key update failed\n",
				conn_no);
			ERR_print_errors_fp(stderr);
			return;
		}
		fprintf(stderr, "tlsidle: conn %d: %s answered; ticket and key update sent\n",
			conn_no, path);
	}
}

int main(int argc, char **argv)
{
	SSL_CTX *ctx;
	int lfd;
	FILE *ready;
	struct timeval tv = { 10, 0 };

	if (argc != 7 && !(argc == 8 && !strcmp(argv[7], "requested"))) {
		fprintf(stderr,
			"usage: tlsidle ADDR PORT CERT KEY READYFILE SECONDS [requested]\n");
		return 2;
	}
	if (argc == 8)
		key_update_type = SSL_KEY_UPDATE_REQUESTED;
	alarm((unsigned)atoi(argv[6]));
	signal(SIGPIPE, SIG_IGN); /* a peer gone while we write ends that connection only */
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx || SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
	    SSL_CTX_use_certificate_chain_file(ctx, argv[3]) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, argv[4], SSL_FILETYPE_PEM) != 1) {
		ERR_print_errors_fp(stderr);
		return 1;
	}
	lfd = listen_on(argv[1], atoi(argv[2]));
	if (lfd < 0) {
		perror("tlsidle: listen");
		return 1;
	}
	ready = fopen(argv[5], "w");
	if (!ready)
		return 1;
	fclose(ready);
	for (int conn_no = 1; conn_no <= 16; conn_no++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		SSL *ssl;

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		ssl = SSL_new(ctx);
		if (ssl && SSL_set_fd(ssl, fd) == 1 && SSL_accept(ssl) == 1)
			serve(ssl, conn_no);
		else
			ERR_print_errors_fp(stderr);
		if (ssl) {
			SSL_shutdown(ssl);
			SSL_free(ssl);
		}
		close(fd);
	}
	return 0;
}
