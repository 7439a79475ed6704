#include "coordinator/commit/kv_participant.h"

#include <utility>

#include "common/status_macros.h"

namespace ddp::commit {
namespace {

// The loop's side of a KvStore: forwards the KV part of each batch, and the
// store's wake-ups and flushes to the loop.
class KvParticipant final : public CommitParticipant, public kv::KvCommitPipeline {
 public:
  explicit KvParticipant(CommitLoop& loop) : loop_(loop) {}
  void set_store(kv::KvStore* store) { store_ = store; }

  // CommitParticipant (the loop's threads).
  bool Prepare(StateBatch& batch) override { return store_->PrepareCommit(batch.kv); }
  void Finish(const absl::Status& status, StateBatch& batch, Sends& sends) override {
    store_->FinishCommit(status, !batch.empty(), batch.kv, sends);
  }
  void Tick() override { store_->Tick(); }

  // kv::KvCommitPipeline (the store).
  void Notify() override { loop_.Notify(); }
  void Flush() override { loop_.Flush(); }

 private:
  CommitLoop& loop_;
  kv::KvStore* store_ = nullptr;  // set before the loop starts
};

}  // namespace

absl::StatusOr<std::unique_ptr<kv::KvStore>> OpenKvStore(CommitLoop& loop, const Clock& clock,
                                                         kv::KvStoreOptions options) {
  auto participant = std::make_unique<KvParticipant>(loop);
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<kv::KvStore> store,
                       kv::KvStore::Open(loop.store(), *participant, clock, std::move(options)));
  participant->set_store(store.get());
  loop.Add(std::move(participant));
  return store;
}

}  // namespace ddp::commit
