#include "coordinator/ha/cluster_service.h"

#include <pthread.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace ddp::ha {

ClusterService::ClusterService(Status status, Authorize authorize, size_t max_pending)
    : status_(std::move(status)), authorize_(std::move(authorize)), max_pending_(max_pending) {
  answerer_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "cluster-status");
    AnswerLoop();
  });
}

ClusterService::~ClusterService() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  answerer_.join();
}

grpc::ServerUnaryReactor* ClusterService::GetClusterStatus(
    grpc::CallbackServerContext* context, const v1::GetClusterStatusRequest* request,
    v1::ClusterStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (authorize_) {
    const absl::Status allowed = authorize_(context);
    if (!allowed.ok()) {
      reactor->Finish(ToGrpcStatus(allowed));
      return reactor;
    }
  }
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      refused = absl::UnavailableError("the coordinator is shutting down; ask another one");
    } else if (pending_.size() >= max_pending_) {
      refused = absl::ResourceExhaustedError(
          absl::StrCat(max_pending_, " cluster status calls are waiting already; retry later"));
    } else {
      pending_.push_back(Pending{reactor, response, request->etcd_health()});
      return reactor;
    }
  }
  reactor->Finish(ToGrpcStatus(refused));
  return reactor;
}

void ClusterService::AnswerLoop() {
  while (true) {
    Pending next;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ClusterService* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stopping_ || !self->pending_.empty();
          },
          this));
      if (stopping_) {
        for (const Pending& left : pending_) {
          left.reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                            "the coordinator is shutting down; ask another one"));
        }
        pending_.clear();
        return;
      }
      next = pending_.front();
      pending_.pop_front();
    }
    *next.response = status_(next.etcd_health);
    next.reactor->Finish(grpc::Status::OK);
  }
}

}  // namespace ddp::ha
