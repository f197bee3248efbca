// SPDX-License-Identifier: MIT
/* Bench: the cost per byte of scanning responses for reflected secrets.
 *
 * Relays 64 MiB of response text in 16 KiB reads through reflect_scan()
 * the way relay_response() does (the held-back tail goes again with the
 * next read), for 1, 4 and 16 secrets of 40 bytes and one of 4 KiB, and
 * prints ns per byte and MB/s next to a plain memcpy of the same bytes.
 * The text is lower-case letters and digits, the alphabet most tokens use,
 * with a copy of a secret every 1 MiB, so that matches and near-matches
 * are paid for. Runs on the CPU alone: no namespace, no network. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "broker/reflect.h"

#define TOTAL (64u << 20)
#define CHUNK (16u << 10)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static char rnd_char(void)
{
	static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";

	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return abc[rng % (sizeof(abc) - 1)];
}

/* Scans @text as the relay does; returns seconds, sets *hits. */
static double run(struct reflect *r, const unsigned char *text, unsigned char *buf, size_t *hits)
{
	size_t sent = 0, have = 0;
	double t0 = now_s();

	while (sent < TOTAL) {
		size_t add = TOTAL - sent - have < CHUNK ? TOTAL - sent - have : CHUNK, hold;
		bool final;

		memcpy(buf + have, text + sent + have, add);
		have += add;
		final = sent + have == TOTAL;
		hold = reflect_scan(r, buf, have, final);
		sent += have - hold;
		memmove(buf, buf + have - hold, hold);
		have = hold;
	}
	*hits = r->hits;
	return now_s() - t0;
}

int main(void)
{
	static const size_t counts[] = { 1, 4, 16 };
	unsigned char *text = malloc(TOTAL), *buf = malloc(CHUNK + REFLECT_MAX_LEN);
	unsigned char secrets[16][40], big[REFLECT_MAX_LEN];
	size_t i, j, hits;
	double t, base;

	if (!text || !buf)
		return 1;
	for (i = 0; i < TOTAL; i++)
		text[i] = (unsigned char)rnd_char();
	for (i = 0; i < 16; i++)
		for (j = 0; j < sizeof(secrets[i]); j++)
			secrets[i][j] = (unsigned char)rnd_char();
	for (j = 0; j < sizeof(big); j++)
		big[j] = (unsigned char)rnd_char();
	for (i = 0; i + (1u << 20) <= TOTAL; i += 1u << 20)
		memcpy(text + i + 12345, secrets[(i >> 20) % 16], sizeof(secrets[0]));

	base = now_s();
	for (i = 0; i < TOTAL; i += CHUNK)
		memcpy(buf, text + i, CHUNK);
	base = now_s() - base;
	printf("reflect: %u MiB in %u KiB reads; memcpy alone: %.3f ns/byte\n", TOTAL >> 20,
	       CHUNK >> 10, base * 1e9 / TOTAL);
	for (i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		struct reflect r = { 0 };

		for (j = 0; j < counts[i]; j++)
			reflect_add(&r, secrets[j], sizeof(secrets[j]), (int)j);
		t = run(&r, text, buf, &hits);
		printf("reflect: %2zu secret(s) of 40 bytes: %.3f ns/byte, %.0f MB/s, %zu redacted\n",
		       counts[i], t * 1e9 / TOTAL, TOTAL / t / 1e6, hits);
		reflect_clear(&r);
	}
	{
		struct reflect r = { 0 };

		reflect_add(&r, big, sizeof(big), 0);
		t = run(&r, text, buf, &hits);
		printf("reflect:  1 secret of %d bytes: %.3f ns/byte, %.0f MB/s, %zu redacted\n",
		       REFLECT_MAX_LEN, t * 1e9 / TOTAL, TOTAL / t / 1e6, hits);
		reflect_clear(&r);
	}
	free(text);
	free(buf);
	return 0;
}
