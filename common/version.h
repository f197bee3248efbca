/* SPDX-License-Identifier: MIT */
/* The one version string every sluice program prints (see VERSION, Makefile). */
#ifndef SLUICE_COMMON_VERSION_H
#define SLUICE_COMMON_VERSION_H

/* "0.1.0", or "0.1.0+gHASH[.dirty]" when built from a git checkout. */
extern const char sluice_version[];

#endif
