// SPDX-License-Identifier: MIT
/* Unit tests for common/sumfile.c, the framing of state files: a file cut
 * at any byte, a flipped byte anywhere, and an old file without checksums
 * are each told apart from a good file, and only lines that verify are
 * handed over. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/file.h"
#include "common/sumfile.h"

static const char *const lines[] = {
	"10.200.0.2",
	"/etc/sluice/policies/a.yaml",
	"netns",
};
#define NLINES (sizeof(lines) / sizeof(lines[0]))

/* Writes the three lines as KIND "test" through the writer; returns the
 * file's bytes (free them). */
static char *good_file(size_t *len)
{
	char dir[] = "/tmp/sumfile.XXXXXX", path[64], tmp[80];
	struct sumfile_writer w;
	char *buf;
	FILE *f;
	size_t i;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/f", dir);
	snprintf(tmp, sizeof(tmp), "%s/f.tmp", dir);
	f = fopen(tmp, "w");
	assert_non_null(f);
	sumfile_begin(&w, f, "test");
	for (i = 0; i < NLINES; i++)
		sumfile_line(&w, "%s", lines[i]);
	assert_int_equal(sumfile_commit(&w, tmp, path), 0);
	assert_int_equal(file_read_all(path, 1 << 20, &buf, len), 0);
	unlink(path);
	rmdir(dir);
	return buf;
}

struct seen {
	unsigned ok, bad;
	const char *got[16];
	size_t gotlen[16];
};

static int collect(const char *payload, size_t len, bool ok, void *arg)
{
	struct seen *s = arg;

	if (!ok) {
		s->bad++;
		return 0;
	}
	if (s->ok < 16) {
		s->got[s->ok] = payload;
		s->gotlen[s->ok] = len;
	}
	s->ok++;
	return 0;
}

/* Every line handed over as verified is the line written at its place. */
static void assert_prefix_of_original(const struct seen *s)
{
	unsigned i;

	assert_true(s->ok <= NLINES);
	for (i = 0; i < s->ok; i++) {
		assert_int_equal(s->gotlen[i], strlen(lines[i]));
		assert_memory_equal(s->got[i], lines[i], s->gotlen[i]);
	}
}

static void test_sumfile_good(void **state)
{
	struct sumfile_result res;
	struct seen s = { 0 };
	size_t len;
	char *buf = good_file(&len);

	(void)state;
	sumfile_parse(buf, len, "test", false, collect, &s, &res);
	assert_int_equal(res.status, SUMFILE_OK);
	assert_int_equal(res.kept, NLINES);
	assert_int_equal(res.lost, 0);
	assert_int_equal(s.bad, 0);
	assert_prefix_of_original(&s);
	/* Another kind's file is not this one. */
	memset(&s, 0, sizeof(s));
	sumfile_parse(buf, len, "other", false, collect, &s, &res);
	assert_int_equal(res.status, SUMFILE_DAMAGED);
	assert_true(res.header_bad);
	free(buf);
}

/* Cut at every byte offset: never OK, never taken for the old format, and
 * what is handed over is what was written. */
static void test_sumfile_truncated_everywhere(void **state)
{
	struct sumfile_result res;
	size_t len, cut;
	char *buf = good_file(&len);

	(void)state;
	for (cut = 0; cut < len; cut++) {
		struct seen s = { 0 };

		sumfile_parse(buf, cut, "test", false, collect, &s, &res);
		if (cut == 0) {
			assert_int_equal(res.status, SUMFILE_EMPTY);
			continue;
		}
		if (res.status != SUMFILE_DAMAGED)
			fail_msg("cut at %zu of %zu: %s", cut, len,
				 sumfile_status_name(res.status));
		assert_true(res.lost > 0 || res.end_bad || res.header_bad);
		assert_prefix_of_original(&s);
	}
	free(buf);
}

/* One byte changed anywhere (each bit, in turn, at each offset): never
 * OK; the lines handed over are the original ones. */
static void test_sumfile_flipped_byte(void **state)
{
	struct sumfile_result res;
	size_t len, i;
	char *buf = good_file(&len);
	unsigned bit;

	(void)state;
	for (i = 0; i < len; i++) {
		for (bit = 0; bit < 8; bit++) {
			struct seen s = { 0 };

			buf[i] ^= (char)(1 << bit);
			sumfile_parse(buf, len, "test", false, collect, &s, &res);
			if (res.status != SUMFILE_DAMAGED)
				fail_msg("byte %zu bit %u: %s", i, bit,
					 sumfile_status_name(res.status));
			assert_true(s.ok <= NLINES);
			for (unsigned k = 0; k < s.ok; k++) {
				bool known = false;

				for (unsigned j = 0; j < NLINES; j++)
					known |= s.gotlen[k] == strlen(lines[j]) &&
						 !memcmp(s.got[k], lines[j], s.gotlen[k]);
				assert_true(known);
			}
			buf[i] ^= (char)(1 << bit);
		}
	}
	free(buf);
}

/* A whole line removed, or two swapped: the end line's count and chain. */
static void test_sumfile_lines_moved(void **state)
{
	struct sumfile_result res;
	struct seen s = { 0 };
	size_t len;
	char *buf = good_file(&len), *l1, *l2, *l3, *copy;

	(void)state;
	l1 = strchr(buf, '\n') + 1;
	l2 = strchr(l1, '\n') + 1;
	l3 = strchr(l2, '\n') + 1;
	copy = malloc(len);
	assert_non_null(copy);
	/* Without line 2. */
	memcpy(copy, buf, (size_t)(l2 - buf));
	memcpy(copy + (l2 - buf), l3, len - (size_t)(l3 - buf));
	sumfile_parse(copy, len - (size_t)(l3 - l2), "test", false, collect, &s, &res);
	assert_int_equal(res.status, SUMFILE_DAMAGED);
	/* Lines 1 and 2 swapped. */
	memcpy(copy, buf, (size_t)(l1 - buf));
	memcpy(copy + (l1 - buf), l2, (size_t)(l3 - l2));
	memcpy(copy + (l1 - buf) + (l3 - l2), l1, (size_t)(l2 - l1));
	memcpy(copy + (l3 - buf), l3, len - (size_t)(l3 - buf));
	sumfile_parse(copy, len, "test", false, collect, &s, &res);
	assert_int_equal(res.status, SUMFILE_DAMAGED);
	free(copy);
	free(buf);
}

/* Files written before checksums: read the old way. */
static void test_sumfile_legacy(void **state)
{
	static const char *const old[] = {
		"10.200.0.2\n/etc/sluice/p.yaml\nnetns\n",
		"grant github 0\nslp_00112233445566778899aabbccddeeff github 0\n",
		"api.example.com\ncafe\n",
		"name a\naddress 10.200.0.2\n",
	};
	struct sumfile_result res;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(old) / sizeof(old[0]); i++) {
		sumfile_parse(old[i], strlen(old[i]), "test", false, collect, NULL, &res);
		assert_int_equal(res.status, SUMFILE_LEGACY);
	}
}

/* An append-only journal: no end line; a torn last line is lost, the
 * lines before it kept. */
static void test_sumfile_open_ended(void **state)
{
	char buf[512], *p = buf;
	struct sumfile_result res;
	struct seen s = { 0 };
	size_t len;

	(void)state;
	p += sumfile_frame(p, sizeof(buf), "sluice-state 1 j", 16);
	p += sumfile_frame(p, sizeof(buf) - (size_t)(p - buf), "a", 1);
	p += sumfile_frame(p, sizeof(buf) - (size_t)(p - buf), "b", 1);
	len = (size_t)(p - buf);
	sumfile_parse(buf, len, "j", true, collect, &s, &res);
	assert_int_equal(res.status, SUMFILE_OK);
	assert_int_equal(s.ok, 2);
	memset(&s, 0, sizeof(s));
	sumfile_parse(buf, len - 1, "j", true, collect, &s, &res);
	assert_int_equal(res.status, SUMFILE_DAMAGED);
	assert_int_equal(s.ok, 1);
	assert_int_equal(s.bad, 1);
	assert_int_equal(sumfile_frame(buf, sizeof(buf), "a\nb", 3), -EINVAL);
	assert_int_equal(sumfile_frame(buf, 8, "abc", 3), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sumfile_good),
		cmocka_unit_test(test_sumfile_truncated_everywhere),
		cmocka_unit_test(test_sumfile_flipped_byte),
		cmocka_unit_test(test_sumfile_lines_moved),
		cmocka_unit_test(test_sumfile_legacy),
		cmocka_unit_test(test_sumfile_open_ended),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
