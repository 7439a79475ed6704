#include "tools/kv_bench/grpc_channels.h"

#include "common/grpc_tls.h"

namespace ddp::kv_bench {

namespace {

struct Security {
  std::string address;
  TlsClientFiles files;
  std::string token;
};
Security& SecurityConfig() {
  static auto* security = new Security();
  return *security;
}

}  // namespace

void SecureChannelsTo(const std::string& address, const TlsClientFiles& files,
                      const std::string& token) {
  SecurityConfig() = Security{address, files, token};
}

std::shared_ptr<grpc::Channel> NewDistinctChannel(const std::string& address, int id) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.channel_id", id);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  const Security& security = SecurityConfig();
  if (address == security.address) {
    return CoordinatorChannel(address, security.files, security.token, args);
  }
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace ddp::kv_bench
