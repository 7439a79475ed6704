#include "common/tls_files.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ddp {
namespace {

// The first OpenSSL error, for a message (never key material: OpenSSL's
// errors name the failing step).
std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no PEM data found";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

absl::Status Bad(const char* flag, const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(flag, "=", path, ": ", what));
}

// Reads every certificate of a PEM file; at least one.
absl::Status CheckCertificates(const char* flag, const std::string& path, X509** first) {
  FILE* file = fopen(path.c_str(), "r");
  if (file == nullptr) return Bad(flag, path, "cannot open it (does it exist, is it readable?)");
  int count = 0;
  while (X509* cert = PEM_read_X509(file, nullptr, nullptr, nullptr)) {
    if (count++ == 0 && first != nullptr) {
      *first = cert;
    } else {
      X509_free(cert);
    }
  }
  ERR_clear_error();  // the end of the file reads as an error
  fclose(file);
  if (count == 0) return Bad(flag, path, "no PEM certificate in it");
  return absl::OkStatus();
}

absl::Status CheckPair(const char* cert_flag, const std::string& cert_path, const char* key_flag,
                       const std::string& key_path) {
  if (cert_path.empty() != key_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(cert_path.empty() ? cert_flag : key_flag, " is missing: ", cert_flag, " and ",
                     key_flag, " go together (a certificate and its private key)"));
  }
  if (cert_path.empty()) return absl::OkStatus();
  X509* cert = nullptr;
  DDP_RETURN_IF_ERROR(CheckCertificates(cert_flag, cert_path, &cert));
  FILE* file = fopen(key_path.c_str(), "r");
  if (file == nullptr) {
    X509_free(cert);
    return Bad(key_flag, key_path, "cannot open it (does it exist, is it readable?)");
  }
  EVP_PKEY* key = PEM_read_PrivateKey(file, nullptr, nullptr, nullptr);
  fclose(file);
  if (key == nullptr) {
    X509_free(cert);
    return Bad(key_flag, key_path,
               absl::StrCat("not a PEM private key (or encrypted): ", OpenSslError()));
  }
  const bool matches = X509_check_private_key(cert, key) == 1;
  ERR_clear_error();
  EVP_PKEY_free(key);
  X509_free(cert);
  if (!matches) {
    return Bad(key_flag, key_path,
               absl::StrCat("does not belong to the certificate in ", cert_flag, "=", cert_path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckTlsServerFiles(const TlsServerFiles& files) {
  if (!files.enabled()) return absl::OkStatus();
  if (files.cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs --tls-cert and --tls-key: mTLS is TLS with client certificates");
  }
  absl::Status status = CheckPair("--tls-cert", files.cert, "--tls-key", files.key);
  if (!status.ok() || files.client_ca.empty()) return status;
  return CheckCertificates("--tls-client-ca", files.client_ca, nullptr);
}

absl::Status CheckTlsClientFiles(const TlsClientFiles& files) {
  if (!files.enabled()) return absl::OkStatus();
  if (files.ca.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert/--tls-key need --tls-ca (DDP_TLS_CA): the CA that signed the "
        "coordinator's certificate");
  }
  DDP_RETURN_IF_ERROR(CheckCertificates("--tls-ca", files.ca, nullptr));
  return CheckPair("--tls-cert", files.cert, "--tls-key", files.key);
}

TlsClientFiles WithTlsEnvironment(TlsClientFiles files) {
  auto fill = [](std::string& field, const char* name) {
    const char* value = std::getenv(name);
    if (field.empty() && value != nullptr) field = value;
  };
  fill(files.ca, "DDP_TLS_CA");
  fill(files.cert, "DDP_TLS_CERT");
  fill(files.key, "DDP_TLS_KEY");
  return files;
}

}  // namespace ddp
