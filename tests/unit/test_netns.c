// SPDX-License-Identifier: MIT
/* Unit tests for netns/: whether a network namespace is still entered or
 * named (netns_ns_in_use(), which `sluice delete` asks of another broker's
 * namespace): a process in it, a lone thread in it, a bind mount naming
 * it count; an open fd of it does not. --broker-netns
 * (netns_enter_broker()): what is not a network namespace is refused with
 * a message that names it; one that is, is entered. netns_linger(): the
 * descriptor given is held by a child until the caller has exited, and
 * not after; the caller's own copy and its stdout are not. Interface
 * names for attach, and the record's attach fields (old records read as
 * a created sandbox's). The cases that
 * make namespaces need CAP_SYS_ADMIN and are skipped without it. */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/err.h"
#include "netns/netns.h"
#include "netns/netns_internal.h"

/* dev and ino of the network namespace open as @fd. */
static void ns_id(int fd, uint64_t *dev, uint64_t *ino)
{
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	*dev = st.st_dev;
	*ino = st.st_ino;
}

static void test_own_namespace_in_use(void **state)
{
	uint64_t dev, ino;

	(void)state;
	assert_int_equal(netns_self_ns_id(&dev, &ino), 0);
	assert_int_equal(netns_ns_in_use(dev, ino), 1);
}

static void test_no_such_namespace(void **state)
{
	uint64_t dev, ino;

	(void)state;
	/* nsfs inode numbers start at 0xF0000000: 1 is nobody's. */
	assert_int_equal(netns_self_ns_id(&dev, &ino), 0);
	assert_int_equal(netns_ns_in_use(dev, 1), 0);
}

struct lone {
	int fd;	      /* its namespace, once made; -errno if unshare failed */
	int ready[2]; /* the thread says it is in it */
	int end[2];   /* the test says it may end */
};

/* A thread alone in a network namespace of its own, until told to end. */
static void *lone_main(void *p)
{
	struct lone *l = p;
	char c;

	if (unshare(CLONE_NEWNET) < 0)
		l->fd = -errno;
	else
		l->fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (write(l->ready[1], "x", 1) == 1 && read(l->end[0], &c, 1) < 0)
		l->fd = -errno;
	return NULL;
}

/* A thread counts though its process's first thread is elsewhere; once it
 * has ended, the fd still held of its namespace does not. */
static void test_thread_in_use_fd_not(void **state)
{
	struct lone l = { .fd = -1 };
	uint64_t dev, ino;
	pthread_t t;
	char c;

	(void)state;
	assert_int_equal(pipe(l.ready), 0);
	assert_int_equal(pipe(l.end), 0);
	assert_int_equal(pthread_create(&t, NULL, lone_main, &l), 0);
	assert_int_equal(read(l.ready[0], &c, 1), 1);
	if (l.fd < 0) {
		assert_int_equal(write(l.end[1], "x", 1), 1);
		pthread_join(t, NULL);
		if (l.fd == -EPERM)
			skip();
		fail_msg("unshare: %s", strerror(-l.fd));
	}
	ns_id(l.fd, &dev, &ino);
	assert_int_equal(netns_ns_in_use(dev, ino), 1);
	assert_int_equal(write(l.end[1], "x", 1), 1);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(l.fd >= 0);
	/* The fd keeps the namespace (and its inode number), but nobody is
	 * in it and nothing names it. pthread_join() returns when the thread
	 * has cleared its tid, which can be before the kernel takes its task
	 * out of /proc: waited for (2 s at most), not assumed. */
	{
		int i, r = 1;

		for (i = 0; i < 200 && (r = netns_ns_in_use(dev, ino)) == 1; i++)
			usleep(10000);
		assert_int_equal(r, 0);
	}
	close(l.fd);
	close(l.ready[0]);
	close(l.ready[1]);
	close(l.end[0]);
	close(l.end[1]);
}

/*
 * The child's side of test_mount_in_use(): in a mount namespace of its
 * own, a network namespace nobody is in, named by a bind mount. Exit
 * status: 0 as expected, 77 not permitted, else the step that failed.
 */
static int mount_child(void)
{
	char path[] = "/tmp/sluice-test-netns.XXXXXX", src[64];
	uint64_t dev, ino;
	int home, fd, k, r = 0;

	if (unshare(CLONE_NEWNS) < 0)
		return errno == EPERM ? 77 : 1;
	if (mount("", "/", NULL, MS_PRIVATE | MS_REC, NULL) < 0)
		return 2;
	home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0 || unshare(CLONE_NEWNET) < 0)
		return 3;
	fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(home, CLONE_NEWNET) < 0)
		return 4;
	ns_id(fd, &dev, &ino);
	k = mkstemp(path);
	if (k < 0)
		return 5;
	close(k);
	snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
	if (mount(src, path, NULL, MS_BIND, NULL) < 0) {
		unlink(path);
		return 6;
	}
	if (netns_ns_in_use(dev, ino) != 1)
		r = 7;
	if (umount2(path, MNT_DETACH) < 0 && !r)
		r = 8;
	unlink(path);
	/* fd still holds it, and no longer counts. */
	if (!r && netns_ns_in_use(dev, ino) != 0)
		r = 9;
	return r;
}

static void test_mount_in_use(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(mount_child());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_enter_broker_refusals(void **state)
{
	static const struct {
		const char *spec;
		int r;
		const char *msg; /* a part of the message */
	} cases[] = {
		{ "-bad", -EINVAL, "bad network namespace name `-bad`" },
		{ "a b", -EINVAL, "bad network namespace name `a b`" },
		{ "sluice-unit-no-such-namespace", -ENOENT,
		  "cannot open network namespace `/run/netns/sluice-unit-no-such-namespace`" },
		{ "/nonexistent/ns", -ENOENT, "cannot open network namespace `/nonexistent/ns`" },
		{ "/etc/hostname", -EINVAL, "`/etc/hostname` is not a namespace" },
		{ "/proc/self/ns/mnt", -EINVAL, "`/proc/self/ns/mnt` is not a network namespace" },
	};
	struct sl_err err;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sl_err_clear(&err);
		assert_int_equal(netns_enter_broker(cases[i].spec, &err), cases[i].r);
		if (!strstr(sl_err_msg(&err), cases[i].msg))
			fail_msg("`%s`: got \"%s\", want \"%s\"", cases[i].spec, sl_err_msg(&err),
				 cases[i].msg);
		assert_int_equal(sl_err_errno(&err), -cases[i].r);
	}
}

/* In a child: leave for a new network namespace, come back by
 * netns_enter_broker() on the parent's. 77: cannot make one. */
static int enter_child(pid_t parent)
{
	uint64_t dev0, ino0, dev, ino;
	struct sl_err err = { 0 };
	char spec[64];

	if (netns_self_ns_id(&dev0, &ino0) < 0)
		return 1;
	if (unshare(CLONE_NEWNET) < 0)
		return 77;
	if (netns_self_ns_id(&dev, &ino) < 0 || ino == ino0)
		return 2;
	snprintf(spec, sizeof(spec), "/proc/%d/ns/net", (int)parent);
	if (netns_enter_broker(spec, &err) < 0)
		return 3;
	if (netns_self_ns_id(&dev, &ino) < 0 || dev != dev0 || ino != ino0)
		return 4;
	return 0;
}

static void test_enter_broker(void **state)
{
	pid_t parent = getpid(), pid;
	int status;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(enter_child(parent));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* Is @fd at its end (every writer gone) within @ms? */
static bool eof_within(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	return poll(&p, 1, ms) == 1 && read(fd, &c, 1) == 0;
}

static void test_linger(void **state)
{
	int held[2], out[2], go[2], ready[2], status;
	char c = 0;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(held), 0);
	assert_int_equal(pipe(out), 0);
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* The caller: its stdout is @out; it lingers with @held's
		 * write end, then waits to be told to exit. */
		close(held[0]);
		close(out[0]);
		close(go[1]);
		close(ready[0]);
		dup2(out[1], STDOUT_FILENO);
		close(out[1]);
		if (netns_linger(held[1]) < 0)
			_exit(2);
		c = fcntl(held[1], F_GETFD) < 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) < 0)
			_exit(3);
		_exit(0);
	}
	close(held[1]);
	close(out[1]);
	close(go[0]);
	close(ready[1]);
	assert_int_equal(read(ready[0], &c, 1), 1);
	assert_int_equal(c, 'y');		/* the caller's own copy is closed */
	assert_false(eof_within(held[0], 100)); /* the child holds it */
	assert_int_equal(write(go[1], "x", 1), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* The caller's stdout ends with it: the child holds none of it. */
	assert_true(eof_within(out[0], 0));
	/* And the child lets go once the caller is gone. */
	assert_true(eof_within(held[0], 5000));
	close(held[0]);
	close(out[0]);
	close(go[1]);
	close(ready[0]);
}

/* Interface names for attach --ifname: the kernel's rules. */
static void test_ifname_ok(void **state)
{
	static const struct {
		const char *name;
		bool ok;
	} cases[] = {
		{ "eth0", true },
		{ "sl0", true },
		{ "a", true },
		{ "net1.100", true },
		{ "x-y_z", true },
		{ "123456789012345", true },
		{ "1234567890123456", false },
		{ "", false },
		{ ".", false },
		{ "..", false },
		{ "a/b", false },
		{ "a:b", false },
		{ "a b", false },
		{ "a\tb", false },
		{ "\x7f", false },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (netns_ifname_ok(cases[i].name) != cases[i].ok)
			fail_msg("`%s`: expected %d", cases[i].name, cases[i].ok);
	}
}

/* The record keeps what attach needs (interface, attached, whether sluice
 * named the namespace); a record from before attach reads as a created
 * sandbox's: eth0, not attached, named. Needs to write NETNS_STATE_DIR. */
static void test_state_attach_fields(void **state)
{
	struct netns_sandbox sb = { 0 }, got;
	struct sl_err err = { 0 };
	char dir[128], path[160];
	FILE *f;

	(void)state;
	snprintf(sb.name, sizeof(sb.name), "ut-attach-%d", (int)getpid());
	snprintf(dir, sizeof(dir), NETNS_STATE_DIR "/%s", sb.name);
	if ((mkdir(NETNS_STATE_DIR, 0755) < 0 && errno != EEXIST) || mkdir(dir, 0755) < 0)
		skip();
	sb.addr = 0x0ac80006;
	sb.gw = sb.addr - 1;
	netns_link_name(sb.addr, sb.link);
	sb.ports = (struct netns_ports){ 3128, 3129, 53 };
	snprintf(sb.ifname, sizeof(sb.ifname), "sl0");
	sb.attached = true;
	sb.ns_named = false;
	assert_int_equal(netns_state_write(&sb), 0);
	assert_int_equal(netns_state_read(sb.name, &got, &err), 0);
	assert_string_equal(got.ifname, "sl0");
	assert_true(got.attached);
	assert_false(got.ns_named);

	snprintf(path, sizeof(path), "%s/sandbox", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f,
		"name %s\naddress 10.200.0.6\ngateway 10.200.0.5\nlink %s\nproxy_port 3128\n"
		"transparent_port 3129\ndns_port 53\nbroker_netns 1:2\nsocket /x\n",
		sb.name, sb.link);
	fclose(f);
	assert_int_equal(netns_state_read(sb.name, &got, &err), 0);
	assert_string_equal(got.ifname, NETNS_SANDBOX_IF);
	assert_false(got.attached);
	assert_true(got.ns_named);

	/* A record of the old format (read once, then written again checked)
	 * with a bad value: refused. */
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f,
		"name %s\naddress 10.200.0.6\ngateway 10.200.0.5\nlink %s\nproxy_port 3128\n"
		"transparent_port 3129\ndns_port 53\nbroker_netns 1:2\nsocket /x\n"
		"attached maybe\n",
		sb.name, sb.link);
	fclose(f);
	assert_int_equal(netns_state_read(sb.name, &got, &err), -EINVAL);

	unlink(path);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_namespace_in_use),
		cmocka_unit_test(test_no_such_namespace),
		cmocka_unit_test(test_thread_in_use_fd_not),
		cmocka_unit_test(test_mount_in_use),
		cmocka_unit_test(test_enter_broker_refusals),
		cmocka_unit_test(test_enter_broker),
		cmocka_unit_test(test_linger),
		cmocka_unit_test(test_ifname_ok),
		cmocka_unit_test(test_state_attach_fields),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
