// SPDX-License-Identifier: MIT
/* The broker's TLS client towards the origin: trust, versions, ALPN and
 * the name the server must prove. */

#include <errno.h>
#include <stddef.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "broker/tls/tls_internal.h"

SSL_CTX *tls_upstream_ctx(const char *ca_file, struct sl_err *err)
{
	static const unsigned char alpn[] = "\x08http/1.1";
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx) {
		tls_err(err, 0, "cannot make a TLS client context");
		return NULL;
	}
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION)) {
		tls_err(err, 0, "cannot set the TLS version");
		goto fail;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (ca_file && *ca_file) {
		if (SSL_CTX_load_verify_file(ctx, ca_file) != 1) {
			tls_err(err, 0, "upstream CA bundle `%s`", ca_file);
			goto fail;
		}
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		/* Reads SSL_CERT_FILE / SSL_CERT_DIR when set. */
		tls_err(err, 0, "system trust store");
		goto fail;
	}
	/* Returns 0 on success, unlike the rest of the API. */
	if (SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1) != 0) {
		tls_err(err, 0, "cannot set ALPN");
		goto fail;
	}
	ERR_clear_error();
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

int tls_upstream_prepare(SSL *ssl, const char *host)
{
	struct tls_host h;

	if (!ssl || tls_host_parse(host, &h) < 0)
		return -EINVAL;
	if (h.is_ip) {
		if (X509_VERIFY_PARAM_set1_ip(SSL_get0_param(ssl), h.ip, (size_t)h.ip_len) != 1)
			goto fail;
		return 0;
	}
	/* No partial wildcards ("f*.example.com"): RFC 6125 leaves them to
	 * the client's taste, and ours is no. */
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (SSL_set_tlsext_host_name(ssl, h.name) != 1 || SSL_set1_host(ssl, h.name) != 1)
		goto fail;
	return 0;
fail:
	ERR_clear_error();
	return -ENOMEM;
}
