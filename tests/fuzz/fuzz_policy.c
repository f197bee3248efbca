// SPDX-License-Identifier: MIT
/* Fuzz target: arbitrary bytes into the policy loader, and every lookup on
 * what loads. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/addr.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct policy_error err;
	struct policy *p;
	struct guard_result res;
	struct sl_addr a;

	if (policy_load_buffer("fuzz.yaml", (const char *)data, size, &p, &err) < 0) {
		/* Every error must carry a position-prefixed message. */
		if (strncmp(err.msg, "fuzz.yaml:", 10) != 0)
			__builtin_trap();
		return 0;
	}
	policy_match_name(p, "a.example.com", 13, 443, NULL);
	policy_name_allowed(p, "EXAMPLE.com.", 12);
	addr_parse("10.1.2.3", &a);
	policy_guard(p, &a, 443, GUARD_FROM_NAME, &res);
	addr_parse("2002:a00:1::", &a);
	policy_guard(p, &a, 80, GUARD_FROM_LITERAL, &res);
	policy_unref(p);
	return 0;
}
