#ifndef DDP_COORDINATOR_HTTP_RELOADING_CERTIFICATE_H_
#define DDP_COORDINATOR_HTTP_RELOADING_CERTIFICATE_H_

// The HTTP listener's TLS identity: a PEM certificate chain and key that are
// read again when either file changes (checked at most every
// `check_interval`, on a handshake), so a renewed certificate is served
// without a restart. A change that does not load (half-written, key and
// certificate not matching) keeps the previous pair, with a warning.
//
// Thread-safety: thread-safe (handshakes run on the HTTP threads).

#include <openssl/ssl.h>
#include <sys/types.h>

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ddp::http {

class ReloadingCertificate {
 public:
  ReloadingCertificate(std::string cert_path, std::string key_path, absl::Duration check_interval);
  ~ReloadingCertificate();
  ReloadingCertificate(const ReloadingCertificate&) = delete;
  ReloadingCertificate& operator=(const ReloadingCertificate&) = delete;

  // Loads the pair (call once before serving). Possible errors:
  // INVALID_ARGUMENT naming the file.
  absl::Status Load();
  // Installs the current pair on a connection (reloading first when due).
  // Returns 1 on success, 0 on failure (OpenSSL's cert callback convention).
  int Apply(SSL* ssl);
  // For SSL_CTX_set_cert_cb: `arg` is the ReloadingCertificate.
  static int CertCallback(SSL* ssl, void* arg);

 private:
  absl::Status LoadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FreeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string cert_path_;
  const std::string key_path_;
  const absl::Duration check_interval_;
  absl::Mutex mu_;
  X509* cert_ ABSL_GUARDED_BY(mu_) = nullptr;
  STACK_OF(X509) * chain_ ABSL_GUARDED_BY(mu_) = nullptr;
  EVP_PKEY* key_ ABSL_GUARDED_BY(mu_) = nullptr;
  struct timespec cert_mtime_ ABSL_GUARDED_BY(mu_) {};
  struct timespec key_mtime_ ABSL_GUARDED_BY(mu_) {};
  absl::Time next_check_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace ddp::http

#endif  // DDP_COORDINATOR_HTTP_RELOADING_CERTIFICATE_H_
