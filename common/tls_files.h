#ifndef DDP_COMMON_TLS_FILES_H_
#define DDP_COMMON_TLS_FILES_H_

// The TLS files of the coordinator's gRPC port and of its clients (ddp-client,
// ddpctl): PEM certificates and keys, checked with OpenSSL. grpc_tls.h makes
// gRPC credentials of them.
//
//   server: cert + key (TLS); + client_ca: clients must present a certificate
//           that client_ca signed (mTLS). Plaintext connections are refused.
//   client: ca: verify the server against it (host name or IP in the
//           certificate's SAN); + cert + key: present them (mTLS).
//
// Check* load every file with OpenSSL before anything listens or dials, so a
// bad file is an error at start that names the flag and the file, not a
// failed handshake later. Messages never contain key material.

#include <string>

#include "absl/status/status.h"

namespace ddp {

struct TlsServerFiles {
  std::string cert;       // --tls-cert: certificate chain
  std::string key;        // --tls-key: its private key
  std::string client_ca;  // --tls-client-ca: require client certificates signed by it
  bool enabled() const { return !cert.empty() || !key.empty() || !client_ca.empty(); }
};

struct TlsClientFiles {
  std::string ca;    // --tls-ca / DDP_TLS_CA: trust these to sign the server's certificate
  std::string cert;  // --tls-cert / DDP_TLS_CERT: present this certificate (mTLS)
  std::string key;   // --tls-key / DDP_TLS_KEY: its private key
  bool enabled() const { return !ca.empty() || !cert.empty() || !key.empty(); }
};

// Possible errors: INVALID_ARGUMENT naming the flag and the file (missing,
// unreadable, not PEM, key not matching the certificate, a half-given pair).
absl::Status CheckTlsServerFiles(const TlsServerFiles& files);
absl::Status CheckTlsClientFiles(const TlsClientFiles& files);

// The client files from DDP_TLS_CA, DDP_TLS_CERT and DDP_TLS_KEY where the
// corresponding field is empty.
TlsClientFiles WithTlsEnvironment(TlsClientFiles files);

}  // namespace ddp

#endif  // DDP_COMMON_TLS_FILES_H_
