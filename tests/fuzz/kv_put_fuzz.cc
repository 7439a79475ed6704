// Arbitrary bytes as a PutRequest from the network, through the conversion
// and validation into a store (in-memory backend): a write the store accepts
// must read back exactly; a refused one must leave nothing.

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/clock.h"
#include "coordinator/commit/testing/kv_store_with_loop.h"
#include "coordinator/kv/kv_store.h"
#include "coordinator/rpc/kv_proto_convert.h"
#include "coordinator/storage/memory_kv_backend.h"
#include "proto/ddp/v1/kv.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddp::v1::PutRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  static ddp::FakeClock clock;
  ddp::kv::KvStoreOptions options;
  options.limits.max_key_bytes = 256;
  options.limits.max_value_bytes = 4096;
  auto store = ddp::commit::KvStoreWithLoop::Open(std::make_unique<ddp::kv::InMemoryKvBackend>(),
                                                  clock, options);
  if (!store.ok()) std::abort();
  ddp::kv::PutRequest put = ddp::rpc::FromProto(proto);
  auto result = (*store)->Put(put);
  ddp::kv::GetRequest get;
  get.ns = put.ns;
  get.key = put.key;
  auto read = (*store)->Get(get);
  if (result.ok()) {
    if (!read.ok() || read->kv.value != put.value) std::abort();
  } else if (read.ok()) {
    std::abort();  // refused, yet stored
  }
  ddp::kv::RangeRequest range;
  range.ns = put.ns;
  range.prefix = put.key.substr(0, put.key.size() / 2);
  (void)(*store)->Range(range);
  (*store)->Shutdown();
  return 0;
}
