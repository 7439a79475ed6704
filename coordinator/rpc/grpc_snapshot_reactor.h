#ifndef DDP_COORDINATOR_RPC_GRPC_SNAPSHOT_REACTOR_H_
#define DDP_COORDINATOR_RPC_GRPC_SNAPSHOT_REACTOR_H_

// The server side of one KeyValueService.Snapshot stream: sends a file (the
// consistent copy of the database that GrpcKvServiceOptions::snapshot made)
// in chunks of at most chunk_bytes, one write in flight, then finishes OK;
// the first chunk carries the total size and the store revision. The file is
// removed when the stream ends, however it ends.
//
// Lifecycle: created by GrpcKvService::Snapshot; deletes itself in OnDone.
// Thread-safety: gRPC serializes OnWriteDone; the reactor owns its file.

#include <cstdint>
#include <fstream>
#include <string>

#include "ddp/v1/kv.grpc.pb.h"
#include "grpcpp/support/server_callback.h"

namespace ddp::rpc {

class SnapshotReactor final : public grpc::ServerWriteReactor<v1::SnapshotChunk> {
 public:
  SnapshotReactor(std::string path, int64_t revision, size_t chunk_bytes);

  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  // Writes the next chunk, or finishes at the end of the file.
  void SendNext();

  const std::string path_;
  const size_t chunk_bytes_;
  std::ifstream in_;
  v1::SnapshotChunk chunk_;
  bool first_ = true;
  int64_t revision_;
  int64_t total_bytes_ = 0;
};

}  // namespace ddp::rpc

#endif  // DDP_COORDINATOR_RPC_GRPC_SNAPSHOT_REACTOR_H_
