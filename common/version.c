// SPDX-License-Identifier: MIT
/* The version string, compiled alone so that a new commit relinks the
 * programs without recompiling everything (the Makefile passes it). */
#include "common/version.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "unknown"
#endif

const char sluice_version[] = SLUICE_VERSION;
