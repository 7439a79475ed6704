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

google::protobuf::Struct ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  google::protobuf::Struct parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text.str(), &parsed).ok()) << text.str();
  return parsed;
}

TEST(CopyWorkerErrorFileTest, RecordLayout_CopiedWithErrorCode) {
  const std::string worker = ::testing::TempDir() + "/worker_error.json";
  const std::string path = ::testing::TempDir() + "/launcher_copy.json";
  std::ofstream(worker) << R"({"message": {"message": "ValueError: boom", "extraInfo": )"
                        << R"({"py_callstack": "Traceback ...", "timestamp": "1700000000"}}})";
  ASSERT_TRUE(CopyWorkerErrorFile(worker, 1, path).ok());
  const google::protobuf::Struct parsed = ReadJson(path);
  const auto& inner = parsed.fields().at("message").struct_value();
  EXPECT_EQ(inner.fields().at("message").string_value(), "ValueError: boom");
  EXPECT_EQ(inner.fields().at("errorCode").number_value(), 1);
  EXPECT_EQ(
      inner.fields().at("extraInfo").struct_value().fields().at("py_callstack").string_value(),
      "Traceback ...");
}

TEST(CopyWorkerErrorFileTest, PlainMessageOrZeroCode_CopiedWithoutErrorCode) {
  const std::string worker = ::testing::TempDir() + "/worker_plain.json";
  const std::string path = ::testing::TempDir() + "/launcher_plain.json";
  std::ofstream(worker) << R"({"message": "text"})";
  ASSERT_TRUE(CopyWorkerErrorFile(worker, 3, path).ok());
  EXPECT_EQ(ReadJson(path).fields().at("message").string_value(), "text");
}

TEST(CopyWorkerErrorFileTest, NoWorkerFile_NotFound) {
  EXPECT_EQ(
      CopyWorkerErrorFile("/nonexistent/error.json", 1, ::testing::TempDir() + "/x.json").code(),
      absl::StatusCode::kNotFound);
}

TEST(WriteLauncherErrorFileTest, UnwritablePath_UnavailableNamingIt) {
  absl::Status status = WriteLauncherErrorFile("/nonexistent-dir/e.json", "m", "d", absl::Now());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("/nonexistent-dir/e.json"), absl::string_view::npos);
}

}  // namespace
}  // namespace ddp::client
