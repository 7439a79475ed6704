#include "coordinator/rpc/grpc_snapshot_reactor.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace ddp::rpc {

SnapshotReactor::SnapshotReactor(std::string path, int64_t revision, size_t chunk_bytes)
    : path_(std::move(path)),
      chunk_bytes_(chunk_bytes),
      in_(path_, std::ios::binary | std::ios::ate),
      revision_(revision) {
  if (!in_) {
    Finish(grpc::Status(grpc::StatusCode::INTERNAL,
                        absl::StrCat("cannot read the snapshot copy ", path_)));
    return;
  }
  total_bytes_ = static_cast<int64_t>(in_.tellg());
  in_.seekg(0);
  SendNext();
}

void SnapshotReactor::SendNext() {
  chunk_.Clear();
  std::string data(chunk_bytes_, '\0');
  in_.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in_.gcount()));
  if (data.empty() && !first_) {
    Finish(in_.eof() ? grpc::Status::OK
                     : grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                    absl::StrCat("reading the snapshot copy ", path_,
                                                 " failed: take the snapshot again")));
    return;
  }
  if (first_) {
    chunk_.set_total_bytes(total_bytes_);
    chunk_.set_revision(revision_);
    first_ = false;
  }
  chunk_.set_data(std::move(data));
  StartWrite(&chunk_);
}

void SnapshotReactor::OnWriteDone(bool ok) {
  if (!ok) {
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    return;
  }
  SendNext();
}

void SnapshotReactor::OnDone() {
  unlink(path_.c_str());
  delete this;
}

}  // namespace ddp::rpc
