#include "common/grpc_tls.h"

#include <algorithm>

#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace ddp {
namespace {

unsigned int Seconds(absl::Duration interval) {
  return static_cast<unsigned int>(std::max<int64_t>(1, absl::ToInt64Seconds(interval)));
}

}  // namespace

std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const TlsServerFiles& files,
                                                               absl::Duration reload_interval) {
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.cert, files.client_ca, Seconds(reload_interval));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (files.client_ca.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> GrpcChannelCredentials(const TlsClientFiles& files,
                                                                 absl::Duration reload_interval) {
  if (!files.enabled()) return grpc::InsecureChannelCredentials();
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.cert, files.ca, Seconds(reload_interval));
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  if (!files.cert.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  return grpc::experimental::TlsCredentials(options);
}

}  // namespace ddp
