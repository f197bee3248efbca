/* SPDX-License-Identifier: MIT */
/* sluice probe: what a sandbox's network really allows. */
#ifndef SLUICE_PROBE_H
#define SLUICE_PROBE_H

/* `sluice probe ARGS` and `sluice-probe ARGS`: argv[0] is the command.
 * Return: 0 every check passed, 1 a check failed, 2 misuse. */
int probe_main(int argc, char **argv);

#endif
