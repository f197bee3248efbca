// SPDX-License-Identifier: MIT
/* Unit tests for netns/pool.c on a scratch directory (no mounts): a claim
 * takes a ready entry once (a second claim of it fails), skips entries
 * without a marker; the sweep counts the ready entries and drops what is
 * left half-way (an entry without marker, a claim older than
 * NETNS_POOL_STALE_S) but not an entry being taken now, and removes
 * markers whose entry is gone; the pool's directory can be overridden
 * only by a dot entry of NETNS_STATE_DIR; SLUICE_NETNS_POOL=0 turns the
 * pool off. */

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "netns/netns_internal.h"

struct scratch {
	char dir[64];
	int dfd;
};

static int setup(void **state)
{
	struct scratch *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	snprintf(s->dir, sizeof(s->dir), "/tmp/sluice-pool-XXXXXX");
	assert_non_null(mkdtemp(s->dir));
	s->dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(s->dfd >= 0);
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	struct scratch *s = *state;
	char cmd[128];

	close(s->dfd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
	assert_int_equal(system(cmd), 0);
	free(s);
	return 0;
}

static void touch(struct scratch *s, const char *name)
{
	int fd = openat(s->dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);

	assert_true(fd >= 0);
	close(fd);
}

static bool exists(struct scratch *s, const char *name)
{
	return faccessat(s->dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The sweep's drop, here: the names it was given, one after the other. */
static void note(int dfd, const char *id, void *arg)
{
	char *seen = arg;

	strcat(seen, id);
	strcat(seen, " ");
	unlinkat(dfd, id, 0);
}

static void test_claim_once(void **state)
{
	struct scratch *s = *state;
	char id[64];

	touch(s, "a1");
	touch(s, "a1.ready");
	touch(s, "b2"); /* no marker: being made, or half-made */
	assert_int_equal(netns_pool_claim(s->dfd, id, sizeof(id)), 0);
	assert_string_equal(id, "a1");
	assert_false(exists(s, "a1.ready"));
	assert_true(exists(s, "a1.taken"));
	/* The second taker finds nothing ready. */
	assert_int_equal(netns_pool_claim(s->dfd, id, sizeof(id)), -ENOENT);
}

static void test_claim_empty(void **state)
{
	struct scratch *s = *state;
	char id[64];

	assert_int_equal(netns_pool_claim(s->dfd, id, sizeof(id)), -ENOENT);
	touch(s, ".hidden.ready");
	assert_int_equal(netns_pool_claim(s->dfd, id, sizeof(id)), -ENOENT);
	assert_true(exists(s, ".hidden.ready"));
}

static void test_claim_two(void **state)
{
	struct scratch *s = *state;
	char id1[64], id2[64];

	touch(s, "a1");
	touch(s, "a1.ready");
	touch(s, "c3");
	touch(s, "c3.ready");
	assert_int_equal(netns_pool_claim(s->dfd, id1, sizeof(id1)), 0);
	assert_int_equal(netns_pool_claim(s->dfd, id2, sizeof(id2)), 0);
	assert_string_not_equal(id1, id2);
	assert_int_equal(netns_pool_claim(s->dfd, id1, sizeof(id1)), -ENOENT);
}

static void test_sweep(void **state)
{
	struct scratch *s = *state;
	char seen[256] = "";
	time_t now = time(NULL);

	touch(s, "a1"); /* ready */
	touch(s, "a1.ready");
	touch(s, "b2"); /* half-made: no marker */
	touch(s, "c3"); /* being taken just now */
	touch(s, "c3.taken");
	touch(s, "d4.ready"); /* its entry is gone */
	touch(s, "e5.taken"); /* a taker ended between its two unlinks */
	assert_int_equal(netns_pool_sweep(s->dfd, now, note, seen), 1);
	assert_string_equal(seen, "b2 ");
	assert_true(exists(s, "a1") && exists(s, "a1.ready"));
	assert_true(exists(s, "c3") && exists(s, "c3.taken"));
	assert_false(exists(s, "b2"));
	assert_false(exists(s, "d4.ready"));
	/* A fresh claim without its entry is left for its taker to end. */
	assert_true(exists(s, "e5.taken"));

	/* Later, the claim of c3 is a dead taker's: dropped. */
	seen[0] = '\0';
	assert_int_equal(netns_pool_sweep(s->dfd, now + NETNS_POOL_STALE_S + 1, note, seen), 1);
	assert_string_equal(seen, "c3 ");
	assert_false(exists(s, "c3"));
	assert_false(exists(s, "c3.taken"));
	assert_false(exists(s, "e5.taken"));
	assert_true(exists(s, "a1.ready"));
}

static void test_dir(void **state)
{
	(void)state;
	unsetenv("SLUICE_NETNS_POOL_DIR");
	assert_string_equal(netns_pool_dir(), NETNS_POOL_DIR);
	setenv("SLUICE_NETNS_POOL_DIR", NETNS_STATE_DIR "/.pool-test", 1);
	assert_string_equal(netns_pool_dir(),
			    getuid() == 0 ? NETNS_STATE_DIR "/.pool-test" : NETNS_POOL_DIR);
	static const char *const bad[] = { "/tmp/pool",
					   NETNS_STATE_DIR "/pool",
					   NETNS_STATE_DIR "/.",
					   NETNS_STATE_DIR "/../x",
					   NETNS_STATE_DIR "/.a/b",
					   NETNS_STATE_DIR "/..",
					   "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("SLUICE_NETNS_POOL_DIR", bad[i], 1);
		assert_string_equal(netns_pool_dir(), NETNS_POOL_DIR);
	}
	unsetenv("SLUICE_NETNS_POOL_DIR");
}

static void test_enabled(void **state)
{
	(void)state;
	unsetenv("SLUICE_NETNS_POOL");
	assert_true(netns_pool_enabled());
	setenv("SLUICE_NETNS_POOL", "0", 1);
	assert_false(netns_pool_enabled());
	setenv("SLUICE_NETNS_POOL", "1", 1);
	assert_true(netns_pool_enabled());
	unsetenv("SLUICE_NETNS_POOL");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_claim_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_claim_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_claim_two, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep, setup, teardown),
		cmocka_unit_test(test_dir),
		cmocka_unit_test(test_enabled),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
