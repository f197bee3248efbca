/* SPDX-License-Identifier: MIT */
/* SipHash-2-4, for hash tables keyed by names a sandbox chooses. */
#ifndef SLUICE_COMMON_SIPHASH_H
#define SLUICE_COMMON_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* The 64-bit SipHash-2-4 of @len bytes at @data under the key k0, k1. */
uint64_t siphash24(uint64_t k0, uint64_t k1, const void *data, size_t len);

#endif
