#include "coordinator/storage/write_batch_checks.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::kv {
namespace {

using ::testing::HasSubstr;

KvWriteBatch BatchWithEvents(Revision revision, std::vector<Revision> event_revisions) {
  KvWriteBatch batch;
  batch.revision = revision;
  for (Revision r : event_revisions) {
    Event event;
    event.kv.ns = "ns";
    event.kv.key = "k";
    event.kv.mod_revision = r;
    batch.events.push_back(event);
  }
  return batch;
}

TEST(CheckWriteBatchTest, EventsWithinRange_Ok) {
  EXPECT_TRUE(CheckWriteBatch(BatchWithEvents(5, {3, 3, 4, 5}), 2).ok());
  EXPECT_TRUE(CheckWriteBatch(BatchWithEvents(1, {}), 0).ok());
}

TEST(CheckWriteBatchTest, RevisionNotIncreasing_InvalidArgumentNamingBoth) {
  absl::Status status = CheckWriteBatch(BatchWithEvents(4, {}), 4);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("revision 4 does not exceed"));
}

TEST(CheckWriteBatchTest, EventOutsideRangeOrOutOfOrder_InvalidArgument) {
  EXPECT_EQ(CheckWriteBatch(BatchWithEvents(5, {2}), 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckWriteBatch(BatchWithEvents(5, {6}), 2).code(), absl::StatusCode::kInvalidArgument);
  absl::Status status = CheckWriteBatch(BatchWithEvents(5, {4, 3}), 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("event #1"));
}

TEST(CheckWriteBatchTest, NegativeNextLeaseId_InvalidArgument) {
  KvWriteBatch batch = BatchWithEvents(1, {});
  batch.next_lease_id = -1;
  EXPECT_EQ(CheckWriteBatch(batch, 0).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CheckCompactRevisionTest, BeyondLast_InvalidArgument) {
  EXPECT_TRUE(CheckCompactRevision(3, 3).ok());
  EXPECT_EQ(CheckCompactRevision(4, 3).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CheckReadFromTest, AtOrBelowCompacted_OutOfRangeWithResumePoint) {
  EXPECT_TRUE(CheckReadFrom(4, 3).ok());
  absl::Status status = CheckReadFrom(3, 3);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr("revision 4 or later"));
}

}  // namespace
}  // namespace ddp::kv
