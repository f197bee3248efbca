// SPDX-License-Identifier: MIT
/* libFuzzer target: bytes into tls_parse_client_hello(), as they come and
 * re-framed into handshake records of a size the input chooses. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/tls/tls.h"

#define CHECK(c)                          \
	do {                              \
		if (!(c))                 \
			__builtin_trap(); \
	} while (0)

static struct tls_hello H, H2;

static void check(const uint8_t *buf, size_t len)
{
	char sni[sizeof(H.sni)];
	int r = tls_parse_client_hello(buf, len, &H);

	CHECK(r == 1 || r == 0 || r == -ENOTSUP || r == -EBADMSG || r == -EMSGSIZE);
	if (r != 1)
		return;

	CHECK(H.record_bytes >= 5 + 4 && H.record_bytes <= len);
	CHECK(H.hs_len >= 4 && H.hs_len <= TLS_HELLO_MAX);
	CHECK(H.hs_len + 5 * H.records == H.record_bytes);
	CHECK(strlen(H.sni) <= TLS_SNI_MAX);
	CHECK(H.sni_present || (!H.sni_invalid && H.sni[0] == '\0'));
	if (H.sni_present && !H.sni_invalid)
		for (const char *p = H.sni; *p; p++)
			CHECK((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
			      *p == '.');
	for (unsigned i = 0; i < TLS_ALPN_KEEP; i++)
		CHECK(strlen(H.alpn[i]) <= TLS_ALPN_NAME_MAX);

	/* The hello ends where its records end: the same bytes alone give
	 * the same answer, and one byte fewer asks for more. */
	memcpy(sni, H.sni, sizeof(sni));
	CHECK(tls_parse_client_hello(buf, H.record_bytes, &H2) == 1);
	CHECK(strcmp(sni, H2.sni) == 0);
	CHECK(tls_parse_client_hello(buf, H.record_bytes - 1, &H2) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t frag, nrec, outlen, o = 0;
	uint8_t *out;

	check(data, size);

	/* data[0] = fragment size, the rest a handshake message: this
	 * reaches the body parser and the reassembly without the fuzzer
	 * having to invent record framing. */
	if (size < 2)
		return 0;
	frag = data[0] ? data[0] : 256;
	data++;
	size--;
	nrec = (size + frag - 1) / frag;
	outlen = size + 5 * nrec;
	out = malloc(outlen);
	CHECK(out != NULL);
	for (size_t i = 0; i < size; i += frag) {
		size_t n = size - i < frag ? size - i : frag;

		out[o++] = 0x16;
		out[o++] = 0x03;
		out[o++] = 0x01;
		out[o++] = (uint8_t)(n >> 8);
		out[o++] = (uint8_t)n;
		memcpy(out + o, data + i, n);
		o += n;
	}
	check(out, o);
	free(out);
	return 0;
}
