// SPDX-License-Identifier: MIT
/* sluice-probe: the acceptance probe as a static binary. */
#include <stdio.h>
#include <string.h>

#include "common/version.h"
#include "probe/probe.h"

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--version")) {
		printf("sluice-probe %s\n", sluice_version);
		return 0;
	}
	return probe_main(argc, argv);
}
