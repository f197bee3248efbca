// SPDX-License-Identifier: MIT
/* Unit tests for netns/ctl.c: what netns_ctl_err() tells its callers, a
 * broker's refusal (errno 0, its message) apart from a broker that cannot
 * be reached (the errno), against a socket served here. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/ctlproto.h"
#include "common/err.h"
#include "netns/netns.h"

static char dir[] = "/tmp/sluice-test-ctl.XXXXXX";
static char sock_path[100];

struct server {
	int lfd;
	const char *answer; /* written whole to the one connection served */
};

/* Serves one connection: reads the request line, answers, closes. */
static void *serve(void *arg)
{
	struct server *s = arg;
	char req[256];
	int fd = accept(s->lfd, NULL, NULL);

	if (fd < 0)
		return NULL;
	if (read(fd, req, sizeof(req)) > 0 &&
	    write(fd, s->answer, strlen(s->answer)) != (ssize_t)strlen(s->answer))
		fprintf(stderr, "test_netns_ctl: short write\n");
	close(fd);
	return NULL;
}

static int listen_at(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(fd, 4), 0);
	return fd;
}

/* Asks @line of a server answering @answer once. */
static int ask(const char *answer, char **resp, struct sl_err *e)
{
	struct server s = { .lfd = listen_at(sock_path), .answer = answer };
	pthread_t t;
	int r;

	assert_int_equal(pthread_create(&t, NULL, serve, &s), 0);
	r = netns_ctl_err("list", resp, e);
	pthread_join(t, NULL);
	close(s.lfd);
	unlink(sock_path);
	return r;
}

static void test_ok(void **state)
{
	struct sl_err e = { 0 };
	char *resp = NULL;

	(void)state;
	assert_int_equal(ask(CTL_OK "sb-1 10.0.0.2 /p.yaml\n", &resp, &e), 0);
	assert_string_equal(resp, "sb-1 10.0.0.2 /p.yaml\n");
	assert_string_equal(sl_err_msg(&e), "");
	free(resp);
}

/* The broker said no: errno 0, its words in @err and in *resp. */
static void test_refused(void **state)
{
	struct sl_err e = { 0 };
	char *resp = NULL;

	(void)state;
	assert_true(ask(CTL_ERR "no such sandbox `sb-9`\n", &resp, &e) < 0);
	assert_int_equal(sl_err_errno(&e), 0);
	assert_string_equal(sl_err_msg(&e), "no such sandbox `sb-9`");
	assert_string_equal(resp, "no such sandbox `sb-9`");
	free(resp);
}

/* No broker there: the errno, and the words the CLI has always printed. */
static void test_unreachable(void **state)
{
	struct sl_err e = { 0 };
	char *resp = NULL, want[256];

	(void)state;
	unlink(sock_path);
	assert_int_equal(netns_ctl_err("list", &resp, &e), -ENOENT);
	assert_null(resp);
	assert_int_equal(sl_err_errno(&e), ENOENT);
	snprintf(want, sizeof(want), "cannot reach sluiced at %s: No such file or directory",
		 sock_path);
	assert_string_equal(sl_err_msg(&e), want);
	assert_int_equal(netns_ctl_err("list", &resp, NULL), -ENOENT);
}

/* An answer that is neither: a failure of the exchange (EIO), not a
 * refusal. */
static void test_garbled(void **state)
{
	struct sl_err e = { 0 };
	char *resp = NULL;

	(void)state;
	assert_int_equal(ask("what\n", &resp, &e), -EIO);
	assert_null(resp);
	assert_int_equal(sl_err_errno(&e), EIO);
}

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(sock_path, sizeof(sock_path), "%s/ctl.sock", dir);
	netns_socket_path = sock_path;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(sock_path);
	rmdir(dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ok),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_unreachable),
		cmocka_unit_test(test_garbled),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
