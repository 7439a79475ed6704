#include "coordinator/storage/etcd/etcd_channel.h"

#include "coordinator/storage/etcd/etcd_store_spec.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace ddp::storage {

std::shared_ptr<grpc::Channel> OpenEtcdChannel(const std::vector<std::string>& endpoints) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  // A ping every 5 s (etcd's --grpc-keepalive-min-time: more often and etcd
  // drops the connection), the connection dropped when one is not answered
  // within a second: a member that vanished is left for a live one.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect fast: the election's lease is a few seconds.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  return grpc::CreateCustomChannel(EtcdTarget(endpoints), grpc::InsecureChannelCredentials(), args);
}

}  // namespace ddp::storage
