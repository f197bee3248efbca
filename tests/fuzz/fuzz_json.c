// SPDX-License-Identifier: MIT
/* libFuzzer target: bytes into common/json.c's reader, as a whole value
 * and as a string with a small and a large output buffer. */

/*
 * Invariants: the reader never reads past len (ASan: the input is copied
 * to a buffer of exactly len bytes) and never moves backwards or past the
 * end; a value accepted at depth 0 is accepted again from the same start;
 * a string that fits is unescaped the same into any larger buffer, and an
 * unescaped string is shorter than its escaped form (a \uXXXX is 6 bytes
 * in, at most 3 out; a surrogate pair 12 in, 4 out).
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/obuf.h"

#define CHECK(c)                          \
	do {                              \
		if (!(c))                 \
			__builtin_trap(); \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	char *s = malloc(len ? len : 1);
	char small[16], *big = malloc(len + 1);
	struct json j, j2;
	int r;

	if (!s || !big)
		goto out;
	memcpy(s, data, len);

	j = (struct json){ .s = s, .len = len };
	r = sl_json_value(&j, 0);
	CHECK(j.i <= len);
	if (r == 0) {
		j2 = (struct json){ .s = s, .len = len };
		CHECK(sl_json_value(&j2, 0) == 0 && j2.i == j.i);
	}

	if (len && s[0] == '"') {
		struct obuf ws = { .p = small, .cap = sizeof(small) };
		struct obuf wb = { .p = big, .cap = len + 1 };
		struct json js = { .s = s, .len = len };
		struct json jb = { .s = s, .len = len };
		int rs = sl_json_string(&js, &ws), rb = sl_json_string(&jb, &wb);

		CHECK(rs == rb);
		CHECK(js.i <= len && jb.i <= len);
		if (rb == 0) {
			CHECK(js.i == jb.i);
			CHECK(!wb.full && wb.len <= jb.i);
			if (!ws.full)
				CHECK(ws.len == wb.len && memcmp(small, big, ws.len) == 0);
		}
	}
out:
	free(s);
	free(big);
	return 0;
}
