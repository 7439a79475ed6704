#include "tools/kv_bench/grpc_channels.h"

namespace ddp::kv_bench {

std::shared_ptr<grpc::Channel> NewDistinctChannel(const std::string& address, int id) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.channel_id", id);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace ddp::kv_bench
