/* SPDX-License-Identifier: MIT */
/* Checked state files: every line carries a checksum, a whole file ends
 * with a line that counts and chains them, so that a reader tells a torn,
 * truncated or corrupted file from a good one and keeps what verifies. */
#ifndef SLUICE_COMMON_SUMFILE_H
#define SLUICE_COMMON_SUMFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * The format, version 1. Each line is
 *
 *	HHHHHHHHHHHHHHHH PAYLOAD\n
 *
 * where H is SipHash-2-4 (fixed, public key: a checksum, not a MAC) of
 * PAYLOAD, 16 lower-case hex digits. The first line's payload is
 * "sluice-state 1 KIND". A whole file (all but append-only journals) ends
 * with the payload "end N CHAIN": N content lines, CHAIN the sums of the
 * content lines chained, so that a lost, added or reordered whole line is
 * seen as well as a damaged one. A file that does not start like a header
 * was written before checksums (sluice 0.x): SUMFILE_LEGACY, read the old
 * way once and rewritten in this format.
 */
#define SUMFILE_HEX 16
#define SUMFILE_MAGIC "sluice-state 1 "

enum sumfile_status {
	SUMFILE_OK,	 /* header, every line and the end line verify */
	SUMFILE_EMPTY,	 /* zero bytes */
	SUMFILE_LEGACY,	 /* no header: the format from before checksums */
	SUMFILE_DAMAGED, /* framed, but something does not verify */
};

struct sumfile_result {
	enum sumfile_status status;
	unsigned kept;	  /* content lines that verify (handed over) */
	unsigned lost;	  /* content lines that do not (handed over raw) */
	bool header_bad;  /* the first line is not a good header of KIND */
	bool end_bad;	  /* a whole file whose end line is missing, does not
			   * verify, does not count the lines kept, or has
			   * lines after it */
	bool end_missing; /* a whole file without its end line: cut short */
};

/* A file being written: the chain of its sums so far. */
struct sumfile_writer {
	FILE *f;
	uint64_t chain;
	unsigned n;
	int err; /* a line that could not be framed: nothing is committed */
};

/**
 * sumfile_frame() - one framed line
 * @out:     receives "HEX PAYLOAD\n" and a NUL
 * @outlen:  its size
 * @payload: the line's content, without a newline
 * @len:     its length
 *
 * Return: the length written (without the NUL), or -ENOSPC; -EINVAL when
 * @payload holds a newline or a NUL.
 */
int sumfile_frame(char *out, size_t outlen, const char *payload, size_t len);

/* The sum of @payload, as written in front of it. */
uint64_t sumfile_sum(const char *payload, size_t len);

/* Starts a whole file of KIND on @f (header line). */
void sumfile_begin(struct sumfile_writer *w, FILE *f, const char *kind);
/* One content line (no newline in it); errors show in ferror(f). */
void sumfile_line(struct sumfile_writer *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The end line, for a stream the caller finishes itself. Return: 0, or
 * -EINVAL when a line could not be framed (then nothing is written). */
int sumfile_end(struct sumfile_writer *w);

/**
 * sumfile_commit() - the end line, then file_commit() (see common/file.h)
 * @w:    the writer (its stream is closed here, in every case)
 * @tmp:  the stream's file, removed on failure
 * @path: where it goes
 *
 * Return: 0, or a negative errno (-EINVAL: a line could not be framed).
 */
int sumfile_commit(struct sumfile_writer *w, const char *tmp, const char *path);

/**
 * sumfile_parse() - check a framed file and hand over its lines
 * @buf:        the file's bytes
 * @len:        their number
 * @kind:       the KIND its header must name
 * @open_ended: an append-only journal: no end line is expected
 * @fn:         called for each content line in order: its payload (not
 *              NUL-terminated), its length, and whether it verified (a
 *              damaged line comes raw, without its newline; treat it as
 *              untrusted text); a non-zero return stops the walk
 * @arg:        for @fn
 * @res:        what was found
 *
 * @fn is not called for a SUMFILE_LEGACY or SUMFILE_EMPTY file; it may be
 * NULL, to check a file only.
 *
 * Return: what @fn returned last (0 when it always returned 0).
 */
int sumfile_parse(const char *buf, size_t len, const char *kind, bool open_ended,
		  int (*fn)(const char *payload, size_t len, bool ok, void *arg), void *arg,
		  struct sumfile_result *res);

/* "ok", "empty", "old format" or "damaged". */
const char *sumfile_status_name(enum sumfile_status st);

#endif
