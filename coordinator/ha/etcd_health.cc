#include "coordinator/ha/etcd_health.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "coordinator/storage/etcd/etcd_channel.h"
#include "etcd/rpc.grpc.pb.h"

namespace ddp::ha {
namespace {

v1::EtcdEndpointStatus CheckOne(const std::string& endpoint, absl::Duration timeout) {
  v1::EtcdEndpointStatus out;
  out.set_endpoint(endpoint);
  auto stub = etcdserverpb::Maintenance::NewStub(storage::OpenEtcdChannel({endpoint}));
  etcdserverpb::StatusResponse response;
  grpc::ClientContext context;
  context.set_deadline(storage::EtcdDeadline(timeout));
  grpc::Status status = stub->Status(&context, etcdserverpb::StatusRequest(), &response);
  if (!status.ok()) {
    out.set_error(absl::StrCat("unreachable: ", FromGrpcStatus(status).ToString()));
    return out;
  }
  out.set_version(response.version());
  out.set_db_size_bytes(response.dbsize());
  out.set_raft_term(response.raftterm());
  out.set_is_raft_leader(response.leader() != 0 &&
                         response.leader() == response.header().member_id());
  if (response.leader() == 0) {
    out.set_error("no raft leader (the cluster lost quorum?)");
  } else if (response.errors_size() > 0) {
    out.set_error(absl::StrJoin(response.errors(), "; "));
  } else {
    out.set_healthy(true);
  }
  return out;
}

}  // namespace

std::vector<v1::EtcdEndpointStatus> CheckEtcdEndpoints(const std::vector<std::string>& endpoints,
                                                       absl::Duration timeout) {
  std::vector<v1::EtcdEndpointStatus> out(endpoints.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    threads.emplace_back([&, i] { out[i] = CheckOne(endpoints[i], timeout); });
  }
  for (std::thread& thread : threads) thread.join();
  return out;
}

}  // namespace ddp::ha
