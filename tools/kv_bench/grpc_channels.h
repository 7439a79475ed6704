#ifndef DDP_TOOLS_KV_BENCH_GRPC_CHANNELS_H_
#define DDP_TOOLS_KV_BENCH_GRPC_CHANNELS_H_

// gRPC channels that do not share a TCP connection: channels with identical
// arguments to one target share a subchannel (one connection); a distinct
// "grpc.channel_id" and a local subchannel pool give each its own.

#include <memory>
#include <string>

#include "common/tls_files.h"
#include "grpcpp/grpcpp.h"

namespace ddp::kv_bench {

std::shared_ptr<grpc::Channel> NewDistinctChannel(const std::string& address, int id);

// Channels to `address` (the coordinator) from now on use TLS per `files` and
// send `token` as a bearer token (empty: plaintext, no token). Call before the
// channels are made.
void SecureChannelsTo(const std::string& address, const TlsClientFiles& files,
                      const std::string& token);

}  // namespace ddp::kv_bench

#endif  // DDP_TOOLS_KV_BENCH_GRPC_CHANNELS_H_
