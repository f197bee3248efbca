/* SPDX-License-Identifier: MIT */
/* Reading a whole small file, bounded. */
#ifndef SLUICE_COMMON_FILE_H
#define SLUICE_COMMON_FILE_H

#include <stddef.h>

/**
 * file_read_all() - read a regular file of at most @max bytes
 * @path: the file (opened non-blocking: a FIFO never hangs the caller)
 * @max:  the largest size accepted
 * @buf:  on success, the contents plus a NUL (free() it)
 * @len:  on success, the length read (what fstat promised, no more)
 *
 * Return: 0; -EINVAL for something that is not a regular file; -EFBIG when
 * larger than @max; another negative errno from open or read.
 */
int file_read_all(const char *path, size_t max, char **buf, size_t *len);

#endif
