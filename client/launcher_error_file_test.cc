#include "client/launcher_error_file.h"

#include <fstream>
#include <sstream>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

TEST(WriteLauncherErrorFileTest, TorchelasticLayout_RoundTrips) {
  const std::string path = ::testing::TempDir() + "/launcher_error.json";
  ASSERT_TRUE(WriteLauncherErrorFile(path, "worker 1 (rank 3) on node 'b' failed: exit code 3",
                                     "Root Cause ...\n  rank 3 ...",
                                     absl::FromUnixSeconds(1700000000))
                  .ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text.str(), &parsed).ok()) << text.str();
  const auto& inner = parsed.fields().at("message").struct_value();
  EXPECT_EQ(inner.fields().at("message").string_value(),
            "worker 1 (rank 3) on node 'b' failed: exit code 3");
  const auto& extra = inner.fields().at("extraInfo").struct_value();
  EXPECT_EQ(extra.fields().at("timestamp").string_value(), "1700000000");
  EXPECT_NE(extra.fields().at("py_callstack").string_value().find("Root Cause"), std::string::npos);
}

TEST(WriteLauncherErrorFileTest, UnwritablePath_UnavailableNamingIt) {
  absl::Status status = WriteLauncherErrorFile("/nonexistent-dir/e.json", "m", "d", absl::Now());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("/nonexistent-dir/e.json"), absl::string_view::npos);
}

}  // namespace
}  // namespace ddp::client
