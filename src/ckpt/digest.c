/* SHA-256 through OpenSSL's EVP interface: the only file of smoe that
 * includes OpenSSL. */
#include "ckpt_impl.h"

#include <openssl/evp.h>
#include <stdio.h>

struct smoe_ckpt_sha {
    EVP_MD_CTX *ctx;
};

smoe_ckpt_sha *smoe_ckpt_sha_new(void)
{
    smoe_ckpt_sha *s = smoe_malloc(sizeof *s);
    if (!s)
        return NULL;
    s->ctx = EVP_MD_CTX_new();
    if (!s->ctx || EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(s->ctx);
        smoe_free(s);
        return NULL;
    }
    return s;
}

void smoe_ckpt_sha_update(smoe_ckpt_sha *s, const void *p, size_t n)
{
    EVP_DigestUpdate(s->ctx, p, n);
}

void smoe_ckpt_sha_final(smoe_ckpt_sha *s, char hex[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(s->ctx, md, &n);
    for (unsigned int i = 0; i < n && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    hex[64] = 0;
    EVP_MD_CTX_free(s->ctx);
    smoe_free(s);
}
