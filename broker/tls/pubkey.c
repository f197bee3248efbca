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
 */
#define OPENSSL_SUPPRESS_DEPRECATED

#include <errno.h>

#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "broker/tls/tls_internal.h"

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
