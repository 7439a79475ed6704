#ifndef DDP_COORDINATOR_KV_TESTING_KV_STORE_FIXTURE_H_
#define DDP_COORDINATOR_KV_TESTING_KV_STORE_FIXTURE_H_

// The typed fixture of the KvStore conformance suite: a store over a fresh
// backend made by `Factory`, a FakeClock, and no ticker thread (tests call
// Tick()).

#include <memory>
#include <string>

#include "common/clock.h"
#include "coordinator/commit/testing/kv_store_with_loop.h"
#include "coordinator/kv/kv_store.h"
#include "gtest/gtest.h"

namespace ddp::kv::testing {

template <typename Factory>
class KvStoreConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }

  void Reopen() {
    store_.reset();
    KvStoreOptions options = options_;
    auto store = commit::KvStoreWithLoop::Open(factory_.Make(), clock_, options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  PutResult MustPut(const std::string& key, const std::string& value, LeaseId lease = 0,
                    const std::string& ns = "job") {
    PutRequest request;
    request.ns = ns;
    request.key = key;
    request.value = value;
    request.lease = lease;
    auto result = store_->Put(request);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : PutResult{};
  }

  FakeClock clock_;
  Factory factory_;
  KvStoreOptions options_;
  commit::KvStoreWithLoop store_;
};

}  // namespace ddp::kv::testing

#endif  // DDP_COORDINATOR_KV_TESTING_KV_STORE_FIXTURE_H_
