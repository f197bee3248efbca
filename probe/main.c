// SPDX-License-Identifier: MIT
/* sluice-probe: the acceptance probe as a static binary. */
#include "probe/probe.h"

int main(int argc, char **argv)
{
	return probe_main(argc, argv);
}
