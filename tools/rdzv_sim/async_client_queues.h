#ifndef DDP_TOOLS_RDZV_SIM_ASYNC_CLIENT_QUEUES_H_
#define DDP_TOOLS_RDZV_SIM_ASYNC_CLIENT_QUEUES_H_

// K completion queues for AsyncClientBidi streams, each drained by a thread
// of its own ("rdzv-cq-<i>"); stream i goes on queue i % K.
//
// Lifecycle: construct (threads start) -> streams bound to queue(i) -> every
// stream done -> Stop() (or the destructor): queues shut down, drained,
// threads joined.
// Thread-safety: queue() from any thread; Stop from one.

#include <memory>
#include <thread>
#include <vector>

#include "grpcpp/grpcpp.h"

namespace ddp::rdzv_sim {

class AsyncClientQueues {
 public:
  explicit AsyncClientQueues(int queues);  // >= 1
  ~AsyncClientQueues();
  AsyncClientQueues(const AsyncClientQueues&) = delete;
  AsyncClientQueues& operator=(const AsyncClientQueues&) = delete;

  grpc::CompletionQueue* queue(size_t stream_index) {
    return queues_[stream_index % queues_.size()].get();
  }
  void Stop();

 private:
  std::vector<std::unique_ptr<grpc::CompletionQueue>> queues_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
};

}  // namespace ddp::rdzv_sim

#endif  // DDP_TOOLS_RDZV_SIM_ASYNC_CLIENT_QUEUES_H_
