#ifndef DDP_TESTS_CRASH_TEST_CHANNEL_H_
#define DDP_TESTS_CRASH_TEST_CHANNEL_H_

// A gRPC channel for crash tests: its own TCP connection (`id` keeps channels
// apart), and reconnects within 10-100 ms after a coordinator restart instead
// of gRPC's default backoff of a second or more.

#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"

namespace ddp::testing {

inline std::shared_ptr<grpc::Channel> MakeFastReconnectChannel(const std::string& address, int id) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.channel_id", id);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 10);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 10);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 100);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace ddp::testing

#endif  // DDP_TESTS_CRASH_TEST_CHANNEL_H_
