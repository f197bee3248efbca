// SPDX-License-Identifier: MIT
/*
 * A certificate's public key, set without OpenSSL 3.0's encoder.
 *
 * X509_set_pubkey() of a key made by a provider (EVP_PKEY_Q_keygen(), as
 * every key here is) encodes it through OpenSSL 3.0's encoder lookup and
 * decodes the result again: 0.45 ms a call on the machine this was
 * measured on, most of what making a sandbox's CA and signing a leaf cost
 * (the signature itself is 0.05 ms). A key in the legacy form, which an
 * EC key is turned into by a copy (EVP_PKEY_get1_EC_KEY(), 0.01 ms), is
 * encoded by its method directly, and the certificate keeps that key, so
 * X509_get0_pubkey() works on it as on any other. The bytes are the same
 * (test_tls compares them). Those calls are deprecated in 3.0, hence this
 * file of its own with the deprecation warnings off; any other kind of
 * key goes the slow way.
 *
 * tls_new_p256_key() makes a key in that form from the start: the copy is
 * not needed then, and the key's PEM (the key process writes one for every
 * CA) is encoded by its method too, 0.07 ms where a provider key's took
 * 0.15 ms. A signature with it costs 0.03 ms more (OpenSSL hands the key
 * to its provider once, and keeps that). Making a CA, key file included,
 * went from 0.21-0.31 ms to 0.11-0.16 ms (200 of each, one machine).
 */
#define OPENSSL_SUPPRESS_DEPRECATED

#include <errno.h>

#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/x509.h>

#include "broker/tls/tls_internal.h"

EVP_PKEY *tls_new_p256_key(void)
{
	EC_KEY *ec = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1);
	EVP_PKEY *key = ec ? EVP_PKEY_new() : NULL;

	if (!key || !EC_KEY_generate_key(ec) || !EVP_PKEY_assign_EC_KEY(key, ec)) {
		EC_KEY_free(ec);
		EVP_PKEY_free(key);
		ERR_clear_error();
		/* The provider's way, should the legacy one be unavailable. */
		return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	}
	return key;
}

int tls_set_pubkey(X509 *x, EVP_PKEY *key)
{
	EVP_PKEY *legacy = NULL;
	EC_KEY *ec;
	int ok;

	if (EVP_PKEY_get_base_id(key) == EVP_PKEY_EC && (ec = EVP_PKEY_get1_EC_KEY(key))) {
		legacy = EVP_PKEY_new();
		if (!legacy || !EVP_PKEY_assign_EC_KEY(legacy, ec)) {
			EC_KEY_free(ec);
			EVP_PKEY_free(legacy);
			return -ENOMEM;
		}
	}
	ok = X509_set_pubkey(x, legacy ? legacy : key);
	EVP_PKEY_free(legacy);
	ERR_clear_error();
	return ok ? 0 : -EINVAL;
}
