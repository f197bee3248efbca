// SPDX-License-Identifier: MIT
/* base64 and base64url (RFC 4648), for Basic credentials and JWTs. */

#include <errno.h>
#include <limits.h>

#include "broker/creds/creds_internal.h"

/* ---- base64 -------------------------------------------------------------- */

int creds_base64_encode(const void *in, size_t len, bool url, char *out, size_t outlen)
{
	static const char std[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static const char b64url[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const char *a = url ? b64url : std;
	const unsigned char *p = in;
	size_t i, need, o = 0;

	if (len > (SIZE_MAX / 4) - 4)
		return -ENOSPC;
	need = url ? (len * 4 + 2) / 3 : (len + 2) / 3 * 4;
	if (!out || need + 1 > outlen || need > INT_MAX)
		return -ENOSPC;
	for (i = 0; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		out[o++] = a[(v >> 6) & 63];
		out[o++] = a[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)p[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)p[i + 1] << 8;
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		if (i + 1 < len)
			out[o++] = a[(v >> 6) & 63];
		else if (!url)
			out[o++] = '=';
		if (!url)
			out[o++] = '=';
	}
	out[o] = '\0';
	return (int)o;
}

static int b64val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int creds_base64_decode(const char *in, size_t len, unsigned char *out, size_t outlen)
{
	size_t i, o = 0, pad = 0, rem;
	uint32_t acc = 0;
	unsigned bits = 0;

	if (!in)
		return -EINVAL;
	while (pad < 2 && len > 0 && in[len - 1] == '=') {
		len--;
		pad++;
	}
	rem = len % 4;
	/* One leftover character is never valid; padding, when present,
	 * must make a whole quantum. */
	if (rem == 1 || (pad && (len + pad) % 4))
		return -EINVAL;
	if (len / 4 * 3 + (rem ? rem - 1 : 0) > outlen)
		return -ENOSPC;
	if (len > INT_MAX)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		int v = b64val(in[i]);

		if (v < 0)
			return -EINVAL;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	/* Non-zero leftover bits: a second spelling of the same bytes. */
	if (acc != 0)
		return -EINVAL;
	return (int)o;
}
