#include "coordinator/http/reloading_certificate.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace ddp::http {
namespace {

struct timespec MtimeOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return {};
  return st.st_mtim;
}

bool Same(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

}  // namespace

ReloadingCertificate::ReloadingCertificate(std::string cert_path, std::string key_path,
                                           absl::Duration check_interval)
    : cert_path_(std::move(cert_path)),
      key_path_(std::move(key_path)),
      check_interval_(check_interval) {}

ReloadingCertificate::~ReloadingCertificate() {
  absl::MutexLock lock(&mu_);
  FreeLocked();
}

void ReloadingCertificate::FreeLocked() {
  if (cert_ != nullptr) X509_free(cert_);
  if (chain_ != nullptr) sk_X509_pop_free(chain_, X509_free);
  if (key_ != nullptr) EVP_PKEY_free(key_);
  cert_ = nullptr;
  chain_ = nullptr;
  key_ = nullptr;
}

absl::Status ReloadingCertificate::Load() {
  absl::MutexLock lock(&mu_);
  return LoadLocked();
}

absl::Status ReloadingCertificate::LoadLocked() {
  const struct timespec cert_mtime = MtimeOf(cert_path_);
  const struct timespec key_mtime = MtimeOf(key_path_);
  FILE* file = fopen(cert_path_.c_str(), "r");
  if (file == nullptr) return absl::InvalidArgumentError(absl::StrCat("cannot open ", cert_path_));
  X509* cert = PEM_read_X509(file, nullptr, nullptr, nullptr);
  STACK_OF(X509)* chain = sk_X509_new_null();
  while (X509* next = PEM_read_X509(file, nullptr, nullptr, nullptr)) sk_X509_push(chain, next);
  fclose(file);
  ERR_clear_error();
  file = fopen(key_path_.c_str(), "r");
  EVP_PKEY* key = file != nullptr ? PEM_read_PrivateKey(file, nullptr, nullptr, nullptr) : nullptr;
  if (file != nullptr) fclose(file);
  const bool ok = cert != nullptr && key != nullptr && X509_check_private_key(cert, key) == 1;
  ERR_clear_error();
  if (!ok) {
    if (cert != nullptr) X509_free(cert);
    if (key != nullptr) EVP_PKEY_free(key);
    sk_X509_pop_free(chain, X509_free);
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot load the certificate ", cert_path_, " with the key ", key_path_,
        " (missing, not PEM, or not a matching pair)"));
  }
  FreeLocked();
  cert_ = cert;
  chain_ = chain;
  key_ = key;
  cert_mtime_ = cert_mtime;
  key_mtime_ = key_mtime;
  return absl::OkStatus();
}

int ReloadingCertificate::Apply(SSL* ssl) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  if (now >= next_check_) {
    next_check_ = now + check_interval_;
    if (!Same(MtimeOf(cert_path_), cert_mtime_) || !Same(MtimeOf(key_path_), key_mtime_)) {
      absl::Status reloaded = LoadLocked();
      if (reloaded.ok()) {
        DDP_LOG(INFO) << "HTTP TLS: loaded the new certificate " << cert_path_;
      } else {
        DDP_LOG(WARNING) << "HTTP TLS: keeping the previous certificate: " << reloaded.message();
      }
    }
  }
  if (cert_ == nullptr) return 0;
  return SSL_use_cert_and_key(ssl, cert_, key_, chain_, /*override=*/1);
}

int ReloadingCertificate::CertCallback(SSL* ssl, void* arg) {
  return static_cast<ReloadingCertificate*>(arg)->Apply(ssl);
}

}  // namespace ddp::http
