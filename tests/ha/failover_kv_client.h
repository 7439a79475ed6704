#ifndef DDP_TESTS_HA_FAILOVER_KV_CLIENT_H_
#define DDP_TESTS_HA_FAILOVER_KV_CLIENT_H_

// A KeyValueService client over the coordinators of an HA group, as an
// application would write one: a call goes to the coordinator it believes
// leads. A call that surely had no effect is sent again elsewhere: the
// coordinator could not be connected to (nothing was sent), or a standby
// refused it (UNAVAILABLE with ddp-leader: it goes to that leader). A call
// that failed after it reached the leader returns its error: its outcome is
// unknown (the leader may have died after committing it).
//
// Thread-safety: thread-safe (one mutex around the endpoint choice).

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/coordinator_endpoints.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace ddp::testing {

class FailoverKvClient {
 public:
  // `targets`: "a:1,b:2,c:3". A call gives up after `give_up` without a
  // leader (UNAVAILABLE).
  explicit FailoverKvClient(const std::string& targets, absl::Duration give_up = absl::Seconds(20));

  grpc::Status Put(const v1::PutRequest& request, v1::PutResponse* response);
  grpc::Status Add(const v1::AddRequest& request, v1::AddResponse* response);
  grpc::Status Range(const v1::RangeRequest& request, v1::RangeResponse* response);
  grpc::Status Status(v1::StatusResponse* response);

  // The stub of the coordinator believed to lead, after waiting (up to
  // `bound`) for a connection to one; null when none connects. `target` gets
  // its address.
  v1::KeyValueService::Stub* Connected(absl::Duration bound, std::string* target);
  // After a call to `target` failed: a refused call moves on to the leader
  // it named, a broken connection to the next coordinator.
  void Failed(const std::string& target, const grpc::ClientContext& context);

 private:
  template <typename Request, typename Response>
  using Method = grpc::Status (v1::KeyValueService::Stub::*)(grpc::ClientContext*, const Request&,
                                                             Response*);
  template <typename Request, typename Response>
  grpc::Status Call(Method<Request, Response> method, const Request& request, Response* response);

  const absl::Duration give_up_;
  absl::Mutex mu_;
  CoordinatorEndpoints endpoints_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<v1::KeyValueService::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::testing

#endif  // DDP_TESTS_HA_FAILOVER_KV_CLIENT_H_
