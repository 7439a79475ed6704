#ifndef DDP_COMMON_GRPC_TLS_H_
#define DDP_COMMON_GRPC_TLS_H_

// gRPC credentials from TLS files (tls_files.h). The files are watched: new
// contents (a renewed certificate, a rotated CA) are used without a restart,
// within `reload_interval`. Server: TLS with the certificate and key; with a
// client CA, client certificates are required and verified (mTLS); plaintext
// connections are refused. Client: the server is verified against the CA (its
// host name or IP must be in the certificate's SAN); with a certificate and
// key, they are presented (mTLS).

#include <memory>

#include "absl/time/time.h"
#include "common/tls_files.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace ddp {

// TLS when files.enabled() (check them first: CheckTls*Files), else plaintext.
std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(
    const TlsServerFiles& files, absl::Duration reload_interval = absl::Seconds(10));
std::shared_ptr<grpc::ChannelCredentials> GrpcChannelCredentials(
    const TlsClientFiles& files, absl::Duration reload_interval = absl::Seconds(10));

// A client channel to the coordinator: TLS per `files`, and, when `token` is
// not empty, "authorization: Bearer TOKEN" on every call (coordinator/auth).
std::shared_ptr<grpc::Channel> CoordinatorChannel(const std::string& target,
                                                  const TlsClientFiles& files,
                                                  const std::string& token,
                                                  const grpc::ChannelArguments& args);

}  // namespace ddp

#endif  // DDP_COMMON_GRPC_TLS_H_
