#include "tools/rdzv_sim/async_client_queues.h"

#include <pthread.h>

#include "absl/strings/str_cat.h"
#include "tools/rdzv_sim/async_client_bidi.h"

namespace ddp::rdzv_sim {

AsyncClientQueues::AsyncClientQueues(int queues) {
  for (int i = 0; i < (queues < 1 ? 1 : queues); ++i) {
    queues_.push_back(std::make_unique<grpc::CompletionQueue>());
    grpc::CompletionQueue* queue = queues_.back().get();
    threads_.emplace_back([queue, i] {
      pthread_setname_np(pthread_self(), absl::StrCat("rdzv-cq-", i).c_str());
      void* tag = nullptr;
      bool ok = false;
      while (queue->Next(&tag, &ok)) static_cast<AsyncClientTag*>(tag)->Proceed(ok);
    });
  }
}

AsyncClientQueues::~AsyncClientQueues() { Stop(); }

void AsyncClientQueues::Stop() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& queue : queues_) queue->Shutdown();
  for (std::thread& thread : threads_) thread.join();
}

}  // namespace ddp::rdzv_sim
